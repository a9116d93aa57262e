"""A custom tool named in an agent file is imported from the file's own folder first (`weather_tools:forecast`
with weather_tools.py beside the YAML), for that import only: the folder is not left on sys.path, and text that
comes from no file the user named (an agent posted to the daemon) gains nothing of the kind."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from pagemind.runtime.spec.loading import SpecError, load_spec, parse_spec
from pagemind.scheduler.api.agents import api_spec
from pagemind.scheduler.api.errors import ApiError
from pagemind.tools import Tool

AGENT = """\
name: weatherbot
model: {{name: gpt-4o-mini}}
system: Reply with send_message.
tools: [send_message, {module}:forecast]
"""
TOOLS = '''
from pagemind.tools import tool


@tool
def forecast(city: str) -> str:
    """The forecast.

    Args:
        city: Where.
    """
    return f"sunny in {city}"
'''


@pytest.fixture
def module() -> str:
    """A module name no other test uses (sys.modules keeps what a test imports), forgotten afterwards."""
    name = f"weather_tools_{uuid.uuid4().hex[:8]}"
    yield name
    sys.modules.pop(name, None)


def agent_folder(root: Path, module: str) -> Path:
    folder = root / "myagents"
    folder.mkdir()
    (folder / "weatherbot.yaml").write_text(AGENT.format(module=module))
    (folder / f"{module}.py").write_text(TOOLS)
    return folder


def test_a_tool_module_beside_the_yaml_imports_from_any_current_folder(tmp_path, monkeypatch, module):
    folder = agent_folder(tmp_path, module)
    monkeypatch.chdir(tmp_path)
    path_before = list(sys.path)
    spec = load_spec(Path("myagents") / "weatherbot.yaml")  # relative: the folder is resolved, not the cwd
    assert sys.path == path_before  # the folder was on the path for that import only
    assert Path(sys.modules[module].__file__).parent == folder.resolve()
    tools = spec.resolved_tools()  # found again later, as the agent loads, from sys.modules
    assert isinstance(tools["forecast"], Tool) and tools["forecast"]("Oslo") == "sunny in Oslo"


def test_the_folder_does_not_stay_importable_for_unrelated_modules(tmp_path, module):
    folder = agent_folder(tmp_path, module)
    (folder / f"{module}_helper.py").write_text("X = 1\n")
    load_spec(folder / "weatherbot.yaml")
    with pytest.raises(ModuleNotFoundError):
        __import__(f"{module}_helper")


def test_without_its_folder_the_module_is_not_found_and_the_message_says_where_it_is_looked_for(tmp_path, module):
    folder = agent_folder(tmp_path, module)
    text = (folder / "weatherbot.yaml").read_text()
    with pytest.raises(SpecError, match=f"tools\\[1\\]: cannot import module '{module}'.*beside an agent's YAML"):
        parse_spec(text, "<text>")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "weatherbot.yaml").write_text(text)
    with pytest.raises(SpecError, match=f"looked beside the agent file, in {elsewhere}"):
        load_spec(elsewhere / "weatherbot.yaml")
    assert module not in sys.modules


def test_an_agent_posted_to_the_daemon_imports_nothing_and_may_not_use_custom_tools(tmp_path, monkeypatch, module):
    folder = agent_folder(tmp_path, module)
    monkeypatch.chdir(folder)  # even with the module in the current folder
    with pytest.raises(ApiError) as refused:
        api_spec((folder / "weatherbot.yaml").read_bytes())
    assert refused.value.status == 422 and "built-in tools" in refused.value.message
    assert module not in sys.modules
