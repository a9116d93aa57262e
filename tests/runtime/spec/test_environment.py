"""Every environment variable goes through `Settings` (runtime/process/settings.py): parsed and documented once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pagemind.runtime.process.settings import Settings, SettingsError

ROOT = Path(__file__).parents[3]
PACKAGES = ("runtime", "tools", "blocks", "scheduler")
SETTINGS = Path("runtime/process/settings.py")
DIRECT = re.compile(
    r"\bos\.environ\b|\bos\.getenv\b|\bos\.putenv\b|\benviron\.get\(|\bfrom os import [^\n]*\benviron\b"
)

# path → why it must touch the environment itself (setting a variable for a library is `Settings.export`, and the
# import-time reads go through `Settings.read`).
ALLOWED: dict[str, str] = {
    "runtime/process/home.py": "PAGEMIND_HOME, for `pagemind --help` to name the state folder without loading "
    "Settings (pydantic); Settings reads the same variable through it",
}


def direct_reads() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative == SETTINGS:
                continue
            lines = [
                n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if DIRECT.search(line)
            ]
            if lines:
                found[str(relative)] = lines
    return found


def test_nothing_but_settings_reads_or_sets_the_environment():
    found = direct_reads()
    assert {path: lines for path, lines in found.items() if path not in ALLOWED} == {}
    assert set(ALLOWED) <= set(found)  # an allowance nobody needs any more goes


def test_the_check_finds_a_direct_read():
    assert DIRECT.search('token = os.environ.get("PAGEMIND_API_TOKEN")')
    assert DIRECT.search("from os import getcwd, environ") and DIRECT.search('os.getenv("X")')
    assert not DIRECT.search('Settings.read("api_token", environ)')


def test_every_field_names_its_variable_and_the_table_lists_them_all():
    fields = Settings.model_fields
    by_field = {v.field: v for v in Settings.VARIABLES if v.field is not None}
    assert set(by_field) == set(fields)
    for name, info in fields.items():
        variable = by_field[name].name
        assert (info.description or "").startswith(f"`{variable}`: "), name
        assert (info.json_schema_extra or {}).get("env") == variable
    names = [v.name for v in Settings.VARIABLES]
    assert len(names) == len(set(names)) and all(v.description for v in Settings.VARIABLES)
    for documented in ("PAGEMIND_TIKTOKEN_CACHE", "PAGEMIND_LOG_LEVEL", "PAGEMIND_SERVER", "PAGEMIND_API_TOKEN"):
        assert documented in names
    assert {"TIKTOKEN_CACHE_DIR", "HF_HUB_OFFLINE"} <= set(names)  # set for libraries, documented too


def test_from_env_parses_each_variable():
    env = {
        "PAGEMIND_HOME": "/srv/pm",
        "DATABASE_URL": "postgres://db/pm",
        "OPENAI_API_KEY": "sk",
        "PAGEMIND_TIKTOKEN_CACHE": "/cache",
        "PAGEMIND_EMBEDDING_DIM": "384",
        "PAGEMIND_LOG_LEVEL": "info",
        "PAGEMIND_SERVER": "http://127.0.0.1:8283",
        "PAGEMIND_API_TOKEN": "t",
        "PAGEMIND_HTTP_CLIENT": "aiohttp",
    }
    settings = Settings.from_env(env)
    assert settings.database_url == "postgresql+psycopg://db/pm" and settings.embedding_api_key == "sk"
    assert (settings.tiktoken_cache, settings.embedding_dim, settings.log_level) == (Path("/cache"), 384, "info")
    assert (settings.server, settings.api_token, settings.http_client) == ("http://127.0.0.1:8283", "t", "aiohttp")
    assert Settings.from_env({}).database_url == f"sqlite:///{Settings.from_env({}).home / 'pagemind.db'}"
    assert Settings.read("tiktoken_cache", env) == Path("/cache") and Settings.read("server", {}) is None
    assert "sk" not in repr(settings) and "'t'" not in repr(settings)  # keys and tokens stay out of logs
    with pytest.raises(SettingsError, match="PAGEMIND_EMBEDDING_DIM='x' is not a whole number"):
        Settings.from_env({"PAGEMIND_EMBEDDING_DIM": "x"})


def test_export_sets_only_documented_variables(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "")  # restored (or removed) after the test
    monkeypatch.delenv("HF_HUB_OFFLINE")
    Settings.export("HF_HUB_OFFLINE", "1", replace=False)
    Settings.export("HF_HUB_OFFLINE", "0", replace=False)
    assert Settings.api_key("HF_HUB_OFFLINE") == "1"
    with pytest.raises(KeyError):
        Settings.export("SOMETHING_ELSE", "1")
