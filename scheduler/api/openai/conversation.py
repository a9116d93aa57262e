"""Which of the app's messages pagemind has not stored yet, and the key that stores them once.

An app may send only its new message or its whole conversation each time; pagemind keeps the conversation itself
(every message in its store, the window and the summary), so it takes only what is new:

- **What is new**: the user messages after the conversation's last assistant message (all of them when there is
  none). Whole-history apps send `[… assistant, user]`: the user's latest words; apps that send only what is new
  send `[user]`. Several new user messages in a row are joined (a blank line between) into one message: one
  request is one turn and one reply. Older messages are never taken again, so a conversation the app brings from
  elsewhere does not replay its history into the agent.
- **Once, even when sent again**: the new text goes to the agent's inbox with an idempotency key, and the inbox
  stores one item per key and agent (a key seen before returns that run and its reply, and runs nothing):
  - the request's `Idempotency-Key` header, when the app sends one (`extra_headers` in the openai SDK): any retry
    of that request is the same turn;
  - else, when the request holds an assistant message, a hash of the whole conversation up to the new message
    (roles, texts, tool calls; system messages left out): sending the same history again — a retry, a client
    that timed out and resends — is the same turn, while the next turn's history (one reply and one message
    longer) is another;
  - else (no assistant message: a conversation's first message, or an app that sends only its new message) no
    key: the same words sent twice are two messages, as a user who says "ok" twice said it twice. Such a request
    is retry-safe only with an `Idempotency-Key`.
- **Tool results** (`role: tool`) after the last assistant message are the app's results for the calls of a turn
  that paused for its own tools (`scheduler.api.openai.app_tools`): they go with the new text, by call id, and
  resume that turn when no user text comes with them. A retry is keyed as above, and the runtime stores a result
  only for a call still open, so the same results sent again are never stored twice.
- **System messages** (`system`, `developer`) are not stored and do not reach the agent: its instructions are its
  YAML's, and an app's system prompt, resent with every request, would otherwise pile up in its memory. The
  response says how many were left out (`X-Pagemind-Ignored-System`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pagemind.scheduler.api.openai.bodies import ChatMessage
from pagemind.scheduler.api.openai.errors import ProxyError

SYSTEM_ROLES = ("system", "developer")
KEY_PREFIX = "openai:"


@dataclass(frozen=True)
class Incoming:
    """What a request brings: the text to store as the user's message, its idempotency key, and how many system
    messages were left out."""

    text: str
    key: str | None
    ignored_system: int
    results: dict[str, str] = field(default_factory=dict)  # the app's tool results, by call id


def results_of(after: Sequence[tuple[int, ChatMessage]]) -> dict[str, str]:
    """The `tool` messages among the new ones: the app's results for the calls it was handed, by call id."""
    results: dict[str, str] = {}
    for i, message in after:
        if message.role != "tool":
            continue
        call_id = (message.model_extra or {}).get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ProxyError(
                400, "invalid_request", f"messages[{i}]: a tool message needs its `tool_call_id`", f"messages[{i}]"
            )
        results[call_id] = text_of(message.content, i)
    return results


def text_of(content: str | list[dict[str, Any]] | None, index: int) -> str:
    """A message's text: a string, or the `text` parts of a list (an image or audio part is refused: an agent's
    memory holds text)."""
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise ProxyError(
                400,
                "unsupported_content",
                f"messages[{index}]: only text parts are taken (got a {part.get('type')!r} part)",
                param=f"messages[{index}].content",
            )
        texts.append(part["text"])
    return "\n".join(texts)


def incoming(messages: Sequence[ChatMessage], idempotency_key: str | None) -> Incoming:
    """The new user text of a request's messages, the app's tool results among them, and its key (see the module
    docstring); 400 when there is neither text nor a result."""
    talk = [(i, m) for i, m in enumerate(messages) if m.role not in SYSTEM_ROLES]
    last_reply = max((n for n, (_, m) in enumerate(talk) if m.role == "assistant"), default=-1)
    new = [(i, m) for i, m in talk[last_reply + 1 :] if m.role == "user"]
    texts = [text for i, m in new if (text := text_of(m.content, i).strip())]
    results = results_of(talk[last_reply + 1 :])
    if not texts and not results:
        raise ProxyError(
            400,
            "no_new_message",
            "nothing to answer: no user message with text or tool result after the conversation's last assistant "
            "message",
            param="messages",
        )
    if idempotency_key:
        key: str | None = KEY_PREFIX + "h:" + _digest(idempotency_key)
    elif last_reply >= 0:
        key = KEY_PREFIX + "c:" + _digest(json.dumps([_canonical(m) for _, m in talk], sort_keys=True))
    else:
        key = None
    return Incoming("\n\n".join(texts), key, len(messages) - len(talk), results)


def _canonical(message: ChatMessage) -> list[Any]:
    """What identifies a message in the conversation's hash: role, text, tool calls and their results' ids."""
    extra = message.model_extra or {}
    calls = [
        [c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments")]
        for c in extra.get("tool_calls") or ()
        if isinstance(c, dict)
    ]
    return [message.role, message.content or "", calls, extra.get("tool_call_id")]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:48]
