"""Process-wide configuration: every environment variable pagemind reads, parsed and documented here, once.

`Settings.from_env()` builds it at the edge (the CLI, the facade) and it is passed down explicitly. Code that
runs where no Settings reaches it (an import, the daemon's client, the tokenizer's cache) reads its one field
with `Settings.read(field)`, still parsed here. `Settings.VARIABLES` lists every variable — the ones read and the
ones pagemind sets for a library (`export`) — with the field that holds it, for the docs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from pagemind.runtime.process.home import find_home


class SettingsError(ValueError):
    """An environment variable pagemind cannot use; the message names it and says what it takes."""


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the Settings field that holds it (None: set by pagemind for a library,
    or named by the agent's YAML), and what it does."""

    name: str
    field: str | None
    description: str


def _text(raw: str) -> str | None:
    return raw or None


def _path(raw: str) -> Path | None:
    return Path(raw) if raw else None


def _positive_int(raw: str, name: str) -> int | None:
    if not raw:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a whole number (the embedding vectors' size, e.g. 384)") from None
    if value <= 0:
        raise SettingsError(f"{name}={raw!r} must be a positive whole number")
    return value


def _env(name: str, description: str, *, secret: bool = False) -> Any:
    """A Settings field read from the variable `name` (None when unset); its description names the variable. A
    secret is left out of the repr."""
    return Field(None, description=f"`{name}`: {description}", json_schema_extra={"env": name}, repr=not secret)


class Settings(BaseModel):
    """Where state lives, which endpoints to use, and the process's switches; one field per environment variable
    (the variable named first in its description)."""

    home: Path = Field(
        description="`PAGEMIND_HOME`: the folder state lives in (default: a ./.pagemind the current folder has, "
        "else the user data folder, ~/.local/share/pagemind on Linux; `runtime.process.home`)",
        json_schema_extra={"env": "PAGEMIND_HOME"},
    )
    database_url: str = Field(
        description="`DATABASE_URL`: the database (default sqlite:///$PAGEMIND_HOME/pagemind.db; postgres:// and "
        "postgresql:// are opened with psycopg)",
        json_schema_extra={"env": "DATABASE_URL"},
    )
    qdrant_url: str | None = _env("QDRANT_URL", "a Qdrant server for archival vectors (default: embedded, in home)")
    qdrant_api_key: str | None = _env("QDRANT_API_KEY", "the Qdrant server's API key", secret=True)
    embedding_model: str | None = _env(
        "PAGEMIND_EMBEDDING_MODEL",
        "a local model (all-MiniLM-L6-v2, the default, or multilingual-e5-small) or an endpoint's model",
    )
    embedding_base_url: str | None = _env(
        "PAGEMIND_EMBEDDING_BASE_URL", "an OpenAI-compatible /embeddings endpoint for PAGEMIND_EMBEDDING_MODEL"
    )
    embedding_api_key: str | None = _env(
        "PAGEMIND_EMBEDDING_API_KEY", "the embedding endpoint's key (default: OPENAI_API_KEY)", secret=True
    )
    embedding_dim: int | None = _env("PAGEMIND_EMBEDDING_DIM", "the endpoint's vector size, e.g. 1536")
    models_dir: Path | None = _env(
        "PAGEMIND_MODELS_DIR", "where converted local embedding models live (default $PAGEMIND_HOME/models)"
    )
    openai_base_url: str | None = _env(
        "OPENAI_BASE_URL", "the model endpoint for agents whose YAML gives no model.base_url"
    )
    openai_api_key: str | None = _env(
        "OPENAI_API_KEY", "the default model.api_key_env, and the embedding endpoint's key unless given", secret=True
    )
    http_client: str | None = _env(
        "PAGEMIND_HTTP_CLIENT", "what model calls go out on: httpx (default) or aiohttp (`serve`'s default)"
    )
    log_level: str | None = _env("PAGEMIND_LOG_LEVEL", "debug, info, warning (default), error or critical")
    tiktoken_cache: Path | None = _env(
        "PAGEMIND_TIKTOKEN_CACHE",
        "where the tokenizer's parsed tables are kept (default: tiktoken in pagemind's user cache folder, "
        "~/.cache/pagemind on Linux)",
    )
    server: str | None = _env("PAGEMIND_SERVER", "the daemon `send` and `agents --server` talk to, e.g. http://…:8283")
    api_token: str | None = _env(
        "PAGEMIND_API_TOKEN",
        "the daemon's bearer token: `serve` requires it, the CLI and DaemonClient send it",
        secret=True,
    )
    encryption_key: str | None = _env(
        "PAGEMIND_ENCRYPTION_KEY",
        "the data key that seals stored text at rest (32 random bytes as base64; `pagemind keys new-data-key`); "
        "unset: no encryption (docs/pages/guide/encryption.md)",
        secret=True,
    )
    encryption_key_file: Path | None = _env(
        "PAGEMIND_ENCRYPTION_KEY_FILE", "a file holding the data key, instead of PAGEMIND_ENCRYPTION_KEY"
    )
    turn_shortcuts: str | None = _env(
        "PAGEMIND_TURN_SHORTCUTS",
        "`off` turns off the turn's CPU shortcuts (the same results, slower), to measure what each one gains "
        "(bench/turn_cost.py --ab)",
    )
    kill_at: str | None = _env(
        "PAGEMIND_KILL_AT", "tests only: the crash point (`NAME` or `NAME@N`) at which the process kills itself"
    )

    VARIABLES: ClassVar[tuple[Variable, ...]] = ()  # every variable, for the docs (filled in below)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from the environment (or `environ`); raises SettingsError for a value it cannot use."""
        env = os.environ if environ is None else environ
        values = {name: read(env) for name, read in _READERS.items()}
        home = values["home"]
        database_url = env.get("DATABASE_URL") or f"sqlite:///{home / 'pagemind.db'}"
        if database_url.startswith("postgres://"):
            database_url = "postgresql://" + database_url.removeprefix("postgres://")
        if database_url.startswith("postgresql://"):
            database_url = "postgresql+psycopg://" + database_url.removeprefix("postgresql://")
        values["embedding_api_key"] = values["embedding_api_key"] or values["openai_api_key"]
        return cls(database_url=database_url, **values)

    @classmethod
    def read(cls, field: str, environ: Mapping[str, str] | None = None) -> Any:
        """One field, parsed from the environment alone: for code no Settings reaches (an import, a client
        made by a script). Raises KeyError for a name that is no such field."""
        return _READERS[field](os.environ if environ is None else environ)

    @staticmethod
    def api_key(variable: str, environ: Mapping[str, str] | None = None) -> str | None:
        """The key in the variable an agent's `model.api_key_env` names (default OPENAI_API_KEY)."""
        return (os.environ if environ is None else environ).get(variable) or None

    @staticmethod
    def export(name: str, value: str, *, replace: bool = True) -> None:
        """Set a variable for a library (or a child process) that reads it; only the ones `VARIABLES` lists."""
        if name not in {v.name for v in Settings.VARIABLES}:
            raise KeyError(f"{name} is not a variable pagemind documents (Settings.VARIABLES)")
        if replace:
            os.environ[name] = value
        else:
            os.environ.setdefault(name, value)


def _variable(name: str) -> str:
    """The variable Settings field `name` is read from (its `json_schema_extra["env"]`)."""
    extra = Settings.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)
    return str(extra["env"])


