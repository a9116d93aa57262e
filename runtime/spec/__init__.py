"""Agent definitions: the YAML an agent is written in, validated into an `AgentSpec` (its `memory:` and
`triggers:` sections in their own modules).
"""

from pagemind.runtime.spec.agent import (
    DEFAULT_TOOLS,
    SHIPPED_ENCODINGS,
    AgentSpec,
    BlockSpec,
    ModelSpec,
    SpecError,
    load_spec,
    parse_spec,
)

__all__ = [
    "DEFAULT_TOOLS",
    "SHIPPED_ENCODINGS",
    "AgentSpec",
    "BlockSpec",
    "ModelSpec",
    "SpecError",
    "load_spec",
    "parse_spec",
]
