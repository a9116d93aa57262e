"""`pagemind keys`: the daemon API's keys, made, listed and revoked in the database (`runtime.state.keys`).

    pagemind keys create --user u123                # a user key: only u123's agents; the key is the last line
    pagemind keys create --scope admin              # an admin key: every agent, as PAGEMIND_API_TOKEN
    pagemind keys list
    pagemind keys revoke key_0a1b2c3d4e5f           # by its id (or the key itself)
    pagemind keys revoke --user u123                # every key of a user

Only a key's hash is stored: `create` shows the key once. A running daemon trusts a key it has seen for up to
`key_cache_s` (default 5 s) after a revocation made here. Also `agents assign NAME --user U` (an agent's owner).

Encryption at rest's data key (docs/pages/guide/encryption.md), not the API's:

    pagemind keys new-data-key                      # a fresh random data key (base64), for a key file
    pagemind keys rotate-data --new-key-file F      # re-seal everything under F's key (current key: the settings')

A rotation killed midway goes on where it stopped when run again with the same two keys; the daemon must be
stopped meanwhile. Once it says so, set PAGEMIND_ENCRYPTION_KEY (or the key file) to the new key.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli.shared import CliError, open_store, out

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.state.keys import ApiKey, KeyStore


def add_parser(sub: Any) -> None:
    """Add `keys` to the CLI's subparsers."""
    keys = sub.add_parser("keys", help="the daemon API's keys: `keys create --user U`, `keys list`, `keys revoke`")
    keys.add_argument("action", choices=["create", "list", "revoke", "new-data-key", "rotate-data"])
    keys.add_argument("key", nargs="?", help="revoke: the key, or its id from `keys list`")
    keys.add_argument("--user", metavar="U", help="the end user a key acts for (revoke: every key of U)")
    keys.add_argument(
        "--scope",
        choices=["user", "admin"],
        default="user",
        help="create: user (only U's agents; the default) or admin (every agent)",
    )
    keys.add_argument("--new-key-file", metavar="F", help="rotate-data: the file holding the new data key")
    keys.add_argument("--batch", type=int, default=500, help="rotate-data: rows re-sealed per transaction")
    keys.set_defaults(handler=cmd_keys)


async def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    """Create, list or revoke keys; make a data key, or rotate the data to a new one."""
    if args.action == "new-data-key":
        from pagemind.runtime.crypto.keys import new_key_text

        out(new_key_text())
        return 0
    if args.action == "rotate-data":
        return rotate_data(args, settings)
    from pagemind.runtime.state.keys import KeyInputError, KeyStore

    store = KeyStore(open_store(settings).engine)
    try:
        if args.action == "create":
            return create(store, args)
        if args.action == "list":
            return list_keys(store)
        return revoke(store, args)
    except KeyInputError as exc:
        raise CliError(str(exc)) from None


def create(store: KeyStore, args: argparse.Namespace) -> int:
    """`keys create`: the key's id and who it is for, then the key alone on the last line."""
    if args.key:
        raise CliError("usage: pagemind keys create --user U [--scope user|admin]")
    record, key = store.create(args.user, args.scope)
    who = f"user {record.user}" if record.user else "no user"
    out(f"created {record.id} ({record.scope} key, {who}); the key is shown once, here:")
    out(key)
    return 0


def list_keys(store: KeyStore) -> int:
    """`keys list`: one line per key, oldest first; never the key."""
    found = store.all()
    if not found:
        out("no keys yet: `pagemind keys create --user U` makes one")
    for key in found:
        out(describe(key))
    return 0


def describe(key: ApiKey) -> str:
    """One key's listing line."""
    state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "live"
    return f"{key.id:<18} {key.scope:<6} {key.user or '-':<24} created {key.created_at:%Y-%m-%d %H:%M}  {state}"


def revoke(store: KeyStore, args: argparse.Namespace) -> int:
    """`keys revoke KEY` or `keys revoke --user U`: say what was revoked; exit 2 when nothing was."""
    if (args.key is None) == (args.user is None):
        raise CliError("usage: pagemind keys revoke KEY-OR-ID, or pagemind keys revoke --user U")
    revoked = store.revoke(args.key) if args.key is not None else store.revoke_user(args.user)
    if not revoked:
        what = "no live key with that id or value" if args.key is not None else f"user {args.user} has no live key"
        raise CliError(f"{what} (see `pagemind keys list`)")
    for key in revoked:
        out(f"revoked {key.id} ({key.scope} key, user {key.user or '-'})")
    return 0


def rotate_data(args: argparse.Namespace, settings: Settings) -> int:
    """`keys rotate-data --new-key-file F`: re-seal every stored text under F's key, then make it current."""
    from pathlib import Path

    from pagemind.runtime.crypto.keys import EncryptionKeyError, read_key_file
    from pagemind.runtime.keyrotation.run import rotate_data as rotate

    if not args.new_key_file:
        raise CliError("usage: pagemind keys rotate-data --new-key-file F (`pagemind keys new-data-key > F` makes one)")
    try:
        new_key = read_key_file(Path(args.new_key_file), "--new-key-file")
        store = open_store(settings)
        done = rotate(store.engine, settings, new_key, batch=max(1, args.batch), progress=out)
    except EncryptionKeyError as exc:
        raise CliError(str(exc)) from None
    out(
        f"rotated to the data key {done.key_id}: {sum(done.rows.values())} rows, {done.points} stored memories, "
        f"{done.traces} trace files re-sealed; set PAGEMIND_ENCRYPTION_KEY (or PAGEMIND_ENCRYPTION_KEY_FILE) to the "
        "new key now"
    )
    return 0
