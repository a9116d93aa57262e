"""Agent definitions: YAML → a validated `AgentSpec`, with errors that name the file, line and field."""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, to_json

from pagemind.blocks import Block, BlockSchema, dump_json
from pagemind.runtime.spec.fingerprint import later_defaults
from pagemind.runtime.spec.mcp import McpServerSpec, split_mcp_entries
from pagemind.runtime.spec.memory import MemoryConfig
from pagemind.runtime.spec.prices import ModelPrices
from pagemind.runtime.spec.privacy import PrivacyConfig
from pagemind.runtime.spec.renames import collecting, warn, written_locations
from pagemind.runtime.spec.triggers import IdleTrigger, ScheduleTrigger, check_unique
from pagemind.runtime.spec.trust import REFUSED, Trust, code_reference, trust_of
from pagemind.tools import BUILTIN_TOOLS, Tool, tool

# The tiktoken encodings shipped with the package (runtime/tokens.py loads them; a test checks the two agree).
SHIPPED_ENCODINGS = ("o200k_base", "cl100k_base")
DEFAULT_TOOLS = ["send_message", "core_memory_append", "core_memory_replace", "memory_rethink"]
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class SpecError(ValueError):
    """An agent definition that cannot be used; `str()` lists every problem as `file:line field: message`.
    `refused`: it names code its source may not (`spec.trust`)."""

    def __init__(self, problems: list[str], refused: bool = False):
        super().__init__("\n".join(problems))
        self.problems = problems
        self.refused = refused


def resolve_tool(reference: str, folder: Path | None = None) -> Tool:
    """A built-in tool by name, or a custom one by `package.module:function`; raises ValueError if neither.
    `folder`: the folder of the agent file that names it, where the module is looked for first."""
    if reference in BUILTIN_TOOLS:
        return BUILTIN_TOOLS[reference]
    if ":" not in reference:
        known = ", ".join(sorted(BUILTIN_TOOLS))
        raise ValueError(f"unknown tool '{reference}' (built-ins: {known}; custom tools: package.module:function)")
    module_name, _, attribute = reference.partition(":")
    try:
        module = _import_tool_module(module_name, folder)
    except Exception as exc:
        where = (
            f" (looked beside the agent file, in {folder}, and on the Python path)"
            if folder is not None
            else " (a module beside an agent's YAML file is found when the agent is loaded from that file)"
        )
        raise ValueError(
            f"cannot import module '{module_name}' for tool '{reference}'{where}: {type(exc).__name__}: {exc}"
        ) from None
    target = getattr(module, attribute, None)
    if target is None:
        raise ValueError(f"module '{module_name}' has no attribute '{attribute}'")
    if isinstance(target, Tool):
        return target
    if callable(target):
        try:
            made: Tool = tool(target)
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        return made
    raise ValueError(f"'{reference}' is not a function or a @tool")


# sys.path is the process's: one import with an agent's folder on it at a time (the daemon reads files off its loop).
_FOLDER_IMPORT = threading.Lock()


def _import_tool_module(name: str, folder: Path | None) -> ModuleType:
    """Import a custom tool's module; with `folder` (the agent file's own), from there first, as Python runs a
    script with its folder first on the path. The folder is on sys.path only while this import runs, so that it
    shadows nothing for the rest of the process: an import the module makes later, inside a function, does not
    see it (import helper modules at the top of the tool's module). The module stays in sys.modules under its
    name, which is how the agent finds the tool again when it is loaded."""
    if folder is None or name.partition(".")[0] in sys.modules:
        return importlib.import_module(name)
    entry = str(folder)
    with _FOLDER_IMPORT:
        sys.path.insert(0, entry)
        try:
            return importlib.import_module(name)
        finally:
            sys.path.remove(entry)  # the first occurrence: the one inserted above


def check_tool_syntax(reference: str) -> str:
    """A built-in tool's name or a `package.module:function` reference, checked without importing anything."""
    module_name, colon, attribute = reference.partition(":")
    if reference in BUILTIN_TOOLS or (colon and module_name and attribute):
        return reference
    known = ", ".join(sorted(BUILTIN_TOOLS))
    raise ValueError(f"unknown tool '{reference}' (built-ins: {known}; custom tools: package.module:function)")


