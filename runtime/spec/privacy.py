"""The `privacy:` section of an agent's YAML: which personal data is replaced by placeholders before it is stored.

    privacy:
      pii: redact            # keep (the default: nothing changes) | redact
      kinds: {address: redact, ip: keep}
      keep_originals: false  # true needs encryption at rest (PAGEMIND_ENCRYPTION_KEY): an agent does not load without

`runtime.privacy` does the work; docs/privacy.md says what it protects and what it does not.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Action = Literal["redact", "keep"]
Kind = Literal["phone", "email", "card", "cn_id", "passport", "iban", "ip", "address"]
# What `pii: redact` does for a kind the `kinds` map does not name: every kind is redacted except street addresses,
# whose recogniser is a heuristic (an agent turns it on with `kinds: {address: redact}`).
DEFAULT_KINDS: dict[str, Action] = {
    "phone": "redact",
    "email": "redact",
    "card": "redact",
    "cn_id": "redact",
    "passport": "redact",
    "iban": "redact",
    "ip": "redact",
    "address": "keep",
}


class PrivacyConfig(BaseModel):
    """Personal data (PII) replaced by typed placeholders (`[phone#1]`) before any store, trace or prompt sees it."""

    model_config = ConfigDict(extra="forbid")

    pii: Action = Field(
        "keep",
        description=(
            "redact: phone numbers, e-mail addresses, payment cards, resident IDs, passport numbers, IBANs and IP "
            "addresses in messages, tool results and the model's output become placeholders before they are "
            "stored; keep: text is stored as written (the default, as before this setting existed)"
        ),
    )
    kinds: dict[Kind, Action] = Field(
        default_factory=dict,
        description=(
            "per kind (phone, email, card, cn_id, passport, iban, ip, address), redact or keep; a kind not named "
            "follows `pii`, except address, which is kept unless named here (its recogniser is a heuristic)"
        ),
    )
    keep_originals: bool = Field(
        False,
        description=(
            "keep each redacted original, sealed, beside its placeholder, so the replies the user gets show it "
            "(the model, the stores and the traces still see the placeholder); requires encryption at rest"
        ),
    )

    def redacted_kinds(self) -> tuple[str, ...]:
        """The kinds replaced by placeholders, in a fixed order (none while `pii` is keep)."""
        if self.pii == "keep":
            return ()
        chosen: dict[str, Action] = dict(DEFAULT_KINDS)
        chosen.update(self.kinds.items())
        return tuple(kind for kind in DEFAULT_KINDS if chosen[kind] == "redact")
