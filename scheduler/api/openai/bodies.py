"""The proxy's bodies: the chat-completion request as apps send it (the fields pagemind reads; the rest of OpenAI's
are accepted and left to the agent's YAML), and the completion, chunk and model list it answers with."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class ChatMessage(BaseModel):
    """One message of the app's conversation."""

    model_config = ConfigDict(extra="allow")  # name, tool_calls, refusal …: kept, hashed with the message

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    """`stream_options`: accepted; pagemind reports no usage (the agent's steps are its own)."""

    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """`POST /v1/chat/completions`. Sampling fields (`temperature`, `max_tokens`, `stop` …) are accepted and not
    used: the agent's model and settings are its YAML's."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(
        min_length=1,
        max_length=200,
        description="`agent:NAME` (an agent the key may reach) or `template:NAME` (the end user's agent of that "
        "template, made on first use)",
    )
    messages: list[ChatMessage] = Field(min_length=1, description="the new message, or the whole conversation")
    stream: bool = Field(False, description="answer as `chat.completion.chunk` server-sent events")
    stream_options: StreamOptions | None = None
    user: str | None = Field(None, max_length=128, description="the end user (with `template:`); or X-Pagemind-User")
    n: int | None = Field(None, description="only 1: one agent, one reply")
    tools: list[dict[str, Any]] | None = Field(
        None,
        description="the app's function tools, offered beside the agent's own; a call to one is handed to the app "
        "(`tool_calls`, finish_reason `tool_calls`) and its result, sent back as a `tool` message, resumes the turn",
    )
    tool_choice: str | dict[str, Any] | None = Field(
        None, description="`auto` (the default), `none`, a named function of `tools`, or `required` with one tool"
    )
    functions: list[dict[str, Any]] | None = Field(None, description="refused: send function tools as `tools`")


def wire_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A paused turn's calls (`tool_calls` of its result: id, name, arguments) as OpenAI's message has them."""
    return [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls
    ]


def completion(
    run_id: str, created: datetime, model: str, reply: str | None, finish: str, calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """A whole `chat.completion`: the agent's reply as the assistant's content, and the calls of the app's tools
    when the turn paused for them."""
    message: dict[str, Any] = {"role": "assistant", "content": reply, "refusal": None}
    if calls:
        message["tool_calls"] = wire_calls(calls)
    return {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion",
        "created": int(created.timestamp()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
    }


def chunk(run_id: str, created: datetime, model: str, delta: dict[str, Any], finish: str | None = None) -> str:
    """One `chat.completion.chunk` as a server-sent event's `data:` line (with its blank line)."""
    import json

    body = {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion.chunk",
        "created": int(created.timestamp()),
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


class ModelOut(BaseModel):
    """One entry of `GET /v1/models`: an agent (`agent:NAME`) or a template (`template:NAME`)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = Field(description="the end user an agent belongs to; `pagemind` for templates and nobody's")


class ModelList(BaseModel):
    """What `GET /v1/models` answers: the agents the key may reach, then the templates."""

    object: Literal["list"] = "list"
    data: list[ModelOut]


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON Schema with its `$defs` put in place of their references: the OpenAPI document defines no
    `#/$defs/…` (a body read by hand is documented inline)."""
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref", "")
            if reference.startswith("#/$defs/"):
                return resolve(definitions[reference.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


COMPLETION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "an OpenAI chat.completion (`stream: false`)",
    "required": ["id", "object", "created", "model", "choices"],
    "properties": {
        "id": {"type": "string"},
        "object": {"type": "string", "enum": ["chat.completion"]},
        "created": {"type": "integer"},
        "model": {"type": "string"},
        "choices": {"type": "array", "items": {"type": "object"}},
    },
}
