"""The app's own tools on the proxy: its `tools` and `tool_choice` checked and mapped to what the agent's turn can
honour (`runtime.app_calls`), and the results it sends back for the calls it was handed.

- **`tools`**: OpenAI function tools (`{"type": "function", "function": {"name", "description", "parameters"}}`),
  offered to the agent's model beside its own for this turn. A name that is one of the agent's own tools
  (`send_message`, the memory tools …) is refused (400 `tool_name_taken`): the agent's tools win no clash, and a
  silent shadow would hand a memory call to the app. Legacy `functions` are refused: send them as `tools`.
- **`tool_choice`**: `auto` (the default), `none` (the app's tools are not offered this turn) and a named function
  of the app's (the run's first step is sent with that `tool_choice`, so the answer is a call to it, as OpenAI's
  is) are honoured, and so is `required` when the app has one tool (that tool, named). `required` with several
  tools is refused (400 `tool_choice_unsupported`): forcing "some tool" on the agent's model would be met by a
  memory tool as well as by the app's, so the answer could not be promised to be a call of the app's.
- **Results**: `role: tool` messages after the conversation's last assistant message answer the calls of the
  paused turn, by `tool_call_id`. The runtime stores each once, paired with its call, and a call the app does not
  answer gets a result saying so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pagemind.scheduler.api.openai.errors import ProxyError

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def app_tools(tools: list[dict[str, Any]] | None, tool_choice: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The request's tools as the turn offers them (none for `tool_choice: none`) and the function a forced
    `tool_choice` names (None: the model chooses); a 400 for what is not valid or cannot be honoured (the module
    docstring)."""
    if not tools:
        if tool_choice not in (None, "auto", "none"):
            raise ProxyError(400, "invalid_request", "`tool_choice` needs `tools`", param="tool_choice")
        return [], None
    checked = [_checked(tool, i) for i, tool in enumerate(tools)]
    names = [t["function"]["name"] for t in checked]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ProxyError(400, "invalid_tools", f"tool names must be unique: {', '.join(twice)}", param="tools")
    if tool_choice in (None, "auto"):
        return checked, None
    if tool_choice == "none":
        return [], None
    if tool_choice == "required" and len(names) == 1:
        return checked, names[0]
    if tool_choice == "required":
        raise ProxyError(
            400,
            "tool_choice_unsupported",
            "`tool_choice: required` is honoured with one tool only: the agent's model would meet it with a memory "
            "tool as well as with one of the app's; name the function instead",
            param="tool_choice",
        )
    return checked, _named(tool_choice, names)


def _named(tool_choice: Any, names: list[str]) -> str:
    """The app's function a `{"type": "function", "function": {"name": ...}}` choice names; 400 for anything else."""
    function = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(tool_choice, dict) or tool_choice.get("type") != "function" or name not in names:
        raise ProxyError(
            400,
            "invalid_tool_choice",
            '`tool_choice` is `auto`, `none`, `required` or `{"type": "function", "function": {"name": N}}` '
            "naming one of the request's `tools`",
            param="tool_choice",
        )
    return str(name)


def refuse_clashes(tools: list[dict[str, Any]], own: Iterable[str]) -> None:
    """400 `tool_name_taken` when one of the app's tools has the name of one of the agent's own."""
    taken = sorted({t["function"]["name"] for t in tools} & set(own))
    if taken:
        raise ProxyError(
            400,
            "tool_name_taken",
            f"the agent has its own tool named {', '.join(taken)}; rename the app's tool",
            param="tools",
        )


def _checked(tool: Any, index: int) -> dict[str, Any]:
    """One tool entry, as the model is sent it: type, and the function's name, description and parameters."""
    where = f"tools[{index}]"
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
        raise ProxyError(400, "invalid_tools", f"{where}: only `function` tools are taken", param=where)
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ProxyError(400, "invalid_tools", f"{where}: a function name is 1-64 letters, digits, _ or -", param=where)
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, dict):
        raise ProxyError(400, "invalid_tools", f"{where}: `parameters` must be a JSON Schema object", param=where)
    entry: dict[str, Any] = {"name": name, "parameters": parameters}
    if isinstance(function.get("description"), str):
        entry["description"] = function["description"]
    if isinstance(function.get("strict"), bool):
        entry["strict"] = function["strict"]
    return {"type": "function", "function": entry}
