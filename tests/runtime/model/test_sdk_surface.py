"""The OpenAI SDK's and httpx's private attributes are touched in one module, `runtime/model/transports.py` (the lean
POST reuses the SDK client's own connection pool, URL and headers), and every one of them exists on the installed
versions: an SDK upgrade that renames one fails here, by name, instead of in a user's first turn."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import openai

ROOT = Path(__file__).parents[3]
TRANSPORTS = ROOT / "runtime" / "model" / "transports.py"
SOURCE_FOLDERS = ("runtime", "tools", "blocks", "scheduler")


def foreign_private_attributes(path: Path) -> set[str]:
    """Private attributes a module reads off objects other than its own (`self`, `cls`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.add(node.attr)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("openai", "httpx"):
            if any(part.startswith("_") for part in node.module.split(".")):
                found.add(node.module)
    return found


def sdk_private_names() -> set[str]:
    return foreign_private_attributes(TRANSPORTS)


def test_only_the_transports_module_touches_the_sdks_private_surface():
    sdk = sdk_private_names()
    assert {"_client", "_prepare_url", "_transport", "openai._models"} <= sdk  # what the lean POST reuses
    elsewhere = {}
    for folder in SOURCE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if path != TRANSPORTS and (shared := foreign_private_attributes(path) & sdk):
                elsewhere[str(path.relative_to(ROOT))] = sorted(shared)
    assert elsewhere == {}


def test_every_private_name_it_touches_exists_on_the_installed_versions():
    client = openai.AsyncOpenAI(api_key="test-key", base_url="http://127.0.0.1:9/v1")
    http = client._client
    pool = http._transport._pool
    owners = [client, http, http._transport, pool]
    from openai._models import FinalRequestOptions

    assert isinstance(http, httpx.AsyncClient) and hasattr(FinalRequestOptions, "construct")
    names = {name for name in sdk_private_names() if "." not in name}
    missing = {name for name in names if not any(hasattr(owner, name) for owner in owners)}
    assert missing == set()
