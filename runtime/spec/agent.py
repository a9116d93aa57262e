"""The agent spec's models: `AgentSpec`, one agent as its YAML file defines it, and the `ModelSpec` and
`BlockSpec` it nests (its other sections in their own modules). Reading a file into one is `spec.loading`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import to_json

from pagemind.blocks import Block, BlockSchema, dump_json
from pagemind.runtime.spec.fingerprint import later_defaults
from pagemind.runtime.spec.mcp import McpServerSpec, split_mcp_entries
from pagemind.runtime.spec.memory import MemoryConfig
from pagemind.runtime.spec.prices import ModelPrices
from pagemind.runtime.spec.privacy import PrivacyConfig
from pagemind.runtime.spec.renames import collecting, warn
from pagemind.runtime.spec.tool_references import check_tool_reference, resolve_tool
from pagemind.runtime.spec.triggers import IdleTrigger, ScheduleTrigger, check_unique
from pagemind.runtime.spec.trust import code_reference, trust_of
from pagemind.runtime.spec.yaml_locations import key_line
from pagemind.tools import Tool

# The tiktoken encodings shipped with the package (runtime/tokens.py loads them; a test checks the two agree).
SHIPPED_ENCODINGS = ("o200k_base", "cl100k_base")
DEFAULT_TOOLS = ["send_message", "core_memory_append", "core_memory_replace", "memory_rethink"]
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ModelSpec(BaseModel):
    """Which model to call and how big its window is."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="the model's name at the endpoint, e.g. gpt-4o-mini")
    base_url: str | None = Field(
        None, description="an OpenAI-compatible endpoint's URL (default: OPENAI_BASE_URL, else OpenAI's)"
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="the environment variable that holds the endpoint's key")
    temperature: float = Field(0.7, ge=0, le=2, description="sampling temperature (0: most deterministic)")
    context_window: int = Field(8192, gt=0, description="the model's window in tokens, prompt and reply together")
    max_output_tokens: int = Field(1024, gt=0, description="longest reply in tokens (kept free in the window)")
    encoding: str | None = Field(None, description="tiktoken encoding that counts tokens (default o200k_base)")
    request_timeout_s: float = Field(
        60.0, gt=0, description="seconds one attempt at the endpoint may take, body included"
    )
    turn_deadline_s: float = Field(
        300.0, gt=0, description="seconds a whole turn may take: every attempt, retry and tool"
    )
    prices: ModelPrices | None = Field(
        None, description="the endpoint's prices per million tokens, for cost estimates (trace show, context, API)"
    )
    system_messages: Literal["any", "first_only"] = Field(
        "any",
        description="where the prompt may have system messages: `any` (the closing reminder and pressure alerts "
        "are system messages of their own), or `first_only` for models whose chat template refuses a system "
        "message after the first (Gemma, Mistral): those are folded into the latest user message before them, "
        "as a tagged `<system_note>` block",
    )
    LATER_FIELDS: ClassVar[tuple[str, ...]] = ("prices", "system_messages")  # see `later_defaults`

    @model_validator(mode="after")
    def _fits(self) -> ModelSpec:
        # Checked at load, not at the first compile: a window the reply reserve fills has no room for a prompt.
        if self.context_window <= self.max_output_tokens:
            raise ValueError(
                f"context_window: {self.context_window} leaves no room for the prompt after the "
                f"output reserve (max_output_tokens {self.max_output_tokens}); make it larger"
            )
        if self.encoding is not None and self.encoding not in SHIPPED_ENCODINGS:
            raise ValueError(f"encoding: unknown encoding {self.encoding!r}; shipped: {', '.join(SHIPPED_ENCODINGS)}")
        return self


