"""Which agent a request talks to: `model` names it (`agent:NAME`), or names a template (`template:NAME`) whose
agent for the end user is made on first use, as `POST /v1/agents` makes one (`Daemon.create_agent`), belonging
to that user.

- **The end user** is the request's `user` field or its `X-Pagemind-User` header. A user key is its user: a
  different `user` is refused (403), none is fine. An admin key (or a daemon without keys) must name one.
- **The agent's name** is `TEMPLATE-USER` when that is a valid agent name (letters, digits, `_.-`, at most 64
  characters), else `TEMPLATE-` and 16 hex digits of the user's SHA-256 (a user id with `@` or `:`, a long one).
  An agent of that name that the user owns is theirs; a name taken by an agent that is not that user's is a 409,
  never adopted.
- **Reach**: a user key reaches its user's agents only; another user's agent answers the very 404 an unknown one
  does (`model_not_found`).
"""

from __future__ import annotations

import hashlib
import re

import structlog

from pagemind.scheduler.api.auth import KeyRing, Principal
from pagemind.scheduler.api.models import NAME_PATTERN, USER_PATTERN
from pagemind.scheduler.api.openai.errors import ProxyError
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.errors import AgentExists, UnknownTemplate

log = structlog.get_logger("pagemind.api")
AGENT, TEMPLATE = "agent:", "template:"
_NAME, _USER = re.compile(NAME_PATTERN), re.compile(USER_PATTERN)


def not_found(model: str) -> ProxyError:
    """The one 404 of a model that is no agent or template the key may reach."""
    return ProxyError(
        404,
        "model_not_found",
        f"the model {model!r} does not exist or this key may not use it; "
        "name `agent:NAME` or `template:NAME` (GET /v1/models lists them)",
        param="model",
    )


def agent_name(template: str, user: str) -> str:
    """The name of `user`'s agent of `template` (see the module docstring)."""
    plain = f"{template}-{user}"
    if _NAME.fullmatch(plain):
        return plain
    return f"{template[:46]}-{hashlib.sha256(user.encode()).hexdigest()[:16]}"


def end_user(principal: Principal, given: str | None) -> str:
    """The end user a request acts for: a user key's own, or the one an admin names."""
    if principal.user is not None:
        if given and given != principal.user:
            raise ProxyError(403, "other_user", "this key acts for its own user only; leave `user` out", "user")
        return principal.user
    if not given:
        raise ProxyError(
            400, "user_required", "`template:` needs the end user: the `user` field or X-Pagemind-User", "user"
        )
    if not _USER.fullmatch(given):
        raise ProxyError(400, "invalid_user", f"user {given[:40]!r} is not a valid user id", "user")
    return given


async def resolve(daemon: Daemon, keyring: KeyRing, principal: Principal, model: str, user: str | None) -> str:
    """The name of the agent `model` names for this request (made on first use for `template:`). The usual
    request costs one indexed read, awaited on Postgres (the agent's owner); an unknown `agent:` is found out by
    the submission (`unknown`)."""
    if model.startswith(AGENT):
        name = model.removeprefix(AGENT)
        if not _NAME.fullmatch(name):
            raise not_found(model)
        if not principal.admin and await keyring.keys.owner_awaited(name) != principal.user:
            raise not_found(model)  # another user's agent answers what an unknown one does
        return name
    template = model.removeprefix(TEMPLATE)
    if not model.startswith(TEMPLATE) or template not in daemon.catalog.folder.templates():
        raise not_found(model)
    owner = end_user(principal, user)
    name = agent_name(template, owner)
    if await keyring.keys.owner_awaited(name) == owner:
        return name  # made before: the usual case
    try:
        daemon.create_agent(name, template=template, owner=owner)
    except AgentExists:  # made by a request beside this one, or a name someone else has
        if keyring.keys.owner_of(name) == owner:
            return name
        raise ProxyError(
            409, "agent_name_taken", f"the agent name {name!r} is taken by another agent", param="model"
        ) from None
    except UnknownTemplate:
        raise not_found(model) from None
    log.info("proxy_agent_created", agent=name, template=template, owner=owner)
    return name
