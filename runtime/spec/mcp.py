"""MCP servers an agent uses: `tools: [{mcp: {...}}]` entries in its YAML, validated into `McpServerSpec`s.

An entry names a server to start (`command`, `args`, `env`: stdio) or one to reach (`url`, `headers`: streamable
HTTP). Its tools appear beside the built-ins (`runtime.mcp`). A server to start is code this machine runs, so it is
a reference to code (`spec.trust`), and a server reached by URL is called from this machine: a file the operator
loads may name either; a spec a client posts to the daemon may not (refused); a spec read from something shared (a
trace, an imported agent file) keeps the entry as text and never starts or calls it (`McpServerSpec.startable` is
False there). The agent's YAML moves its `{mcp: …}` entries out of
`tools` into `mcp_servers` when it is validated (`split_mcp_entries`), so `AgentSpec.tools` stays a list of names.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from pagemind.runtime.spec.trust import REFUSED, trust_of

DEFAULT_CALL_TIMEOUT_S = 30.0  # a tool call's limit (Letta #2549: a dead server hung the agent)
_PREFIX = r"^[A-Za-z0-9_-]{0,32}$"


class McpServerSpec(BaseModel):
    """One MCP server whose tools the agent gets: started as a subprocess (stdio) or reached by URL."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(
        None, max_length=64, description="what logs and tool errors call the server (default: the command or host)"
    )
    command: str | None = Field(None, min_length=1, description="stdio: the program to start, e.g. npx or uvx")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments")
    env: dict[str, str] = Field(
        default_factory=dict, description="stdio: variables set for it, over a minimal default environment"
    )
    cwd: str | None = Field(None, description="stdio: the folder it runs in (default: the current one)")
    url: str | None = Field(None, description="streamable HTTP: the server's endpoint, e.g. http://localhost:8000/mcp")
    headers: dict[str, str] = Field(
        default_factory=dict, description="streamable HTTP: headers sent with every request"
    )
    bearer_token_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="streamable HTTP: the environment variable holding a token sent as `Authorization: Bearer …`",
    )
    prefix: str = Field(
        "",
        pattern=_PREFIX,
        description="put before each of the server's tool names (e.g. `gh_`), to tell its tools from others of the "
        "same name; a tool whose name is taken anyway is left out, with a warning",
    )
    timeout_s: float = Field(
        DEFAULT_CALL_TIMEOUT_S,
        gt=0,
        le=3600,
        description="seconds one tool call (or listing the tools) may take; past it the model gets a tool error and "
        "the session restarts at the next call",
    )
    start_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="seconds starting the server and opening its session may take (npx, uvx)"
    )
    _startable: bool = PrivateAttr(True)

    @model_validator(mode="after")
    def _one_transport(self, info: ValidationInfo) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a server to start) or `url` (a server to reach), not both")
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"url: {self.url!r} is not an http(s) URL")
            if self.args or self.env or self.cwd:
                raise ValueError("`args`, `env` and `cwd` are for a server started with `command`")
        elif self.headers or self.bearer_token_env:
            raise ValueError("`headers` and `bearer_token_env` are for a server reached by `url`")
        trust = trust_of(info)
        if trust == "client":  # `command` runs code here; `url` would make the daemon call any address it can reach
            raise PydanticCustomError(
                REFUSED,
                "an agent posted to the API may name no MCP server (one started by `command` runs code on the "
                "daemon's machine, one reached by `url` is called from it); put the agent in the served folder",
            )
        self._startable = trust == "file"
        return self

    @property
    def startable(self) -> bool:
        """Whether this process may start or call the server: only when it comes from a file the operator loads."""
        return self._startable

    @property
    def label(self) -> str:
        """The server's name in logs and errors."""
        if self.name:
            return self.name
        if self.command is not None:
            return " ".join([PurePath(self.command).name, *self.args[:2]])
        return urlsplit(self.url or "").netloc


def split_mcp_entries(data: Any, info: ValidationInfo) -> Any:
    """An agent's raw data with its `tools: [{mcp: …}]` entries moved into `mcp_servers` (after any given there),
    each validated here so that a problem is reported at the entry as written (`tools[2].mcp.command`)."""
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
        return data
    tools, servers = [], list(data.get("mcp_servers") or [])
    for index, entry in enumerate(data["tools"]):
        if not (isinstance(entry, dict) and "mcp" in entry):
            tools.append(entry)
            continue
        if set(entry) != {"mcp"} or not isinstance(entry["mcp"], dict):
            raise ValueError(f"tools[{index}]: an MCP entry is `mcp:` and a mapping of the server's fields, alone")
        try:
            servers.append(McpServerSpec.model_validate(entry["mcp"], context=info.context))
        except ValidationError as exc:
            first = exc.errors()[0]
            if first["type"] == REFUSED:
                raise PydanticCustomError(
                    REFUSED, "tools[{index}].mcp: {msg}", {"index": index, "msg": first["msg"]}
                ) from None
            where = ".".join(str(part) for part in first["loc"])
            message = re.sub(r"^Value error, ", "", first["msg"])
            raise ValueError(f"tools[{index}].mcp{'.' + where if where else ''}: {message}") from None
    return {**data, "tools": tools, "mcp_servers": servers}