class BlockSpec(BaseModel):
    """A core-memory block's definition; `value` seeds a new agent only."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    label: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$", description="the block's name (lowercase, digits, _)")
    value: str = Field("", description="the seed a new agent starts with; afterwards the agent's own edits win")
    limit: int = Field(2000, gt=0, description="most characters the block may hold")
    description: str = Field("", description="what the block is for, shown to the model")
    read_only: bool = Field(False, description="the agent's tools cannot change it")
    schema_: dict[str, Any] | str | None = Field(
        None,
        alias="schema",
        description="makes the block structured: its value is JSON matching this inline JSON "
        "Schema, or the pydantic model named `package.module:Model`",
    )
    ephemeral: bool = Field(False, description="working notes: reset to `value` when a session ends")
    _schema: BlockSchema | None = PrivateAttr(None)
    LATER_FIELDS: ClassVar[tuple[str, ...]] = ("schema_", "ephemeral")  # see `later_defaults`

    @model_validator(mode="before")
    @classmethod
    def _mapping_value(cls, data: Any) -> Any:
        # A structured block's seed may be written as YAML (a mapping); it is stored as JSON.
        if isinstance(data, dict) and isinstance(data.get("value"), (dict, list)) and data.get("schema") is not None:
            data = {**data, "value": json.dumps(data["value"], ensure_ascii=False)}
        return data

    @field_validator("schema_")
    @classmethod
    def _schema_reference(cls, schema: dict[str, Any] | str | None, info: ValidationInfo) -> Any:
        # A schema by module is code (`spec.trust`); checked here, not by a `CodeRef` in the union, whose failure
        # would also report the mapping it is not.
        if isinstance(schema, str):
            code_reference(schema, info, "schema")
        return schema

    @model_validator(mode="after")
    def _value_fits(self, info: ValidationInfo) -> BlockSpec:
        self.value = self.value.strip()  # YAML block scalars end with a newline that is not memory
        trusted = trust_of(info) == "file"  # a reference from elsewhere was checked (`CodeRef`), never imported
        if self.schema_ is not None and (trusted or isinstance(self.schema_, dict)):
            schema = self.block_schema()  # resolved: schema_ is set
            if schema is not None:
                self.value = self._checked_seed(schema)
        if len(self.value) > self.limit:
            raise ValueError(f"value has {len(self.value)} characters, over its limit of {self.limit}")
        return self

    def _checked_seed(self, schema: BlockSchema) -> str:
        """The seed as stored JSON (empty means `{}`); raises ValueError naming what does not match."""
        try:
            data = json.loads(self.value or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"value: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); a block with a schema holds JSON"
            ) from None
        problems = schema.problems(data)
        if problems:
            raise ValueError(f"value: does not match the block's schema: {schema.explain(problems)}")
        return dump_json(data)

    def block_schema(self) -> BlockSchema | None:
        """The block's schema, resolved (a `module:Model` reference is imported on first use); raises ValueError
        naming the field for a schema that is not valid or cannot be imported."""
        if self.schema_ is None or self._schema is not None:
            return self._schema
        try:
            resolved = (
                BlockSchema.inline(self.schema_)
                if isinstance(self.schema_, dict)
                else BlockSchema.resolve(self.schema_)
            )
        except ValueError as exc:
            raise ValueError(f"schema: {exc}") from None
        self._schema = resolved
        return resolved

    def to_block(self, value: str) -> Block:
        """The block this definition describes, holding `value` (a stored value, or the seed)."""
        return Block(
            self.label, value, self.limit, self.description, self.read_only, self.block_schema(), self.ephemeral
        )


class AgentSpec(BaseModel):
    """One agent, as its YAML file defines it."""

    model_config = ConfigDict(extra="forbid")
    # Fields added after agents existed (see `later_defaults`).
    LATER_FIELDS: ClassVar[tuple[str, ...]] = ("template", "schedule", "idle", "mcp_servers", "privacy")

    name: str = Field(pattern=_NAME, description="the agent's name: its identity in the stores (letters, digits, _.-)")
    description: str = Field("", description="what the agent is for (listings, the API)")
    model: ModelSpec = Field(description="the model the agent calls")
    system: str = Field(min_length=1, description="the system prompt")
    blocks: list[BlockSpec] = Field(default_factory=list, description="core-memory blocks, always in the prompt")
    tools: list[Annotated[str, AfterValidator(check_tool_reference)]] = Field(
        default_factory=lambda: list(DEFAULT_TOOLS),
        description="built-in tools by name, custom ones as package.module:function",
    )
    mcp_servers: list[McpServerSpec] = Field(
        default_factory=list,
        description="MCP servers whose tools the agent gets; written in `tools:` as `{mcp: {...}}` entries",
    )
    max_steps_per_turn: int = Field(10, gt=0, description="model calls one user message may take at most")
    memory: MemoryConfig = Field(default_factory=MemoryConfig, description="how the agent remembers")
    privacy: PrivacyConfig = Field(
        default_factory=PrivacyConfig, description="personal data replaced by placeholders before it is stored"
    )
    schedule: list[ScheduleTrigger] = Field(default_factory=list, description="cron / every triggers (the daemon)")
    idle: IdleTrigger | None = Field(None, description="fired once after the agent has been idle this long")
    template: bool = Field(
        False, description="a template for agents made through the daemon (`pagemind serve`), not an agent of its own"
    )

    @model_validator(mode="wrap")
    @classmethod
    def _old_names(cls, data: Any, handler: ModelWrapValidatorHandler[AgentSpec], info: ValidationInfo) -> AgentSpec:
        # Old field names (`spec.renames`) are logged once the spec is valid, with the file and line when known.
        with collecting() as renamed:
            spec = handler(data)
        context = info.context if isinstance(info.context, dict) else {}
        root = context.get("yaml")
        for old, new in renamed:
            line = key_line(root, tuple(old.split("."))) if root is not None else None
            warn(old, new, file=context.get("source"), line=line, agent=None if root is not None else spec.name)
        return spec

    @model_validator(mode="before")
    @classmethod
    def _mcp_entries(cls, data: Any, info: ValidationInfo) -> Any:
        return split_mcp_entries(data, info)  # `tools: [{mcp: …}]` into `mcp_servers` (`spec.mcp`)

    @model_validator(mode="after")
    def _unique_labels(self) -> AgentSpec:
        seen: dict[str, int] = {}
        for index, block in enumerate(self.blocks):
            if block.label in seen:
                first = seen[block.label]
                raise ValueError(
                    f"blocks[{index}].label: duplicate block label '{block.label}' (first at blocks[{first}])"
                )
            seen[block.label] = index
        check_unique(self.schedule, self.idle)
        return self

    def resolved_tools(self) -> dict[str, Tool]:
        """The agent's tools by name, imported and ready to dispatch."""
        resolved = [resolve_tool(ref) for ref in self.tools]
        return {t.name: t for t in resolved}

    def spec_hash(self) -> str:
        """A stable fingerprint of the definition as it behaves, to tell when the YAML changed (`spec.fingerprint`:
        old and new field names give one hash, and so does every agent stored before the names changed)."""
        return hashlib.sha256(to_json(self.fingerprint())).hexdigest()[:16]

    def fingerprint(self) -> dict[str, Any]:
        """What `spec_hash` covers: the definition with `memory` resolved and spelled as first stored, fields
        added later left out while at their defaults."""
        exclude = later_defaults(self, skip=frozenset({"memory"})) | {"memory": True}
        data = self.model_dump(mode="json", exclude=exclude)
        return {
            name: self.memory.fingerprint() if name == "memory" else data[name]
            for name in type(self).model_fields
            if name == "memory" or name in data
        }
