"""A provider's prompt cache, imitated for scripted models: the tokens of a request that repeat the previous
request's exactly, from the start, are reported as cached (`usage.prompt_tokens_details.cached_tokens`), as
OpenAI, Anthropic, vLLM and llama.cpp reuse only an exact prefix. The prompt is rendered as a provider renders it
for its cache: the tool schemas, then each message (role, content, tool calls) in order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pagemind.runtime.tokens import encoding


def rendered_prompt(tools: Sequence[Any] | None, messages: Sequence[dict[str, Any]]) -> list[int]:
    """The prompt as one token list (o200k_base): the tool schemas, then each message in order."""
    enc = encoding("o200k_base")
    tokens: list[int] = enc.encode(json.dumps(list(tools or []), sort_keys=True), disallowed_special=())
    for message in messages:
        text = f"<|{message['role']}|>{message.get('content') or ''}{json.dumps(message.get('tool_calls') or [])}"
        tokens += enc.encode(text, disallowed_special=())
    return tokens


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class PromptCache:
    """Remembers the last prompt it saw; `usage` reports a request's tokens and how many of them it had cached."""

    previous: list[int] = field(default_factory=list)

    def usage(self, body: dict[str, Any], completion_tokens: int = 10) -> dict[str, Any]:
        """The `usage` object a caching provider returns for the chat-completions request `body`."""
        tokens = rendered_prompt(body.get("tools"), body.get("messages") or [])
        cached = common_prefix(self.previous, tokens)
        self.previous = tokens
        return {
            "prompt_tokens": len(tokens),
            "completion_tokens": completion_tokens,
            "total_tokens": len(tokens) + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
