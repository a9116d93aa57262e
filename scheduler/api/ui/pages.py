"""Rendering the memory page: Jinja2 templates shipped in the package (`templates/`), every value escaped
(autoescape on for every template, whatever its name), and the headers every page answers with.

The Content-Security-Policy allows the package's stylesheet and nothing else: no script runs on the page (it has
none), inline or injected, and no other site may frame it or receive its forms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from pagemind.scheduler.api.auth import principal_in
from pagemind.scheduler.api.ui.session import CSRF_FIELD, KEY_COOKIE, PREFIX, csrf_token, keep_csrf

HERE = Path(__file__).parent
STATIC = {"ui.css": "text/css; charset=utf-8"}  # the files `/ui/static/` serves, and their types
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",  # memories are private: no copy in a shared cache or the browser's
}
TEMPLATES = Environment(
    loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined, trim_blocks=True
)


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A template rendered for this request, with what every page shows (who is signed in, the CSRF token)."""
    principal = principal_in(request)
    keyring = request.app.state.keyring
    html = TEMPLATES.get_template(template).render(
        prefix=PREFIX,
        csrf=csrf_token(request),
        csrf_field=CSRF_FIELD,
        principal=principal,
        signed_in=principal.key_id not in ("open", "nobody") or not keyring.required,
        can_sign_out=bool(request.cookies.get(KEY_COOKIE)),
        **context,
    )
    response = HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
    keep_csrf(request, response)
    return response


def error_page(request: Request, status: int, code: str, message: str) -> HTMLResponse:
    """An error as a page (the JSON API answers the same error as `{"error": …}`)."""
    return page(request, "error.html", status, status_code=status, code=code, message=message)


def static_file(name: str) -> Response | None:
    """One of the page's shipped files (None for any other name)."""
    media = STATIC.get(name)
    if media is None:
        return None
    body = (HERE / "static" / name).read_bytes()
    return Response(body, media_type=media, headers={"cache-control": "public, max-age=3600", **_NOSNIFF})


_NOSNIFF = {"x-content-type-options": "nosniff"}
