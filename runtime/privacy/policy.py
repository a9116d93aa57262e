"""One agent's redaction: its `privacy:` policy, its placeholder book, and the texts the runtime hands it.

The runtime calls it at the few places where text enters the agent (`runtime.loop`, `runtime.agent`): the user's
message before it is stored, every model answer (steps, summaries, extraction, reflection, episodes) before
anything reads it, and tool results before they are stored. Everything downstream — recall, core blocks,
archival memory and its vectors, summaries, episodes, traces, the prompts of extraction and reflection — is made
from those, so it holds placeholders only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from sqlalchemy.engine import Engine

from pagemind.runtime.crypto.columns import cipher_of
from pagemind.runtime.model.client import ModelClient, ModelRequest
from pagemind.runtime.model.response import ModelResponse
from pagemind.runtime.privacy.book import Entry, PlaceholderBook
from pagemind.runtime.privacy.numbering import NumberTaken, SqlNumbering
from pagemind.runtime.privacy.redactor import PLACEHOLDER, redact, redact_arguments
from pagemind.runtime.spec.privacy import PrivacyConfig
from pagemind.tools import ToolCall, ToolResult

log = structlog.get_logger(__name__)
T = TypeVar("T")


class OriginalsNeedEncryption(ValueError):
    """`privacy.keep_originals: true` on a store without encryption at rest."""


# Fields of a response body that are structure, never text a user or the model wrote.
_STRUCTURE = frozenset(
    {"id", "object", "model", "role", "type", "finish_reason", "system_fingerprint", "name", "tool_call_id"}
)
_ATTEMPTS = 5  # another process numbering the same agent's values at once: read again and redo, a few times


@dataclass
class AgentPrivacy:
    """Redaction for one agent; `kinds` empty: it changes nothing (the default policy, `pii: keep`)."""

    kinds: tuple[str, ...]
    numbering: SqlNumbering | None = None
    book: PlaceholderBook | None = None

    @classmethod
    def of(cls, config: PrivacyConfig, engine: Engine, agent_id: int) -> AgentPrivacy:
        """The agent's redaction under `config`, numbering in its database. `keep_originals` needs the store
        encrypted (the originals are sealed beside their placeholders): `OriginalsNeedEncryption` otherwise."""
        keep = config.keep_originals and bool(config.redacted_kinds())
        if keep and cipher_of(engine) is None:
            raise OriginalsNeedEncryption(
                "privacy.keep_originals: true keeps each redacted original, sealed, and needs encryption at rest: "
                "set PAGEMIND_ENCRYPTION_KEY (or PAGEMIND_ENCRYPTION_KEY_FILE), or keep_originals: false"
            )
        return cls(config.redacted_kinds(), SqlNumbering(engine, agent_id, keep_originals=keep))

    @property
    def keeps_originals(self) -> bool:
        """Whether the user's replies get their originals back (`privacy.keep_originals`, with redaction on)."""
        return self.numbering is not None and self.numbering.keep_originals

    async def filled(self, text: str | None) -> str | None:
        """A reply for the user with its placeholders back to the originals kept under `privacy.keep_originals`
        (what is stored, recorded and sent to the model keeps the placeholders); unchanged otherwise."""
        if not text or self.numbering is None or not self.keeps_originals or not PLACEHOLDER.search(text):
            return text
        kept = await self.numbering.originals()
        return PLACEHOLDER.sub(lambda m: kept.get((m[1], int(m[2])), m[0]), text)

    async def text(self, text: str) -> str:
        """`text` with the policy's kinds replaced by placeholders."""
        if not self.kinds or not text:
            return text
        return await self._numbered(lambda book, new: _text(text, self.kinds, book, new))

    async def response(self, response: ModelResponse) -> ModelResponse:
        """A model answer with its text, its tool calls' arguments, the streamed text and the raw body (what traces
        keep) redacted, each the same way."""
        if not self.kinds:
            return response

        def work(book: PlaceholderBook, new: list[Entry]) -> ModelResponse:
            kinds = self.kinds
            calls = tuple(
                ToolCall(c.id, c.name, redact_arguments(c.arguments, kinds, book, new)) for c in response.tool_calls
            )
            return dataclasses.replace(
                response,
                content=None if response.content is None else _text(response.content, kinds, book, new),
                tool_calls=calls,
                raw=_body(response.raw, kinds, book, new),
                streamed=_text(response.streamed, kinds, book, new),
            )

        return await self._numbered(work)

    async def results(self, results: list[ToolResult]) -> list[ToolResult]:
        """Tool results with their text redacted (a custom tool may read personal data from anywhere)."""
        if not self.kinds:
            return results

        def work(book: PlaceholderBook, new: list[Entry]) -> list[ToolResult]:
            return [dataclasses.replace(r, content=_text(r.content, self.kinds, book, new)) for r in results]

        return await self._numbered(work)

    async def _numbered(self, work: Callable[[PlaceholderBook, list[Entry]], T]) -> T:
        """`work` with the agent's book; the numbers it gave are stored before its result is returned."""
        for _ in range(_ATTEMPTS):
            book = await self._book()
            new: list[Entry] = []
            result = work(book, new)
            if not new or self.numbering is None:
                return result
            try:
                await self.numbering.add(new)
                return result
            except NumberTaken:
                log.info("privacy.renumber", reason="another process numbered first")
                self.book = None
        raise RuntimeError("placeholder numbers kept being taken by another process")

    async def _book(self) -> PlaceholderBook:
        if self.book is None:
            self.book = await self.numbering.load() if self.numbering is not None else PlaceholderBook(b"")
        return self.book


def _text(text: str, kinds: tuple[str, ...], book: PlaceholderBook, new: list[Entry]) -> str:
    result = redact(text, kinds, book)
    new += result.new
    return result.text


def _body(value: Any, kinds: tuple[str, ...], book: PlaceholderBook, new: list[Entry], key: str = "") -> Any:
    """A raw response body with every text in it redacted: tool arguments as `redact_arguments` does, the rest as
    text; ids, roles, model names and the like kept."""
    if isinstance(value, str):
        if key in _STRUCTURE:
            return value
        return redact_arguments(value, kinds, book, new) if key == "arguments" else _text(value, kinds, book, new)
    if isinstance(value, list):
        return [_body(item, kinds, book, new, key) for item in value]
    if isinstance(value, dict):
        return {k: _body(v, kinds, book, new, k) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class RedactingModel:
    """A model client whose answers are redacted (the flush's background calls, which skip `Agent.call_model`)."""

    model: ModelClient
    privacy: AgentPrivacy

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The inner model's answer, redacted."""
        return await self.privacy.response(await self.model.complete(request))


def redacting(model: ModelClient, privacy: AgentPrivacy) -> ModelClient:
    """`model`, with its answers redacted when the policy redacts anything."""
    return RedactingModel(model, privacy) if privacy.kinds else model
