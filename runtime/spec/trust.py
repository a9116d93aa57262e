"""Whether an agent spec may name code: the one check every reference to importable code in a spec passes.

A spec comes from a file the operator put in place (`file`: its references are imported, as its author meant), from
a trace someone shared (`shared`: references are kept as text and never imported; a replay serves what their code
recorded), or from a client of the daemon's API (`client`: a reference is refused, nothing is imported). The
source is the validation context's `trust` (`{"trust": "client"}`; the older `{"import_tools": False}` means
`shared`; no context means `file`). Every spec field that names code — a custom tool, a structured block's schema —
is validated by `code_reference` before anything is imported; `tests/runtime/spec/test_trust.py` validates a
client's spec with a reference to code in every field the spec has (those added later too) and checks that
nothing was imported.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ValidationInfo
from pydantic_core import PydanticCustomError

Trust = Literal["file", "shared", "client"]
REFUSED = "code_refused"  # the error type of a refused reference (the API answers 422 forbidden_field for it)
_REFERENCE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_.]*$")

# What a client uses instead of code, per kind of reference.
_INSTEAD = {
    "tool": "an agent posted to the API may use built-in tools only",
    "schema": "a posted agent's block schema must be an inline JSON Schema (a mapping)",
}

_MALFORMED = {
    "tool": "unknown tool '{reference}' (custom tools: package.module:function)",
    "schema": "'{reference}' is not a schema reference: give an inline JSON Schema (a mapping) or "
    "'package.module:Model' naming a pydantic model",
}


def trust_of(info: ValidationInfo) -> Trust:
    """Where the spec being validated comes from, by its validation context."""
    context: dict[str, Any] = info.context if isinstance(info.context, dict) else {}
    trust = context.get("trust")
    if trust in ("file", "shared", "client"):
        return trust  # type: ignore[no-any-return]  # narrowed by the membership test above
    return "shared" if context.get("import_tools") is False else "file"


def code_reference(reference: str, info: ValidationInfo, kind: str) -> bool:
    """Check a `package.module:name` reference (a `kind` of "tool" or "schema") against the spec's source: raise
    for a malformed one and for any from a client (nothing is imported); True when it may be imported now (a
    file's), False when it stays text (a shared trace's)."""
    if not _REFERENCE.match(reference):
        raise ValueError(_MALFORMED.get(kind, "'{reference}' is not a reference to code").format(reference=reference))
    trust = trust_of(info)
    if trust == "client":
        raise PydanticCustomError(
            REFUSED,
            "'{reference}' names code to import; {instead}, and an agent that needs code goes in the served folder",
            {"reference": reference, "instead": _INSTEAD.get(kind, "a posted agent may name no code")},
        )
    return trust == "file"
