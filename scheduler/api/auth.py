"""Who is asking, and what they may reach: the admin token, API keys, agent ownership and per-key limits.

- **Principals.** `PAGEMIND_API_TOKEN` (compared in constant time) and keys of scope `admin` are admins: they
  reach everything. A key of scope `user` acts for one end user (`runtime.state.keys`): it reaches the agents that
  user owns and nothing else.
- **No existence oracle.** Every route with an agent (`{name}`) or a run (`{run_id}`) in its path is checked by
  `authorize`, one dependency of the whole app (so a route added later is checked too): another user's agent or
  run answers the very 404 an unknown one does (same status, code and message), before the route runs. Listing
  agents with a user key lists that user's. Routes marked `x-admin-only` in the OpenAPI document answer 403
  `admin_only` to every user key, whatever the path names (decided: the route is public knowledge, the 403 says
  nothing about any agent).
- **Cost per request.** A key is found by its SHA-256 in `api_keys` (a unique index), then kept in this process
  for `key_cache_s` (`DaemonConfig`, default 5 s): a request with a known key costs a hash and a dictionary
  lookup. A revocation made through this process takes effect at once; one made elsewhere (`pagemind keys
  revoke`, another worker) within `key_cache_s`. An unknown key is never cached: each costs one indexed read.
  A user key's request to an agent or a run reads its owner (one indexed read; awaited on Postgres); the admin's
  requests read nothing.
- **Limits** (user keys; `DaemonConfig`): `key_requests_per_minute` (default 600) as a token bucket per key and
  process, and `key_turns_in_flight` (default 4): messages accepted and not finished over the user's agents, for
  the routes that send one. Past either: 429 `rate_limited` / `too_many_turns` with `Retry-After` (seconds).
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from pagemind.runtime.state.keys import ApiKey, KeyStore
from pagemind.runtime.state.off_loop import off_loop
from pagemind.scheduler.api.errors import ApiError, unknown_run
from pagemind.scheduler.errors import UnknownAgent

ADMIN_ONLY = "x-admin-only"  # the OpenAPI extension that marks a route for admins alone


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: an admin (`user` None) or one end user, and the key that says so."""

    key_id: str  # "token" for PAGEMIND_API_TOKEN, "open" for a daemon without auth (loopback only)
    user: str | None = None

    @property
    def admin(self) -> bool:
        """Whether it reaches every agent."""
        return self.user is None


OPEN = Principal("open")  # a daemon with neither token nor keys: loopback only, nothing to check
TOKEN = Principal("token")
NOBODY = Principal("nobody", user="")  # a request `Guard` did not authenticate (an open path): owns nothing


def principal_of(key: ApiKey) -> Principal:
    """The principal a stored key acts as."""
    return Principal(key.id, None if key.admin else key.user)


class KeyRing:
    """Finds the principal of a bearer value, keys cached per process for `cache_s` (see the module docstring)."""

    def __init__(
        self,
        keys: KeyStore,
        token: str | None,
        *,
        required: bool,
        cache_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.keys, self.token, self.required, self.cache_s, self.clock = keys, token, required, cache_s, clock
        self._cache: dict[str, tuple[Principal, float]] = {}  # by the key itself: a hit costs no hash either

    async def principal(self, authorization: str) -> Principal | None:
        """The principal of an `Authorization` header's value; None for a missing, wrong or revoked credential.
        A daemon that requires nothing (loopback only) takes such a request as `OPEN`, and a live key's as its
        user's all the same."""
        scheme, _, given = authorization.partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            return None if self.required else OPEN
        if self.token is not None and secrets.compare_digest(given.encode(), self.token.encode()):
            return TOKEN
        cached = self._cache.get(given)
        now = self.clock()
        if cached is not None and now - cached[1] < self.cache_s:
            return cached[0]
        found = await self.keys.find_awaited(given)
        if found is None:
            self._cache.pop(given, None)
            return None if self.required else OPEN
        principal = principal_of(found)
        self._cache[given] = (principal, now)
        return principal

    def forget(self, key_ids: set[str]) -> None:
        """Drop revoked keys from the cache now (a revocation through this process)."""
        for given, (principal, _) in list(self._cache.items()):
            if principal.key_id in key_ids:
                del self._cache[given]


class RateLimiter:
    """Requests per minute per key, as a token bucket of `per_minute` tokens refilled evenly (0: no limit)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute, self.clock = per_minute, clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key id: (tokens, when counted)

    def wait_s(self, key_id: str) -> int:
        """Take one request's token: 0 when there was one, else the whole seconds until there is."""
        if self.per_minute <= 0:
            return 0
        now, rate = self.clock(), self.per_minute / 60.0
        tokens, at = self._buckets.get(key_id, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + (now - at) * rate)
        if tokens >= 1.0:
            self._buckets[key_id] = (tokens - 1.0, now)
            return 0
        self._buckets[key_id] = (tokens, now)
        return max(1, math.ceil((1.0 - tokens) / rate))


def principal_in(request: Request) -> Principal:
    """The principal `Guard` found for this request; `NOBODY` where it looked for none (an open path), so that a
    route there reaches no agent."""
    found: Principal | None = getattr(request.state, "principal", None)
    return found or NOBODY


async def authorize(request: Request) -> None:
    """The whole app's dependency: admin-only routes, then the ownership of the agent or run the path names."""
    principal = principal_in(request)
    if principal.admin:
        return
    route = request.scope.get("route")
    if (getattr(route, "openapi_extra", None) or {}).get(ADMIN_ONLY):
        raise ApiError(403, "admin_only", "this route needs an admin key (PAGEMIND_API_TOKEN or a key of scope admin)")
    ring: KeyRing = request.app.state.keyring
    params = request.path_params
    if "name" in params and await ring.keys.owner_awaited(params["name"]) != principal.user:
        raise UnknownAgent(params["name"])  # exactly what an unknown agent answers
    if "run_id" in params:
        daemon = request.app.state.daemon
        item = await daemon.inbox.read(params["run_id"])
        if item is None or await ring.keys.owner_of_id_awaited(item.agent_id) != principal.user:
            raise unknown_run(params["run_id"])


async def turn_quota(request: Request) -> None:
    """A dependency of the routes that send a message: 429 when the user's agents have `key_turns_in_flight`
    messages accepted and not finished."""
    principal = principal_in(request)
    daemon = request.app.state.daemon
    limit = daemon.config.key_turns_in_flight
    if principal.admin or limit <= 0 or principal.user is None:
        return
    ring: KeyRing = request.app.state.keyring
    engine = ring.keys.engine
    owned = await off_loop(engine, ring.keys.owned_ids, principal.user)  # the loop never waits on SQL (Postgres)
    counts = await off_loop(engine, daemon.inbox.open_counts) if owned else {}
    if sum(counts.get(agent_id, 0) for agent_id in owned) >= limit:
        raise ApiError(
            429,
            "too_many_turns",
            f"{limit} messages of this user are already waiting or running; send again once one has finished",
            headers={"retry-after": "1"},
        )


def admin_only() -> dict[str, Any]:
    """The `openapi_extra` of a route for admins alone."""
    return {ADMIN_ONLY: True}
