"""How a browser presents its key to the memory page, and how the page's forms are kept from other sites (CSRF).

- **The key in a cookie.** The login form (`POST /ui/login`) checks the key as the API would (`KeyRing`) and sets
  it as cookie `pagemind_key`: HttpOnly (no script reads it), SameSite=Strict (no other site's page or link sends
  it), Path=/ui (the JSON API still wants `Authorization`), Secure when the page came over HTTPS. The key itself,
  not a session id: every request is checked as an API call is — a revoked key is refused (within the key cache's
  seconds), every worker process accepts it, and there is no session state to keep. Logging out clears it.
- **CSRF.** Besides SameSite=Strict, every form carries a token that must equal the `pagemind_csrf` cookie
  (double submit: another site can neither read nor set it), and a request whose `Origin` names another host is
  refused. The token cookie is random per browser, set by the first page it gets.
"""

from __future__ import annotations

import secrets
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response

PREFIX = "/ui"
KEY_COOKIE = "pagemind_key"
CSRF_COOKIE = "pagemind_csrf"
CSRF_FIELD = "csrf"
LOGIN = f"{PREFIX}/login"
STATIC = f"{PREFIX}/static/"


def is_ui(path: str) -> bool:
    """Whether a request path is the memory page's."""
    return path == PREFIX or path.startswith(PREFIX + "/")


def is_open(path: str) -> bool:
    """The memory page's paths that need no key: the login form and the stylesheet it loads."""
    return path == LOGIN or path.startswith(STATIC)


def cookies_of(header: str) -> dict[str, str]:
    """The cookies of a `Cookie` header (malformed ones left out)."""
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:  # a hostile header must not fail the request
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def credential(headers: dict[str, str]) -> str:
    """The `Authorization` value a page request stands for: its own header when it sends one (a script, a test),
    else the key of the login cookie ("" when there is neither)."""
    if headers.get("authorization"):
        return headers["authorization"]
    key = cookies_of(headers.get("cookie", "")).get(KEY_COOKIE, "")
    return f"Bearer {key}" if key else ""


def csrf_token(request: Request) -> str:
    """This browser's CSRF token: its cookie's, or a new one (`keep_csrf` sets it on the response)."""
    token = request.cookies.get(CSRF_COOKIE, "")
    if not token:
        token = getattr(request.state, "new_csrf", "") or secrets.token_urlsafe(32)
        request.state.new_csrf = token
    return token


def keep_csrf(request: Request, response: Response) -> None:
    """Set the CSRF cookie on a response when this request made a new token."""
    token = getattr(request.state, "new_csrf", "")
    if token:
        set_cookie(request, response, CSRF_COOKIE, token)


def set_cookie(request: Request, response: Response, name: str, value: str) -> None:
    """One of the page's cookies: HttpOnly, SameSite=Strict, for /ui only, Secure over HTTPS."""
    secure = request.url.scheme == "https"
    response.set_cookie(name, value, path=PREFIX, httponly=True, samesite="strict", secure=secure)


async def form_of(request: Request) -> dict[str, str]:
    """A urlencoded form body's fields (the first value of each), read without a multipart parser."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {name: values[0] for name, values in parse_qs(body, keep_blank_values=True).items()}


def csrf_refusal(request: Request, form: dict[str, str]) -> str | None:
    """Why a form post is refused as cross-site (None when it is the page's own): its `Origin` names another
    host, or its token is missing or not this browser's."""
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host", ""):  # "null" too: no page of ours
        return "the form was sent from another site"
    cookie, given = request.cookies.get(CSRF_COOKIE, ""), form.get(CSRF_FIELD, "")
    if not cookie or not given or not secrets.compare_digest(cookie.encode(), given.encode()):
        return "the form's token is missing or stale; reload the page and send it again"
    return None
