import textwrap
from pathlib import Path

import pytest

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import SpecError, load_spec

GOOD = """\
name: x
model:
  name: gpt-4o-mini
system: be helpful
blocks:
  - label: human
    limit: 100
  - label: notes
    limit: 50
tools: [send_message]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, text))
    return err.value.problems


def test_a_good_file_loads_with_defaults(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.max_steps_per_turn == 10 and spec.model.api_key_env == "OPENAI_API_KEY"
    assert [b.label for b in spec.blocks] == ["human", "notes"]
    assert list(spec.resolved_tools()) == ["send_message"]


@pytest.mark.parametrize(
    "edit, expected",
    [
        (("    limit: 50", "    limit: 0"), ":9 blocks[1].limit: must be greater than 0"),
        (("  name: gpt-4o-mini", "  name: gpt-4o-mini\n  tempurature: 1"), ":4 model.tempurature: unknown key"),
        (("    limit: 100", "    limit: lots"), ":7 blocks[0].limit: must be a valid integer"),
        (("  - label: notes", "  - label: human"), ":8 blocks[1].label: duplicate block label 'human'"),
        (("tools: [send_message]", "tools: [send_message, fly]"), ":10 tools[1]: unknown tool 'fly'"),
        (
            ("tools: [send_message]", "tools: [send_message, no_such_pkg.mod:fn]"),
            ":10 tools[1]: cannot import module 'no_such_pkg.mod'",
        ),
        (("system: be helpful\n", ""), ":1 system: Field required"),
        (("tools: [send_message]", "tools: [send_message"), "YAML syntax"),
    ],
)
def test_errors_name_file_line_and_field(tmp_path, edit, expected):
    found = problems(tmp_path, GOOD.replace(*edit))
    assert any(expected in p for p in found), found
    assert all(p.startswith(str(tmp_path / "x.yaml") + ":") for p in found)


def test_custom_tool_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "mytools.py").write_text(
        'def shout(text: str) -> str:\n    """Shout it.\n\n    Args:\n        text: words\n    """\n'
        "    return text.upper()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_spec(write(tmp_path, GOOD.replace("tools: [send_message]", "tools: [send_message, 'mytools:shout']")))
    shout = spec.resolved_tools()["shout"]
    assert (
        shout("hi") == "HI"
        and shout.openai_schema()["function"]["parameters"]["properties"]["text"]["description"] == "words"
    )


def test_block_value_over_its_limit_is_an_error(tmp_path):
    found = problems(tmp_path, GOOD.replace("    limit: 50", "    limit: 3\n    value: too long"))
    assert any("blocks[1]" in p and "over its limit of 3" in p for p in found), found


def test_spec_hash_changes_with_the_definition():
    a = AgentSpec.model_validate({"name": "a", "model": {"name": "m"}, "system": "s"})
    b = AgentSpec.model_validate({"name": "a", "model": {"name": "m"}, "system": "s2"})
    assert a.spec_hash() != b.spec_hash()