def _check_tool_reference(reference: str, info: ValidationInfo) -> str:
    # A custom tool is code: `spec.trust` decides (imported from a file, kept as text from a shared trace, refused
    # from a client). A spec read from a file the user named ({"tool_folder": its folder}) finds the modules beside it.
    if reference in BUILTIN_TOOLS:
        return reference
    if ":" not in reference:
        return check_tool_syntax(reference)  # raises: no such built-in
    if code_reference(reference, info, "tool"):
        context = info.context if isinstance(info.context, dict) else {}
        resolve_tool(reference, context.get("tool_folder"))
    return reference


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
    tools: list[Annotated[str, AfterValidator(_check_tool_reference)]] = Field(
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
            line = _key_line(root, tuple(old.split("."))) if root is not None else None
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


_PATH_IN_MESSAGE = re.compile(r"^((?:\w+)(?:\[\d+\])?(?:\.\w+(?:\[\d+\])?)*): (.*)$", re.S)
_PATH_PART = re.compile(r"(\w+)|\[(\d+)\]")


def _format_loc(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _walk(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[int, int, yaml.Node | None]:
    """How many parts of `loc` the YAML holds, the 1-based line of the deepest node reached, and that node."""
    node, line, depth = root, (root.start_mark.line + 1 if root is not None else 1), 0
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    child = value_node if part != loc[-1] or isinstance(value_node, yaml.CollectionNode) else key_node
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node, line, depth = child, child.start_mark.line + 1, depth + 1
    return depth, line, node


def _node_line(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the YAML node at `loc`, or of its nearest existing ancestor."""
    return _walk(root, loc)[1]


def _key_line(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the key that names `loc` (a section's own line, not its first field's)."""
    depth, _, parent = _walk(root, loc[:-1])
    if depth == len(loc) - 1 and isinstance(parent, yaml.MappingNode):
        for key_node, _value in parent.value:
            if key_node.value == loc[-1]:
                return int(key_node.start_mark.line) + 1
    return _node_line(root, loc)


def _as_written(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """`loc` as the file spells it: a file written with old names holds `memory.archival.prefetch` where
    validation says `memory.advanced.archival.candidates` (`spec.renames`); the spelling the file holds most of."""
    best, reached = loc, -1
    for candidate in written_locations(loc):
        depth = _walk(root, candidate)[0]
        if depth == len(candidate):
            return candidate
        if depth > reached:
            best, reached = candidate, depth
    return best


def _message(error: ErrorDetails) -> str:
    msg = error["msg"]
    msg = re.sub(r"^Value error, ", "", msg)
    if error["type"] == "extra_forbidden":
        return "unknown key"
    return re.sub(r"^Input should be ", "must be ", msg)


def _problems(path: Path, root: yaml.Node | None, error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors():
        loc = tuple(item["loc"])
        message = _message(item)
        embedded = _PATH_IN_MESSAGE.match(message)
        if embedded:  # a model-level check that names the field itself, e.g. a duplicate label
            loc += tuple(int(i) if i else n for n, i in _PATH_PART.findall(embedded.group(1)))
            message = embedded.group(2)
        loc = _as_written(root, loc)
        where = _format_loc(loc) or "(top level)"
        problems.append(f"{path}:{_node_line(root, loc)} {where}: {message}")
    return problems


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (YAML's rule; PyYAML keeps the last silently, and
    a second `name:` would quietly change the agent's identity)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise _DuplicateKey(key, seen[key], key_node.start_mark.line + 1)
            if isinstance(key, str):
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


class _DuplicateKey(Exception):
    def __init__(self, key: str, first: int, line: int):
        super().__init__(key)
        self.key, self.first, self.line = key, first, line


def _parse(path: Path, text: str) -> tuple[yaml.Node | None, Any]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        return root, yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise SpecError([f"{path}:{line} YAML syntax: {exc.problem or exc}"]) from None
    except _DuplicateKey as exc:
        raise SpecError(
            [
                f"{path}:{exc.line} {exc.key}: duplicate key '{exc.key}' (first at line {exc.first}); "
                "a key may appear once"
            ]
        ) from None
    except RecursionError:
        raise SpecError([f"{path}: YAML nested too deeply to be an agent definition"]) from None
    except yaml.YAMLError as exc:
        raise SpecError([f"{path}: not readable as YAML: {exc}"]) from None


def load_spec(path: str | Path) -> AgentSpec:
    """Read and validate an agent YAML file; raises SpecError naming file, line and field for every problem. A
    custom tool's module is looked for in the file's own folder first (`weather_tools:forecast` beside it)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise SpecError(
            [
                f"{path}:{line} not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
                "save the file as UTF-8"
            ]
        ) from None
    return parse_spec(text, path, tool_folder=path.parent.resolve())


def parse_spec(
    text: str,
    source: str | Path = "<agent>",
    *,
    import_tools: bool = True,
    trust: Trust | None = None,
    tool_folder: Path | None = None,
) -> AgentSpec:
    """Validate an agent definition given as YAML text (the API receives agents this way); errors name `source`,
    line and field. `trust` says where the text comes from (`spec.trust`): "client" refuses every reference to
    code (SpecError with `refused`), "shared" (or `import_tools=False`) checks them without importing anything.
    `tool_folder`: where custom tool modules are looked for first (`load_spec`: the file's folder; text that
    comes from no file the user named gets none)."""
    root, data = _parse(Path(source), text)
    if not isinstance(data, dict):
        raise SpecError([f"{source}:1 (top level): must be a mapping of fields (name, model, system, …)"])
    trust = trust or ("file" if import_tools else "shared")
    try:
        return AgentSpec.model_validate(
            data, context={"trust": trust, "source": str(source), "yaml": root, "tool_folder": tool_folder}
        )
    except ValidationError as exc:
        refused = any(e["type"] == REFUSED for e in exc.errors())
        raise SpecError(_problems(Path(source), root, exc), refused=refused) from None
