"""An agent's tools as its spec names them: a built-in by name, or a custom one by `package.module:function`.

`resolve_tool` imports a custom tool (from the agent file's folder first); `check_tool_syntax` checks a reference
without importing anything; `check_tool_reference` is the spec's validator, which lets `spec.trust` decide whether
a reference to code is imported, kept as text, or refused.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path
from types import ModuleType

from pydantic import ValidationInfo

from pagemind.runtime.spec.trust import code_reference
from pagemind.tools import BUILTIN_TOOLS, Tool, tool


def resolve_tool(reference: str, folder: Path | None = None) -> Tool:
    """A built-in tool by name, or a custom one by `package.module:function`; raises ValueError if neither.
    `folder`: the folder of the agent file that names it, where the module is looked for first."""
    if reference in BUILTIN_TOOLS:
        return BUILTIN_TOOLS[reference]
    if ":" not in reference:
        known = ", ".join(sorted(BUILTIN_TOOLS))
        raise ValueError(f"unknown tool '{reference}' (built-ins: {known}; custom tools: package.module:function)")
    module_name, _, attribute = reference.partition(":")
    try:
        module = _import_tool_module(module_name, folder)
    except Exception as exc:
        where = (
            f" (looked beside the agent file, in {folder}, and on the Python path)"
            if folder is not None
            else " (a module beside an agent's YAML file is found when the agent is loaded from that file)"
        )
        raise ValueError(
            f"cannot import module '{module_name}' for tool '{reference}'{where}: {type(exc).__name__}: {exc}"
        ) from None
    target = getattr(module, attribute, None)
    if target is None:
        raise ValueError(f"module '{module_name}' has no attribute '{attribute}'")
    if isinstance(target, Tool):
        return target
    if callable(target):
        try:
            made: Tool = tool(target)
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        return made
    raise ValueError(f"'{reference}' is not a function or a @tool")


# sys.path is the process's: one import with an agent's folder on it at a time (the daemon reads files off its loop).
_FOLDER_IMPORT = threading.Lock()


def _import_tool_module(name: str, folder: Path | None) -> ModuleType:
    """Import a custom tool's module; with `folder` (the agent file's own), from there first, as Python runs a
    script with its folder first on the path. The folder is on sys.path only while this import runs, so that it
    shadows nothing for the rest of the process: an import the module makes later, inside a function, does not
    see it (import helper modules at the top of the tool's module). The module stays in sys.modules under its
    name, which is how the agent finds the tool again when it is loaded."""
    if folder is None or name.partition(".")[0] in sys.modules:
        return importlib.import_module(name)
    entry = str(folder)
    with _FOLDER_IMPORT:
        sys.path.insert(0, entry)
        try:
            return importlib.import_module(name)
        finally:
            sys.path.remove(entry)  # the first occurrence: the one inserted above


def check_tool_syntax(reference: str) -> str:
    """A built-in tool's name or a `package.module:function` reference, checked without importing anything."""
    module_name, colon, attribute = reference.partition(":")
    if reference in BUILTIN_TOOLS or (colon and module_name and attribute):
        return reference
    known = ", ".join(sorted(BUILTIN_TOOLS))
    raise ValueError(f"unknown tool '{reference}' (built-ins: {known}; custom tools: package.module:function)")


def check_tool_reference(reference: str, info: ValidationInfo) -> str:
    """The validator of an entry of `AgentSpec.tools`: the reference as given, once checked (and, from a file,
    imported); raises ValueError naming what is wrong."""
    # A custom tool is code: `spec.trust` decides (imported from a file, kept as text from a shared trace, refused
    # from a client). A spec read from a file the user named ({"tool_folder": its folder}) finds the modules beside it.
    if reference in BUILTIN_TOOLS:
        return reference
    if ":" not in reference:
        return check_tool_syntax(reference)  # raises: no such built-in
    if code_reference(reference, info, "tool"):
        context = info.context if isinstance(info.context, dict) else {}
        resolve_tool(reference, context.get("tool_folder"))
    return reference
