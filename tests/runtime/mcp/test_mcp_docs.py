"""The MCP page's examples (docs/pages/guide/mcp.md) are what they claim: the agent YAML loads, its servers as
described and refused from an API client; every JSON configuration parses and starts `pagemind mcp AGENT` or
names `/mcp/AGENT`. (Its python block, an SDK client of `pagemind mcp`, runs in tests/project/test_snippets.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pagemind.runtime.spec.loading import parse_spec
from pagemind.scheduler.api.agents import api_spec
from pagemind.scheduler.api.errors import ApiError

PAGE = (Path(__file__).parents[3] / "docs" / "pages" / "guide" / "mcp.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE, re.M | re.S)


def test_the_yaml_example_loads_with_its_two_servers_and_a_client_may_not_post_it():
    [text] = blocks("yaml")
    spec = parse_spec(text, "mcp.md")
    assert spec.tools == ["send_message", "archival_memory_insert", "archival_search"]
    fetch, github = spec.mcp_servers
    assert (fetch.command, fetch.args, fetch.timeout_s) == ("uvx", ["mcp-server-fetch"], 20)
    assert (github.url, github.prefix, github.bearer_token_env) == (
        "https://api.githubcopilot.com/mcp/",
        "gh_",
        "GITHUB_TOKEN",
    )
    with pytest.raises(ApiError) as refused:
        api_spec(text.encode())
    assert refused.value.status == 422 and refused.value.code == "forbidden_field"


def test_the_json_configurations_start_pagemind_mcp_or_name_the_daemons_url():
    configs = [json.loads(text)["mcpServers"]["companion"] for text in blocks("json")]
    assert configs[0] == {"command": "pagemind", "args": ["mcp", "companion"]}
    assert configs[1]["url"].endswith("/mcp/companion") and configs[1]["headers"]["Authorization"].startswith("Bearer ")
    assert "claude mcp add companion -- pagemind mcp companion" in PAGE
