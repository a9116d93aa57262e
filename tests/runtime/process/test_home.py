"""Where state lives when PAGEMIND_HOME does not say (runtime/process/home.py): a ./.pagemind the current folder
already has, else the user data folder; never a folder made in whatever folder a command runs in."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagemind.runtime.process.home import Home, describe, find_home, user_home
from pagemind.runtime.process.settings import Settings


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    """XDG_DATA_HOME in the test's folder (platformdirs reads it), and no PAGEMIND_HOME."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("PAGEMIND_HOME")
    return tmp_path / "xdg"


def test_the_default_is_the_user_data_folder_whatever_the_current_folder(tmp_path, data, monkeypatch):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        assert find_home() == Home(data / "pagemind", "user") and user_home() == data / "pagemind"
        settings = Settings.from_env()
        assert settings.home == data / "pagemind"
        assert settings.database_url == f"sqlite:///{data / 'pagemind' / 'pagemind.db'}"
    assert not (data / "pagemind").exists()  # finding it makes nothing


def test_an_existing_local_folder_is_used_and_a_variable_wins_over_both(tmp_path, data):
    (tmp_path / ".pagemind").mkdir()
    assert find_home({}, cwd=tmp_path) == Home(tmp_path / ".pagemind", "local")
    (tmp_path / "file-not-folder").mkdir()
    (tmp_path / "file-not-folder" / ".pagemind").write_text("")  # a file of that name is no state folder
    assert find_home({}, cwd=tmp_path / "file-not-folder").origin == "user"
    assert find_home({"PAGEMIND_HOME": "/srv/pm"}, cwd=tmp_path) == Home(Path("/srv/pm"), "variable")


def test_the_description_names_the_folder_and_how_to_change_it(tmp_path, data):
    assert describe(Home(tmp_path / ".pagemind", "local")).startswith(f"{tmp_path / '.pagemind'} (the .pagemind")
    assert "PAGEMIND_HOME" in describe(Home(data / "pagemind", "user"))
