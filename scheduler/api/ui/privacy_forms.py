"""The memory page's forms for the review queue and forget (mounted under `/ui` by `routes`):

    POST /ui/agents/{name}/review/{id}/approve   text, [pin]   the API's `approve_pending` (text: edit and approve)
    POST /ui/agents/{name}/review/{id}/reject                  the API's `reject_pending`
    POST /ui/agents/{name}/forget                query, confirm  the API's `forget_in`; the page shows its report
    POST /ui/agents/{name}/mute                  topic          the API's `change_topics`
    POST /ui/agents/{name}/unmute                topic

Their SQL reads and writes run off the event loop (`state.off_loop`), as the page's sections read. Each carries
the page's CSRF token (`session.csrf_refusal`) and reaches only an agent the key may see (the app's
`authorize`, as for every path that names an agent). A refused form comes back in the page with why and what was
sent; a done one redirects to the page (303) saying what it did, except a forget, whose page shows its report
(counts only) and keeps the query out of the URL.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from pagemind.runtime.agent import Agent
from pagemind.runtime.state.off_loop import off_loop
from pagemind.scheduler.api.agents import DaemonDep
from pagemind.scheduler.api.errors import ApiError
from pagemind.scheduler.api.privacy.forgetting import ForgetIn, TopicIn, change_topics, forget_in
from pagemind.scheduler.api.privacy.review import (
    ApproveIn,
    approve_pending,
    pending_memory,
    reject_pending,
    review_queue,
)
from pagemind.scheduler.api.ui.pages import error_page, page
from pagemind.scheduler.api.ui.sections import built
from pagemind.scheduler.api.ui.session import PREFIX, csrf_refusal, form_of
from pagemind.scheduler.api.ui.views import PageQuery, Refusal

router = APIRouter(include_in_schema=False)  # included by `routes.router`, under its prefix


def _done(name: str, word: str, anchor: str) -> RedirectResponse:
    return RedirectResponse(f"{PREFIX}/agents/{quote(name, safe='')}?done={word}#{anchor}", status_code=303)


def _why(exc: Exception) -> str:
    """Why a form's value was refused, in words (a field's: "It should have at most 500 characters")."""
    if isinstance(exc, ValidationError):
        return "; ".join(str(error["msg"]) for error in exc.errors()).replace("String should", "It should")
    return exc.message if isinstance(exc, ApiError) else str(exc)


async def _page_again(request: Request, agent: Agent, status: int, query: PageQuery) -> Response:
    sections = await built(agent, query)
    return page(request, "agent.html", status, name=agent.name, sections=sections, query=query)


@router.post("/agents/{name}/review/{review_id}/approve")
async def approve(request: Request, name: str, review_id: str, daemon: DaemonDep) -> Response:
    """Approve a pending memory as `POST …/memory/review/{id}/approve` does; `pin` pins it, and a text that differs
    from the pending one is an edit made before approving."""
    form = await form_of(request)
    if (why := csrf_refusal(request, form)) is not None:
        return error_page(request, 403, "csrf", why)
    sent = form.get("text", "").replace("\r\n", "\n")
    async with daemon.agent(name) as agent:
        queue = review_queue(agent)
        item = await off_loop(agent.store.engine, pending_memory, queue, review_id, name)  # 404: no longer waiting
        edited = " ".join(sent.split()) != item.text
        try:
            if not sent.strip():
                raise ValueError("the memory is empty: write its text, or reject it")
            body = ApproveIn(pin=bool(form.get("pin")), text=sent if edited else None)
        except (ValidationError, ValueError) as exc:
            refused = Refusal(f"review:{review_id}", _why(exc), sent)
            return await _page_again(request, agent, 422, PageQuery(refused=refused))
        await approve_pending(agent, review_id, body, via="ui")
    return _done(name, "pinned" if body.pin else "approved", "review")


@router.post("/agents/{name}/review/{review_id}/reject")
async def reject(request: Request, name: str, review_id: str, daemon: DaemonDep) -> Response:
    """Reject a pending memory as `POST …/memory/review/{id}/reject` does: dropped for good."""
    form = await form_of(request)
    if (why := csrf_refusal(request, form)) is not None:
        return error_page(request, 403, "csrf", why)
    async with daemon.agent(name) as agent:
        await off_loop(agent.store.engine, reject_pending, agent, review_id, "ui")
    return _done(name, "rejected", "review")


@router.post("/agents/{name}/forget")
async def forget(request: Request, name: str, daemon: DaemonDep) -> Response:
    """Forget what the query matches, as `POST …/memory/forget` does, once the form's box is ticked to confirm;
    the page that answers shows the report (counts only) and never the query or what was removed."""
    form = await form_of(request)
    if (why := csrf_refusal(request, form)) is not None:
        return error_page(request, 403, "csrf", why)
    sent = form.get("query", "")
    async with daemon.agent(name) as agent:
        status, why = 400, "tick “for good” to confirm: a forget cannot be undone"
        if form.get("confirm") == "yes":
            try:
                report = await forget_in(agent, ForgetIn(query=sent), via="ui")
                return await _page_again(request, agent, 200, PageQuery(forgotten=report))
            except (ValidationError, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.status != 422:
                    raise
                status, why = 422, _why(exc)
        return await _page_again(request, agent, status, PageQuery(refused=Refusal("forget", why, sent)))


async def _topic(request: Request, name: str, daemon: DaemonDep, change: Literal["mute", "unmute"]) -> Response:
    form = await form_of(request)
    if (why := csrf_refusal(request, form)) is not None:
        return error_page(request, 403, "csrf", why)
    sent = form.get("topic", "")
    async with daemon.agent(name) as agent:
        try:
            body = TopicIn(topic=sent)
            changed = (await off_loop(agent.store.engine, change_topics, agent, change, body.topic)).changed
        except (ValidationError, ApiError) as exc:
            if isinstance(exc, ApiError) and exc.status != 422:
                raise
            return await _page_again(request, agent, 422, PageQuery(refused=Refusal("mute", _why(exc), sent)))
    word = {("mute", True): "muted", ("mute", False): "already-muted", ("unmute", True): "unmuted"}
    return _done(name, word.get((change, bool(changed)), "not-muted"), "forget")


@router.post("/agents/{name}/mute")
async def mute(request: Request, name: str, daemon: DaemonDep) -> Response:
    """Mute a topic as `POST …/memory/muted` does."""
    return await _topic(request, name, daemon, "mute")


@router.post("/agents/{name}/unmute")
async def unmute(request: Request, name: str, daemon: DaemonDep) -> Response:
    """Unmute a topic as `DELETE …/memory/muted?topic=…` does."""
    return await _topic(request, name, daemon, "unmute")
