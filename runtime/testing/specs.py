"""A small agent spec: `spec_data` as YAML would give it, `build_spec` validated (the one the test suite and its
recorded traces use).
"""

from __future__ import annotations

from typing import Any

from pagemind.runtime.spec.agent import AgentSpec


def spec_data(
    name: str = "tester",
    *,
    system: str = "You are a test agent.",
    persona: str = "I am a careful tester.",
    human: str = "",
    human_limit: int = 100,
    constraints: str = "Never suggest peanuts.",
    model_name: str = "gpt-4o-mini",
    context_window: int = 8192,
    max_output_tokens: int = 256,
    max_steps_per_turn: int = 4,
    **fields: Any,
) -> dict[str, Any]:
    """A small agent spec as YAML would give it (a fresh dict each call): three blocks (persona, human and a
    read-only constraints block), the default tools. `fields` add or replace top-level keys (`tools`, `memory`,
    even `blocks` or `model` whole).

    The defaults are the test suite's agent; the recorded traces (tests/traces/record.py) use another name,
    system prompt, persona, human limit and step bound."""
    data: dict[str, Any] = {
        "name": name,
        "model": {"name": model_name, "context_window": context_window, "max_output_tokens": max_output_tokens},
        "system": system,
        "blocks": [
            {"label": "persona", "value": persona, "limit": 200, "description": "Who I am."},
            {"label": "human", "value": human, "limit": human_limit, "description": "What I know about the user."},
            {"label": "constraints", "value": constraints, "limit": 200, "read_only": True},
        ],
        "max_steps_per_turn": max_steps_per_turn,
    }
    return {**data, **fields}


def build_spec(name: str = "tester", **options: Any) -> AgentSpec:
    """`spec_data(name, **options)`, validated into an `AgentSpec`."""
    return AgentSpec.model_validate(spec_data(name, **options))
