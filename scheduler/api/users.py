"""Routes: an end user as a whole, for an admin (a product's backend when a user deletes their account).

`DELETE /v1/users/{user}` erases the user: their keys stop working at once (in this process; in others within
`key_cache_s`), every agent made for them through the API is purged (`Daemon.purge_agent`: every row, memory,
vector point and trace), then their keys are deleted. `x-admin-only` (`api.auth`): a user key gets 403.
"""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import APIRouter, Path, Request

from pagemind.runtime.state.keys import KeyInputError
from pagemind.scheduler.api.agents import DaemonDep
from pagemind.scheduler.api.auth import admin_only
from pagemind.scheduler.api.errors import ApiError
from pagemind.scheduler.api.keys import ring_of
from pagemind.scheduler.api.models import PurgeOut, UserPurgeOut

log = structlog.get_logger("pagemind.api")
router = APIRouter(prefix="/v1/users", tags=["users"], responses={403: {"description": "a user key"}})


@router.delete(
    "/{user}",
    summary="erase an end user: their agents purged, their keys deleted (admin keys only)",
    responses={
        400: {"description": "not a user id"},
        503: {"description": "a vector store cannot be reached (the user's keys are revoked; call again)"},
    },
    openapi_extra=admin_only(),
)
async def purge_user(
    request: Request,
    daemon: DaemonDep,
    user: Annotated[str, Path(description="the end user, as their keys and agents name them")],
) -> UserPurgeOut:
    """Revoke the user's keys, purge every agent made for them through the API, then delete their keys. Agents of
    the served folder assigned to them are kept (only their files remove them) and listed. Calling it again
    finishes a purge cut short; a user with nothing left answers with empty lists."""
    from pagemind.runtime.memory.vectors.records import StoreError

    ring = ring_of(request)
    try:
        revoked = ring.keys.revoke_user(user)
    except KeyInputError as exc:
        raise ApiError(400, "invalid_user", str(exc)) from None
    ring.forget({key.id for key in revoked})
    try:
        done = await daemon.purge_user(user)
    except StoreError as exc:
        raise ApiError(503, "store_unavailable", f"{exc} The user's keys are revoked; call again.") from None
    log.info("api_user_purged", agents=len(done.purged), kept=len(done.kept), keys=done.keys)
    return UserPurgeOut(
        user=user,
        agents=[PurgeOut(name=name, counts=report.counts) for name, report in done.purged],
        kept=done.kept,
        keys_deleted=done.keys,
    )