def _reader(name: str, parse: Callable[[str], Any] = _text) -> Callable[[Mapping[str, str]], Any]:
    return lambda env: parse(env.get(name) or "")


# How each field is read from its variable (database_url, whose default depends on home, in `from_env`).
_READERS: dict[str, Callable[[Mapping[str, str]], Any]] = {
    name: _reader(_variable(name)) for name in Settings.model_fields if name != "database_url"
}
_READERS["embedding_dim"] = _reader("PAGEMIND_EMBEDDING_DIM", lambda raw: _positive_int(raw, "PAGEMIND_EMBEDDING_DIM"))
_READERS["models_dir"] = _reader("PAGEMIND_MODELS_DIR", _path)
_READERS["tiktoken_cache"] = _reader("PAGEMIND_TIKTOKEN_CACHE", _path)
_READERS["encryption_key_file"] = _reader("PAGEMIND_ENCRYPTION_KEY_FILE", _path)
_READERS["home"] = lambda env: find_home(env).path

Settings.VARIABLES = (
    *(Variable(_variable(name), name, info.description or "") for name, info in Settings.model_fields.items()),
    Variable("<model.api_key_env>", None, "the variable an agent's model.api_key_env names holds its endpoint's key"),
    Variable("TIKTOKEN_CACHE_DIR", None, "set to PAGEMIND_TIKTOKEN_CACHE for tiktoken, which reads it"),
    Variable("HF_HUB_OFFLINE", None, "set to 1 (unless set) before fastembed loads: the model never comes off the hub"),
    Variable(
        "ORT_DISABLE_TELEMETRY",
        None,
        "set to 1 (unless set) before onnxruntime is imported: it writes no device id or event database",
    ),
    Variable(
        "HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY",
        None,
        "the model endpoint's proxy: read by httpx, and for aiohttp the same way (`runtime.model.transports`)",
    ),
    Variable("SSL_CERT_FILE", None, "certificates for the model endpoint's TLS (httpx's, used by aiohttp too)"),
)
