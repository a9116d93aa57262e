"""Agent definitions: the YAML an agent is written in (`loading`), validated into an `AgentSpec` (`agent`; its
`memory:` and `triggers:` sections in their own modules).
"""

from pagemind.runtime.spec.agent import (
    DEFAULT_TOOLS,
    SHIPPED_ENCODINGS,
    AgentSpec,
    BlockSpec,
    ModelSpec,
)
from pagemind.runtime.spec.loading import SpecError, load_spec, parse_spec

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
