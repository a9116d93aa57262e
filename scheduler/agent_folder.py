"""The agents folder: the YAML files the daemon serves, read again when their mtime changes.

Each file is an agent, or a template (`template: true`) other agents are made from; any file can serve as a
template. A file that does not load is not served: `errors` says why, `problems` says it in one line per file (what
`pagemind serve` prints at start), and the name the file would define is unavailable (`AgentUnavailable`) rather
than unknown. The catalog of every agent served, the folder's and those made through the daemon, is
`scheduler.catalog`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import structlog
import yaml

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import SpecError, load_spec
from pagemind.scheduler.errors import AgentUnavailable, UnknownAgent

log = structlog.get_logger("pagemind.scheduler")


@dataclass
class AgentFile:
    """A YAML file of the folder as last read: its spec, and the mtime it was read at."""

    path: Path
    mtime: float
    spec: AgentSpec


class AgentFolder:
    """The YAML files of one folder (none: `directory` None), by the agent (or template) name each defines."""

    def __init__(self, directory: str | Path | None):
        self.directory = Path(directory) if directory is not None else None
        self.errors: dict[Path, str] = {}  # YAML files that do not load, and why (the API's readiness shows them)
        self._claims: dict[Path, str] = {}  # the agent name each file that does not load would define
        self._files: dict[str, AgentFile] = {}
        self.rescan()

    def rescan(self) -> None:
        """Read the folder again: new files are added, removed ones dropped, changed ones re-read."""
        if self.directory is None:
            return
        seen: dict[str, AgentFile] = {}
        paths = sorted(p for p in self.directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        for gone in set(self.errors) - set(paths):  # a removed file no longer keeps its name unavailable
            self.errors.pop(gone)
            self._claims.pop(gone, None)
        for path in paths:
            current = next((f for f in self._files.values() if f.path == path), None)
            loaded = self._read(path, current)
            if loaded is None:
                continue
            if loaded.spec.name in seen:
                self.errors[path] = f"the name '{loaded.spec.name}' is also used by {seen[loaded.spec.name].path}"
                continue
            seen[loaded.spec.name] = loaded
        self._files = seen

    def _read(self, path: Path, current: AgentFile | None) -> AgentFile | None:
        try:
            mtime = path.stat().st_mtime
            if current is not None and current.mtime == mtime:
                return current
            spec = load_spec(path)
        except (OSError, SpecError) as exc:
            if self.errors.get(path) != str(exc):  # once per version: every rescan reads a broken file again
                log.warning("agent_yaml_invalid", path=str(path), error=str(exc)[:300])
            self.errors[path] = str(exc)
            self._claims[path] = _claimed_name(path)
            return current  # keep serving the last good version of a file being edited
        self.errors.pop(path, None)
        self._claims.pop(path, None)
        return AgentFile(path, mtime, spec)

    def problems(self) -> list[str]:
        """One line per YAML file of the folder that is not served: the file, then each problem (line, field,
        message) — what `pagemind serve` prints at start."""
        return [one_line(path, why) for path, why in sorted(self.errors.items())]

    def unavailable(self, name: str) -> UnknownAgent:
        """The error for a name no agent (or template) is served under: `AgentUnavailable` when a file that does
        not load would define it, else `UnknownAgent`."""
        for path, claimed in self._claims.items():
            if claimed == name and path in self.errors:
                return AgentUnavailable(name, str(path), one_line(path, self.errors[path]))
        return UnknownAgent(name)

    def file(self, name: str) -> AgentFile | None:
        """The file that defines `name`, read again if it changed since; None if there is none (any more)."""
        entry = self._files.get(name)
        if entry is None:
            return None
        fresh = self._read(entry.path, entry) if entry.path.exists() else None
        if fresh is None:
            self._files.pop(name, None)
            return None
        self._files[name] = fresh
        return fresh

    def last_read(self, name: str) -> AgentFile | None:
        """The file that defined `name` at the last read (no look at the disk); None if none did."""
        return self._files.get(name)

    def __contains__(self, name: object) -> bool:
        """Whether a file defined `name` (an agent or a template) at the last read."""
        return name in self._files

    def agent_names(self) -> list[str]:
        """The names of the folder's agents (not its templates), as last read."""
        return [name for name, entry in self._files.items() if not entry.spec.template]

    def specs(self) -> list[AgentSpec]:
        """The specs of every YAML in the folder, templates and agents."""
        return [entry.spec for entry in self._files.values()]

    def templates(self) -> list[str]:
        """The names any agent can be made from: every YAML in the folder."""
        return sorted(self._files)

    def is_yaml_agent(self, name: str) -> bool:
        """Whether `name` is an agent defined by a file in the folder (not a template)."""
        entry = self.file(name)
        return entry is not None and not entry.spec.template


def one_line(path: Path, error: str) -> str:
    """A file's load error in one line: `FILE: line N field: message; line M …` (a `SpecError` names the file
    in each of its problems; said once here)."""
    prefix = f"{path}:"
    parts = []
    for problem in (line.strip() for line in error.splitlines()):
        if not problem:
            continue
        rest = problem.removeprefix(prefix).strip() if problem.startswith(prefix) else problem
        parts.append(f"line {rest}" if rest[:1].isdigit() else rest)
    return f"{path}: {'; '.join(parts) or 'does not load'}"


def _claimed_name(path: Path) -> str:
    """The agent name a file that does not load would define: its `name:` when the YAML still parses (a tool that
    cannot be imported, a field out of range), else the file's stem (a syntax error)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        data = None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else path.stem
