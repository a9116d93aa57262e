"""`pagemind init [DIR]`: write the example agents shipped with the package into a folder (default ./agents),
so that a user with the wheel alone has files to run: the companion, the assistant, and `weatherbot.yaml` with
its custom tool beside it (`weather_tools.py`).

The examples are package data (`runtime/data/agents/`; the repository's `agents/` holds byte-identical copies of
the two agents, which a test keeps so). Nothing is ever overwritten: when any of the files is there already,
nothing is written and the command exits 2. Standard library only at module level (the CLI's start).
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli.shared import CliError, out

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings

EXAMPLES_PACKAGE = "pagemind.runtime.data.agents"
EXAMPLES = {
    "companion.yaml": "a long-term companion: structured profile, archival and recall memory",
    "assistant.yaml": "a task assistant that keeps its plan in a block",
    "weatherbot.yaml": "an agent with a custom tool, weather_tools:forecast",
    "weather_tools.py": "that tool: a @tool function beside the YAML (edit it to call a real service)",
}
"""The files `init` writes, in order, with what each is (the listing it prints)."""


def add_parser(sub: Any) -> None:
    """Add `init` to the CLI's subcommands."""
    init = sub.add_parser("init", help="write the example agents (and a custom tool) into a folder to start from")
    init.add_argument("directory", nargs="?", default="agents", help="the folder to write them to (default ./agents)")
    init.set_defaults(handler=cmd_init)


def example_text(name: str) -> bytes:
    """The shipped example file `name` (one of `EXAMPLES`), as bytes."""
    return resources.files(EXAMPLES_PACKAGE).joinpath(name).read_bytes()


def write_examples(folder: Path) -> list[Path]:
    """Write every example into `folder` (made if missing) and return the paths written; raises CliError (exit 2),
    having written nothing, when `folder` is not a folder or already holds a file of one of their names."""
    if folder.exists() and not folder.is_dir():
        raise CliError(f"{folder} exists and is not a folder; choose another: pagemind init DIR")
    targets = [folder / name for name in EXAMPLES]
    taken = [path.name for path in targets if path.exists() or path.is_symlink()]
    if taken:
        raise CliError(
            f"{folder} already has {', '.join(taken)}; nothing was written (init never overwrites a file). "
            "Choose another folder: pagemind init DIR"
        )
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for path in targets:
        try:
            with path.open("xb") as file:  # exclusive: a file made since the check above is not overwritten either
                file.write(example_text(path.name))
        except FileExistsError:
            raise CliError(f"{path} appeared while init was writing; it was left as it is") from None
        written.append(path)
    return written


async def cmd_init(args: argparse.Namespace, settings: Settings) -> int:
    """Write the examples, list them, and say what to try next."""
    folder = Path(args.directory)
    written = write_examples(folder)
    out(f"wrote {len(written)} files to {folder}/:")
    width = max(len(str(path)) for path in written)
    for path in written:
        out(f"  {str(path):<{width}}  {EXAMPLES[path.name]}")
    companion = folder / "companion.yaml"
    out("")
    out(f"next, with no model: pagemind context {companion}   (the prompt it compiles, tokens per section)")
    out(f"then, with a model:  OPENAI_API_KEY=sk-... pagemind chat {companion}")
    out(f'a custom tool:       OPENAI_API_KEY=sk-... pagemind run {folder / "weatherbot.yaml"} -m "Weather in Oslo?"')
    return 0
