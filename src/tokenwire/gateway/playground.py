"""The playground page: a browser client of the standard, served by the gateway.

=================================  ==============================================
``GET /``                          the page (``static/index.html``) under a strict
                                   Content-Security-Policy
``GET /static/{name}``             the page's files: CSS, the ES modules
                                   (``tokenwire.js`` is the committed browser
                                   build of the npm package in ``js/``)
``POST /v1/convert?from=VENDOR``   a captured vendor response body in, the
                                   standard SSE stream out (§7.1); ``from=standard``
                                   re-validates a standard capture and passes it
                                   through unchanged
=================================  ==============================================

§1.2.6 is the use case: one client-side library parses the stream of any
conforming provider. Everything the page loads comes from the gateway itself
(no CDN; the one built file is committed, so serving needs no Node), so the
policy can be ``default-src 'self'`` with no inline script or style; model text
is only ever inserted as DOM text.
``routes()`` is what the gateway app adds to its own routes.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any, Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request as HTTPRequest
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from .. import events as ev
from ..errors import RequestTooLarge
from ..lifecycle import validate
from ..server.asgi import ClientDisconnected, json_error, read_body
from ..translate import VENDORS, translator

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "CONTENT_TYPES",
    "MAX_CAPTURE_BYTES",
    "SECURITY_HEADERS",
    "STANDARD",
    "StaticFolder",
    "routes",
]

#: The page's policy: only the gateway's own files, no inline code, no framing.
#: ``img-src data:`` leaves room for inline images the page builds itself.
CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)

#: Headers on every playground response (the page and its files).
SECURITY_HEADERS: Final[dict[str, str]] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}

#: Served file types. Anything else in the folder is not served. ``.js`` is
#: ``text/javascript`` (RFC 9239), whatever the platform's mimetypes table says.
CONTENT_TYPES: Final[dict[str, str]] = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
}

#: The largest capture ``/v1/convert`` accepts (a recorded response body).
MAX_CAPTURE_BYTES: Final = 8 << 20
#: ``from=`` value for a capture that is already the standard stream.
STANDARD: Final = "standard"

_SSE_HEADERS: Final = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# The vendor translators' own options that the query string may set.
_OPTIONS: Final = ("mapping", "codec")
# How much of the capture one feed() gets: a body arriving in pieces, as it would live.
_FEED_BYTES: Final = 64 * 1024


class StaticFolder:
    """The files of one folder, read once, served with their type and an ETag.

    Only files whose suffix is in ``CONTENT_TYPES`` are served, and only by
    their plain name: a request can never reach outside the folder.
    """

    def __init__(self, folder: Any) -> None:
        self._files: dict[str, tuple[bytes, str, str]] = {}
        for entry in folder.iterdir():
            name = entry.name
            suffix = name[name.rfind(".") :] if "." in name else ""
            if not entry.is_file() or suffix not in CONTENT_TYPES:
                continue
            body = entry.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
            self._files[name] = (body, CONTENT_TYPES[suffix], etag)

    @property
    def names(self) -> list[str]:
        """The served file names, sorted."""
        return sorted(self._files)

    def response(self, name: str, request: HTTPRequest) -> Response:
        """The file ``name`` (304 when the client's ETag matches, 404 when absent)."""
        found = self._files.get(name)
        if found is None:
            return _error(404, "not_found", f"no static file {name!r}")
        body, content_type, etag = found
        headers = {**SECURITY_HEADERS, "ETag": etag, "Cache-Control": "no-cache"}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(body, headers=headers, media_type=content_type)


def _error(status: int, code: str, message: str, path: str | None = None) -> Response:
    # The gateway's error shape: {"error": {"code", "message", "path"}}.
    return Response(
        json_error(code, message, path),
        status_code=status,
        media_type="application/json",
        headers={"X-Content-Type-Options": "nosniff"},
    )


def _content_length(request: HTTPRequest) -> int | None:
    value = request.headers.get("content-length")
    return int(value) if value is not None and value.isdigit() else None


def _known_formats() -> str:
    return ", ".join([STANDARD, *sorted(VENDORS)])


class _Playground:
    """The three routes, sharing the static folder."""

    def __init__(self, max_capture_bytes: int) -> None:
        self.static = StaticFolder(resources.files(__package__) / "static")
        self.max_capture_bytes = max_capture_bytes

    async def page(self, request: HTTPRequest) -> Response:
        """``GET /``: the single-page app."""
        return self.static.response("index.html", request)

    async def static_file(self, request: HTTPRequest) -> Response:
        """``GET /static/{name}``."""
        return self.static.response(request.path_params["name"], request)

    async def convert(self, request: HTTPRequest) -> Response:
        """``POST /v1/convert?from=VENDOR``: a captured body, translated to the standard.

        Answers 400 for a missing or unknown ``from`` (or an option that vendor
        does not take) and 413 over ``max_capture_bytes``. The translated stream
        always passes the lifecycle validator (a truncated or failing capture
        ends in ``error`` + ``stream.end``). For ``from=standard`` the body is
        passed through unchanged; its verdict is in ``X-Tokenwire-Conformant``
        and ``X-Tokenwire-Violations`` (the rule codes).
        """
        query = request.query_params
        source = query.get("from")
        if not source:
            return _error(
                400, "invalid_request", f"from= is required: one of {_known_formats()}", "from"
            )
        if source != STANDARD and source not in VENDORS:
            return _error(
                400,
                "invalid_request",
                f"unknown capture format {source!r}: one of {_known_formats()}",
                "from",
            )
        try:
            body = await read_body(
                request.receive, self.max_capture_bytes, _content_length(request)
            )
        except RequestTooLarge as exc:
            return _error(413, "request_too_large", exc.message, "$")
        except ClientDisconnected:
            return Response(status_code=400)  # nobody is listening any more
        if source == STANDARD:
            # Validating (or translating) 8 MiB takes a while: not on the event loop.
            return await run_in_threadpool(_passthrough, body)
        options: dict[str, Any] = {k: query[k] for k in _OPTIONS if query.get(k)}
        if query.get("reasoning") in ("1", "true"):
            options["reasoning"] = True
        try:
            t = translator(
                source,
                model=query.get("model") or "unknown",
                request_id=query.get("request_id") or None,
                **options,
            )
        except TypeError as exc:  # an option this vendor's translator does not take
            return _error(400, "invalid_request", f"from={source}: {exc}", "from")
        return await run_in_threadpool(_translate, t, body)


def _translate(t: Any, body: bytes) -> Response:
    # Fed in pieces, as the body would arrive live; the translator never raises.
    frames: list[bytes] = []
    for start in range(0, len(body), _FEED_BYTES):
        frames += map(ev.dump, t.feed(body[start : start + _FEED_BYTES]))
    frames += map(ev.dump, t.close())
    return Response(b"".join(frames), media_type="text/event-stream", headers=_SSE_HEADERS)


def _passthrough(body: bytes) -> Response:
    # Passed through byte for byte, so the page's own decoder and verdict see
    # exactly what was captured; the server's verdict rides in the headers.
    report = validate(body)
    rules = ",".join(dict.fromkeys(v.rule for v in report.violations))
    headers = {
        **_SSE_HEADERS,
        "X-Tokenwire-Conformant": "true" if report.ok else "false",
        "X-Tokenwire-Violations": rules,
    }
    return Response(body, media_type="text/event-stream", headers=headers)


def routes(*, max_capture_bytes: int = MAX_CAPTURE_BYTES) -> list[BaseRoute]:
    """The playground's routes, for the gateway app's route list.

    ``GET /``, ``GET /static/{name}`` and ``POST /v1/convert``. Reads the
    static folder once, here. ``max_capture_bytes`` bounds a ``/v1/convert`` body.
    """
    app = _Playground(max_capture_bytes)
    return [
        Route("/", app.page, methods=["GET"]),
        Route("/static/{name}", app.static_file, methods=["GET"]),
        Route("/v1/convert", app.convert, methods=["POST"]),
    ]
