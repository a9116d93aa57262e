"""The memory page's routes under `/ui` (left out of the OpenAPI document: pages, not API).

    GET  /ui/login, POST /ui/login, POST /ui/logout     the key, as an HttpOnly cookie (`ui.session`)
    GET  /ui                                            the agents the key may see
    GET  /ui/agents/{name}[?q=…]                        one agent: its sections (`ui.sections`), a search's hits
    POST /ui/agents/{name}/blocks/{label}               edit a core block (the API's `set_block`, operation `ui`)
    POST /ui/agents/{name}/review/…, /forget, /mute …   the review queue's and forget's forms (`privacy_forms`)
    GET  /ui/static/{file}                              the stylesheet, shipped in the package

Keys are those of the API and checked the same way (`Guard`, `authorize`): a user key sees its user's agents, and
another user's agent answers the page an unknown agent does.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import structlog
from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from pagemind.scheduler.api.agents import DaemonDep
from pagemind.scheduler.api.auth import principal_in
from pagemind.scheduler.api.errors import ApiError
from pagemind.scheduler.api.memory import set_block
from pagemind.scheduler.api.ui import privacy_forms
from pagemind.scheduler.api.ui.pages import error_page, page, static_file
from pagemind.scheduler.api.ui.sections import built
from pagemind.scheduler.api.ui.session import KEY_COOKIE, PREFIX, csrf_refusal, form_of, set_cookie
from pagemind.scheduler.api.ui.views import PageQuery

log = structlog.get_logger("pagemind.ui")
router = APIRouter(prefix=PREFIX, include_in_schema=False)
router.include_router(privacy_forms.router)
Search = Annotated[str, Query(max_length=2000)]


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


@router.get("/static/{file}")
async def static(file: str) -> Response:
    """A shipped stylesheet (no key needed: it holds nothing of anyone's)."""
    found = static_file(file)
    if found is None:
        raise ApiError(404, "not_found", f"no file '{file}' here")
    return found


@router.get("/login")
async def login_form(request: Request) -> Response:
    """The form that takes a key (a daemon that needs none goes straight to the agents)."""
    if not request.app.state.keyring.required:
        return _see_other(PREFIX)
    return page(request, "login.html", error="")


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the key as the API would and keep it in the browser as an HttpOnly, SameSite=Strict cookie."""
    form = await form_of(request)
    if (why := csrf_refusal(request, form)) is not None:
        return page(request, "login.html", 403, error=why)
    key = form.get("key", "").strip()
    principal = await request.app.state.keyring.principal(f"Bearer {key}") if key else None
    if principal is None:
        log.info("ui_login_refused")
        return page(request, "login.html", 401, error="that key is missing, wrong or revoked")
    response = _see_other(PREFIX)
    if principal.key_id != "open":  # a daemon without keys takes anything: nothing worth keeping
        set_cookie(request, response, KEY_COOKIE, key)
    log.info("ui_login", key_id=principal.key_id, user=principal.user)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Forget the key in this browser."""
    form = await form_of(request)
    if (why := csrf_refusal(request, form)) is not None:
        return error_page(request, 403, "csrf", why)
    response = _see_other(f"{PREFIX}/login")
    response.delete_cookie(KEY_COOKIE, path=PREFIX, httponly=True, samesite="strict")
    return response


@router.get("")
async def agents(request: Request, daemon: DaemonDep) -> Response:
    """The agents this key may see (an admin: every one)."""
    principal = principal_in(request)
    shown = [a for a in daemon.list_agents() if principal.admin or a.owner == principal.user]
    return page(request, "agents.html", agents=shown)


@router.get("/agents/{name}")
async def agent_page(
    request: Request, name: str, daemon: DaemonDep, q: Search = "", saved: str = "", done: str = ""
) -> Response:
    """One agent's memory, section by section; with `q`, archival memories found for it; with `done`, what a form
    of the page just did (a word of `privacy.DONE`)."""
    query = PageQuery(q=q.strip(), saved=saved, done=done)
    async with daemon.agent(name) as agent:
        sections = await built(agent, query)
    return page(request, "agent.html", name=name, sections=sections, query=query)


@router.post("/agents/{name}/blocks/{label}")
async def edit_block(request: Request, name: str, label: str, daemon: DaemonDep) -> Response:
    """Set a core block from the page's form: a versioned edit as `PATCH …/memory/blocks/{label}` makes (operation
    `ui`). A refused value comes back in the form with why."""
    form = await form_of(request)
    if (why := csrf_refusal(request, form)) is not None:
        return error_page(request, 403, "csrf", why)
    value = form.get("value", "").replace("\r\n", "\n")  # a browser sends a textarea's line breaks as CRLF
    async with daemon.agent(name) as agent:
        try:
            await set_block(agent, label, value, operation="ui")
        except ApiError as exc:
            if exc.code == "unknown_block":
                raise
            query = PageQuery(failed=(label, exc.message, value))
            sections = await built(agent, query)
            return page(request, "agent.html", exc.status, name=name, sections=sections, query=query)
    return _see_other(f"{PREFIX}/agents/{quote(name, safe='')}?saved={quote(label, safe='')}#block-{quote(label)}")
