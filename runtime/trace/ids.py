"""Generated ids in a replay: equal up to a consistent renaming.

A replay regenerates what the runtime generates at random — an archival memory's id, a custom tool's uuid — so
"Saved as memory be35d0b0" comes back as "Saved as memory c5f40bf2". Ids are names: two texts are the same when
they differ only in id-like tokens (8–32 lower-case hex characters with at least one digit, or a dashed UUID) and the
renaming recorded → replayed stays one-to-one over the whole replay. Recorded model responses that mention a
recorded id are served with the replayed id, so the model "says" what it would have said in this run.
"""

from __future__ import annotations

import re
from typing import Any

_ID = re.compile(
    r"\b(?=[0-9a-f-]*[0-9])"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{8,32})\b"
)


class IdMap:
    """The renaming of generated ids seen so far, recorded → replayed, kept one-to-one."""

    def __init__(self) -> None:
        self.forward: dict[str, str] = {}
        self.backward: dict[str, str] = {}

    def _pair(self, recorded: str, replayed: str, pending: dict[str, str]) -> bool:
        known = self.forward.get(recorded, pending.get(recorded))
        if known is not None:
            return known == replayed
        owner = self.backward.get(replayed) or next((r for r, a in pending.items() if a == replayed), None)
        if owner is not None:
            return owner == recorded
        pending[recorded] = replayed
        return True

    def same_text(self, recorded: str, replayed: str) -> bool:
        """Whether the texts are equal up to the renaming (which grows when they are)."""
        if recorded == replayed:
            return True
        left, right = _ID.split(recorded), _ID.split(replayed)
        if len(left) != len(right):
            return False
        pending: dict[str, str] = {}
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            if index % 2 == 0:
                if a != b:
                    return False
            elif not self._pair(a, b, pending):
                return False
        for recorded_id, replayed_id in pending.items():
            if recorded_id != replayed_id:
                self.forward[recorded_id], self.backward[replayed_id] = replayed_id, recorded_id
        return True

    def same(self, recorded: Any, replayed: Any) -> bool:
        """Deep equality of JSON-like values, strings compared up to the renaming."""
        if isinstance(recorded, str) and isinstance(replayed, str):
            return self.same_text(recorded, replayed)
        if isinstance(recorded, dict) and isinstance(replayed, dict):
            return recorded.keys() == replayed.keys() and all(self.same(recorded[k], replayed[k]) for k in recorded)
        if isinstance(recorded, (list, tuple)) and isinstance(replayed, (list, tuple)):
            return len(recorded) == len(replayed) and all(
                self.same(a, b) for a, b in zip(recorded, replayed, strict=True)
            )
        equal: bool = recorded == replayed  # JSON values: `==` gives a bool
        return equal

    def translate(self, value: Any) -> Any:
        """A recorded value with the recorded ids it mentions replaced by their replayed names."""
        if not self.forward:
            return value
        if isinstance(value, str):
            return _ID.sub(lambda m: self.forward.get(m.group(0), m.group(0)), value)
        if isinstance(value, dict):
            return {k: self.translate(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.translate(v) for v in value]
        return value
