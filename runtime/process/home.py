"""Where pagemind's state lives: `PAGEMIND_HOME` when set; else a `./.pagemind` the current folder already has
(the default of earlier versions, still read where it exists); else the platform's user data folder
(`platformdirs.user_data_dir("pagemind")`: ~/.local/share/pagemind on Linux, honouring XDG_DATA_HOME), so that
state does not move with the current folder.

Standard library and platformdirs only: the CLI's `--help` names the folder, and help loads no other kernel
module (tests/runtime/cli/test_cli_startup.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import platformdirs

LOCAL_NAME = ".pagemind"
"""The folder, in the current one, that earlier versions kept state in by default."""


@dataclass(frozen=True)
class Home:
    """The state folder and why it is that one: named by PAGEMIND_HOME (`variable`), a `./.pagemind` found in the
    current folder (`local`), or the user data folder (`user`)."""

    path: Path
    origin: Literal["variable", "local", "user"]


def user_home() -> Path:
    """The platform's user data folder for pagemind (platformdirs reads the process environment, XDG_DATA_HOME
    included)."""
    return platformdirs.user_data_path("pagemind", appauthor=False)


def cache_folder() -> Path:
    """pagemind's own user cache folder (platformdirs: ~/.cache/pagemind on Linux, honouring XDG_CACHE_HOME),
    created: the only place besides the state folder pagemind writes (the tokenizer's tables, fastembed's cache,
    the scratch state of a replay or a demo) — never the shared temp folder."""
    path = platformdirs.user_cache_path("pagemind", appauthor=False)
    path.mkdir(parents=True, exist_ok=True)
    return path


def find_home(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Home:
    """The state folder for this environment (default: the process's) and current folder (default: the
    process's); nothing is created."""
    env = os.environ if environ is None else environ
    configured = env.get("PAGEMIND_HOME")
    if configured:
        return Home(Path(configured), "variable")
    try:
        local = (cwd or Path.cwd()) / LOCAL_NAME
    except OSError:  # the current folder was deleted under the process: there is no ./.pagemind to read
        return Home(user_home(), "user")
    if local.is_dir():
        return Home(local, "local")
    return Home(user_home(), "user")


def describe(home: Home) -> str:
    """Where state lives, in words, for `pagemind --help`."""
    why = {
        "variable": "set by PAGEMIND_HOME",
        "local": f"the {LOCAL_NAME} this folder has; set PAGEMIND_HOME to choose",
        "user": "the user data folder; set PAGEMIND_HOME to choose another",
    }[home.origin]
    return f"{home.path} ({why})"
