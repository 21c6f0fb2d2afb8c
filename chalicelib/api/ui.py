"""``GET /ui``: the dashboard, a self-contained page over the public REST API.

The page and its files (``chalicelib/ui``: HTML, CSS and hand-written ES modules; no build
step, nothing fetched from another origin) are served without a key; every data call the
page makes goes to the REST API with the key the user typed, kept in session storage.

Every file is read from disk on first request and cached for the process. Responses carry
a strict Content-Security-Policy (scripts only from this origin, no inline script or
style, no framing, no connection elsewhere) and ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import string
from pathlib import Path

from chalice import Response

from chalicelib.api.http import Resource
from chalicelib.errors import RouteNotFound

resource = Resource(__name__)

UI_DIR = Path(__file__).parent.parent / "ui"
INDEX = "index.html"
_STEM_CHARS = frozenset(string.ascii_lowercase + string.digits + "_-")
_TYPES = {
    "html": "text/html; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

_cache: dict[str, str] = {}


def file_type(name: str) -> str | None:
    """The extension of a name a dashboard file may have (``app.js``), else None: lower-case
    letters, digits, ``-`` and ``_``, one dot, a known extension; nothing that leaves the
    directory. (No regex: this module is imported on every cold start.)"""
    stem, dot, extension = name.partition(".")
    plain = 0 < len(stem) <= 40 and stem[0].isalpha() and set(stem) <= _STEM_CHARS
    return extension if plain and dot and extension in _TYPES else None


def ui_file(name: str) -> Response:
    """One file of the dashboard with its type and the security headers; 404 otherwise."""
    extension = file_type(name)
    path = UI_DIR / name
    if extension is None or not path.is_file():
        raise RouteNotFound(f"No dashboard file {name!r}.")
    if name not in _cache:
        _cache[name] = path.read_text(encoding="utf-8")
    headers: dict[str, str | list[str]] = {"Content-Type": _TYPES[extension]}
    headers.update(SECURITY_HEADERS)
    return Response(body=_cache[name], status_code=200, headers=headers)


@resource.route("/ui", methods=["GET"])
def dashboard() -> Response:
    """The dashboard page (no key needed; its data calls send the key)."""
    return ui_file(INDEX)


@resource.route("/ui/{name}", methods=["GET"])
def dashboard_file(name: str) -> Response:
    """A script, style sheet or image of the dashboard."""
    return ui_file(name)
