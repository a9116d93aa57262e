"""The daemon API's keys and who owns which agent: the one module that reads and writes `api_keys` and the
`agents.owner` column (migration 0008).

A key is `pm_` and 43 characters of `secrets.token_urlsafe(32)` (256 random bits). Only its SHA-256 is stored, so
a copy of the database holds no usable key; the key itself is returned once, by `create`. A plain hash (no salt,
no slow hash) is right for 256 random bits: there is nothing to guess, and the daemon finds a key by its hash (a
unique index) when it is not in its cache (`scheduler.api.auth`). Each key has a public id (`key_` and 12 hex
digits) that listings show and `revoke` accepts, so a key never needs to be pasted to be revoked.

Scopes: `user` (acts for one end user: reaches only the agents that user owns) and `admin` (reaches everything,
as `PAGEMIND_API_TOKEN` does).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.held import read_connection
from pagemind.runtime.state.records import aware, utcnow
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.schema import table_of
from pagemind.runtime.state.tables.security import api_keys

PREFIX = "pm_"
SCOPES = ("user", "admin")
USER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+:-]{0,127}")  # an end user's id as a product names it
agents = table_of(AgentRow)
_COLUMNS = (api_keys.c.id, api_keys.c.user_id, api_keys.c.scope, api_keys.c.created_at, api_keys.c.revoked_at)
# Built once (a statement built per call costs more CPU than running it).
_BY_HASH = select(*_COLUMNS).where(api_keys.c.key_hash == bindparam("p_hash"), api_keys.c.revoked_at.is_(None))
_OWNER = select(agents.c.owner).where(agents.c.name == bindparam("p_name"))
_OWNER_OF_ID = select(agents.c.owner).where(agents.c.id == bindparam("p_id"))


class KeyInputError(ValueError):
    """A user id, scope or key that cannot be used; the message says why in one line."""


@dataclass(frozen=True)
class ApiKey:
    """A key as stored: never the key itself."""

    id: str
    user: str | None  # the end user a user key acts for; None for an admin key
    scope: str  # "user" or "admin"
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def admin(self) -> bool:
        """Whether the key reaches every agent."""
        return self.scope == "admin"


def hash_key(key: str) -> str:
    """The stored form of a key: its SHA-256, in hex."""
    return hashlib.sha256(key.encode()).hexdigest()


def checked_user(user: str) -> str:
    """`user` when it is a usable end-user id (1-128 of letters, digits and `._@+:-`); else `KeyInputError`."""
    if not USER_ID.fullmatch(user):
        raise KeyInputError(
            f"user id {user[:40]!r} must be 1-128 letters, digits or ._@+:- (starting with a letter or digit)"
        )
    return user


def _key_of(row: Any) -> ApiKey:
    revoked = row.revoked_at
    return ApiKey(row.id, row.user_id, row.scope, aware(row.created_at), aware(revoked) if revoked else None)


class KeyStore:
    """The keys and the agents' owners of one database."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._awaited = AwaitedStatements.of(engine)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Connection]:
        if not dialect(self.engine).held_reads:  # as `StateStore.one_statement`: a pooled connection there
            with self.engine.connect() as conn:
                yield conn
            return
        with read_connection(self.engine) as conn:
            yield conn

    # -- keys -----------------------------------------------------------------------------------------------------

    def create(self, user: str | None, scope: str = "user", now: datetime | None = None) -> tuple[ApiKey, str]:
        """A new key for `user` (required for a user key; optional for an admin key, where it only labels it):
        its stored record and the key itself, which nothing can show again."""
        if scope not in SCOPES:
            raise KeyInputError(f"scope {scope[:20]!r} is not one of {', '.join(SCOPES)}")
        if user is None and scope == "user":
            raise KeyInputError("a user key needs the user it acts for (--user)")
        user = checked_user(user) if user is not None else None
        key = PREFIX + secrets.token_urlsafe(32)
        record = ApiKey(f"key_{secrets.token_hex(6)}", user, scope, now or utcnow())
        with self.engine.begin() as conn:
            conn.execute(
                insert(api_keys).values(
                    id=record.id,
                    key_hash=hash_key(key),
                    user_id=user,
                    scope=scope,
                    created_at=record.created_at,
                )
            )
        return record, key

    def all(self, *, revoked: bool = True) -> list[ApiKey]:
        """Every key, oldest first (the revoked ones too, unless `revoked` is false)."""
        query = select(*_COLUMNS).order_by(api_keys.c.created_at, api_keys.c.id)
        if not revoked:
            query = query.where(api_keys.c.revoked_at.is_(None))
        with self._reading() as conn:
            return [_key_of(row) for row in conn.execute(query)]

    def find(self, key: str) -> ApiKey | None:
        """The live (not revoked) key `key` is, by its hash; None for any other string."""
        if not key.startswith(PREFIX):
            return None
        with self._reading() as conn:
            row = conn.execute(_BY_HASH, {"p_hash": hash_key(key)}).first()
        return _key_of(row) if row else None

    async def find_awaited(self, key: str) -> ApiKey | None:
        """`find`, awaited on Postgres (the event loop runs on while the database answers)."""
        if self._awaited is None or not key.startswith(PREFIX):
            return self.find(key)
        row = await self._awaited.first(_BY_HASH, {"p_hash": hash_key(key)}, shape="named")
        return _key_of(row) if row else None

    def revoke(self, key_or_id: str, now: datetime | None = None) -> list[ApiKey]:
        """Revoke one key, given as itself or as its id; the keys revoked now (none: no such live key)."""
        column = api_keys.c.key_hash if key_or_id.startswith(PREFIX) else api_keys.c.id
        wanted = hash_key(key_or_id) if key_or_id.startswith(PREFIX) else key_or_id
        return self._revoke(column == wanted, now)

    def revoke_user(self, user: str, now: datetime | None = None) -> list[ApiKey]:
        """Revoke every live key of `user`; the keys revoked now."""
        return self._revoke(api_keys.c.user_id == checked_user(user), now)

    def _revoke(self, which: Any, now: datetime | None) -> list[ApiKey]:
        at = now or utcnow()
        with self.engine.begin() as conn:
            rows = conn.execute(select(*_COLUMNS).where(which, api_keys.c.revoked_at.is_(None))).all()
            if rows:
                ids = [row.id for row in rows]
                conn.execute(update(api_keys).where(api_keys.c.id.in_(ids)).values(revoked_at=at))
        return [ApiKey(row.id, row.user_id, row.scope, aware(row.created_at), at) for row in rows]

    def delete_user(self, user: str) -> int:
        """Delete every key of `user`, revoked or not (the last step of erasing an end user); how many."""
        with self.engine.begin() as conn:
            return conn.execute(delete(api_keys).where(api_keys.c.user_id == checked_user(user))).rowcount

    def any_live(self) -> bool:
        """Whether any key is not revoked."""
        with self._reading() as conn:
            return (
                conn.execute(select(api_keys.c.id).where(api_keys.c.revoked_at.is_(None)).limit(1)).first() is not None
            )

    # -- owners ---------------------------------------------------------------------------------------------------

    def owner_of(self, name: str) -> str | None:
        """The end user agent `name` belongs to; None for an agent of nobody's, or no stored agent of that name."""
        with self._reading() as conn:
            row = conn.execute(_OWNER, {"p_name": name}).first()
        return row.owner if row else None

    async def owner_awaited(self, name: str) -> str | None:
        """`owner_of`, awaited on Postgres."""
        if self._awaited is None:
            return self.owner_of(name)
        row = await self._awaited.first(_OWNER, {"p_name": name}, shape="named")
        return row.owner if row else None

    def owner_of_id(self, agent_id: int) -> str | None:
        """The end user the stored agent `agent_id` belongs to (None: nobody, or no such agent)."""
        with self._reading() as conn:
            row = conn.execute(_OWNER_OF_ID, {"p_id": agent_id}).first()
        return row.owner if row else None

    async def owner_of_id_awaited(self, agent_id: int) -> str | None:
        """`owner_of_id`, awaited on Postgres."""
        if self._awaited is None:
            return self.owner_of_id(agent_id)
        row = await self._awaited.first(_OWNER_OF_ID, {"p_id": agent_id}, shape="named")
        return row.owner if row else None

    def assign(self, agent_id: int, user: str | None) -> None:
        """Give the stored agent `agent_id` to `user` (None: to nobody, admin keys only)."""
        user = checked_user(user) if user is not None else None
        with self.engine.begin() as conn:
            conn.execute(update(agents).where(agents.c.id == agent_id).values(owner=user))

    def assign_by_name(self, name: str, user: str | None) -> bool:
        """`assign` for the stored agent called `name`; False when there is none."""
        user = checked_user(user) if user is not None else None
        with self.engine.begin() as conn:
            done = conn.execute(update(agents).where(agents.c.name == name).values(owner=user))
        return bool(done.rowcount)

    def owned_ids(self, user: str) -> list[int]:
        """The stored ids of the agents `user` owns."""
        with self._reading() as conn:
            return [row.id for row in conn.execute(select(agents.c.id).where(agents.c.owner == user))]

    def owned_names(self, user: str) -> set[str]:
        """The names of the agents `user` owns."""
        with self._reading() as conn:
            return {row.name for row in conn.execute(select(agents.c.name).where(agents.c.owner == user))}
