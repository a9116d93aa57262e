"""Routes: the API's keys, for an admin (a product's backend making a key per user at sign-up): make, list, revoke.

Every route here is `x-admin-only` (`api.auth`): a user key gets 403. A key revoked here stops working in this
daemon process at once, in the others within `key_cache_s`.
"""

from __future__ import annotations

import structlog
from fastapi import APIRouter, Request, Response

from pagemind.runtime.state.keys import ApiKey, KeyInputError
from pagemind.scheduler.api.auth import KeyRing, admin_only
from pagemind.scheduler.api.errors import ApiError
from pagemind.scheduler.api.models import KeyIn, KeyList, KeyMade, KeyOut

log = structlog.get_logger("pagemind.api")
router = APIRouter(prefix="/v1/keys", tags=["keys"], responses={403: {"description": "a user key"}})


def key_out(key: ApiKey) -> KeyOut:
    """From a stored key."""
    return KeyOut(id=key.id, user=key.user, scope=key.scope, created_at=key.created_at, revoked_at=key.revoked_at)


def ring_of(request: Request) -> KeyRing:
    """The app's key ring."""
    ring: KeyRing = request.app.state.keyring
    return ring


@router.post("", status_code=201, summary="make a key (shown once)", openapi_extra=admin_only())
async def create_key(body: KeyIn, request: Request) -> KeyMade:
    """A key for `user` (scope user: that user's agents only) or an admin key; the answer holds the key itself,
    which nothing shows again."""
    try:
        record, key = ring_of(request).keys.create(body.user, body.scope)
    except KeyInputError as exc:
        raise ApiError(422, "invalid_key_request", str(exc)) from None
    log.info("api_key_created", key_id=record.id, scope=record.scope, user=record.user)
    return KeyMade(**key_out(record).model_dump(), key=key)


@router.get("", summary="every key (never the keys themselves)", openapi_extra=admin_only())
async def list_keys(request: Request) -> KeyList:
    """Live and revoked keys, oldest first."""
    return KeyList(keys=[key_out(k) for k in ring_of(request).keys.all()])


@router.delete(
    "/{key_id}",
    status_code=204,
    summary="revoke a key",
    responses={404: {"description": "no live key with that id"}},
    openapi_extra=admin_only(),
)
async def revoke_key(key_id: str, request: Request) -> Response:
    """Revoke the key with this id (from the listing); it stops working in this process at once."""
    ring = ring_of(request)
    revoked = ring.keys.revoke(key_id) if not key_id.startswith("pm_") else []  # ids only: a key is never in a URL
    if not revoked:
        raise ApiError(404, "unknown_key", f"no live key {key_id[:40]!r}")
    ring.forget({k.id for k in revoked})
    log.info("api_key_revoked", key_id=key_id)
    return Response(status_code=204)
