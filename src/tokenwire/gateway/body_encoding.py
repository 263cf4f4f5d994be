"""Request bodies sent compressed (``Content-Encoding``), decoded before any route reads them.

Agents and SDKs may compress what they send: ``gzip`` and ``deflate`` (RFC 9110
8.4.1) and ``zstd`` (RFC 8878). ``BodyDecoding`` wraps the gateway's ASGI app:
a request with such a body is read whole (at most ``max_body_bytes`` as sent),
decoded to at most ``max_body_bytes`` (so a small body that inflates to
gigabytes, a decompression bomb, is stopped at the limit, never buffered), and
handed on with the decoded body, its ``content-length`` and no
``content-encoding``; every route then sees a plain body. What cannot be
decoded is answered in the route's vendor error shape:

- over the limit once decoded: ``413`` naming the limit;
- not valid in its encoding: ``400`` naming the encoding;
- an encoding the gateway does not decode: ``415`` with ``Accept-Encoding``
  listing what it does (RFC 7694).

zstd comes from the standard library's ``compression.zstd`` (Python 3.14+) or
the ``zstandard`` package (the ``server`` extra); without either, a zstd body
gets the ``415``, which says what to install.

This is the serving layer's job; it lives on the gateway side until that layer
has a place for request middleware.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, MutableMapping
from typing import Any, Final, Protocol

from ..errors import RequestTooLarge, TokenwireError
from ..server.asgi import (
    HTTP_ERROR_CODES,
    ClientDisconnected,
    Receive,
    Scope,
    Send,
    json_error,
    read_body,
    send_json,
)

#: ``(path, status, code, message)`` -> the error body in the route's vendor shape,
#: or ``None`` for the standard's (``translate.error_body_for``).
VendorError = Callable[[str, int, str, str], bytes | None]

__all__ = [
    "BodyDecoding",
    "BodyDecodeError",
    "decode_body",
    "has_content_encoding",
    "supported_encodings",
]

#: How much decoded output is read at a time.
_STEP: Final = 64 * 1024


class BodyDecodeError(TokenwireError):
    """A request body could not be decoded: ``status`` and the message to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Reader(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...


class _DeflateReader:
    """zlib's streaming decoder behind ``read(size)``: output bounded per call."""

    def __init__(self, body: bytes, wbits: int) -> None:
        self._decoder = zlib.decompressobj(wbits)
        self._input = body

    def read(self, size: int = _STEP) -> bytes:
        decoder = self._decoder
        if decoder.eof:
            return b""
        out = decoder.decompress(self._input, size)
        self._input = decoder.unconsumed_tail
        if not out and not self._input and not decoder.eof:
            raise ValueError("the data ends before the end of its stream")
        return out


def _zstd_opener() -> Callable[[bytes], _Reader] | None:
    """Opens a zstd body for bounded reading, or ``None`` when no zstd module is installed."""
    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]

        return lambda body: zstd.ZstdFile(io.BytesIO(body))
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None

    def open_zstandard(body: bytes) -> _Reader:
        # read_across_frames: a body of several frames is one body, as in the RFC.
        reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(body), read_across_frames=True
        )
        return reader  # type: ignore[no-any-return, unused-ignore]

    return open_zstandard


def supported_encodings() -> dict[str, Callable[[bytes], _Reader]]:
    """Content coding -> how to open a body in it for reading, for what this install decodes."""
    codings: dict[str, Callable[[bytes], _Reader]] = {
        "gzip": lambda body: gzip.GzipFile(fileobj=io.BytesIO(body)),
        "x-gzip": lambda body: gzip.GzipFile(fileobj=io.BytesIO(body)),
        "deflate": lambda body: _DeflateReader(body, zlib.MAX_WBITS),
    }
    zstd = _zstd_opener()
    if zstd is not None:
        codings["zstd"] = zstd
    return codings


def decode_body(
    body: bytes, codings: list[str], limit: int, openers: dict[str, Callable[[bytes], _Reader]]
) -> bytes:
    """``body`` with ``codings`` undone (last applied, first undone), at most ``limit`` bytes.

    Raises ``BodyDecodeError``: 413 when the result would exceed ``limit``, 400
    when the data is not valid in its coding.
    """
    for coding in reversed(codings):
        body = _decode_one(openers[coding](body), coding, limit)
    return body


def _decode_one(reader: _Reader, coding: str, limit: int) -> bytes:
    out = bytearray()
    try:
        while chunk := reader.read(_STEP):
            out += chunk
            if len(out) > limit:
                raise BodyDecodeError(
                    413,
                    f"the request body, decoded from {coding}, is larger than the "
                    f"limit of {limit} bytes (server.max_body_bytes): send less",
                )
    except BodyDecodeError:
        raise
    except Exception as exc:  # zlib.error, gzip.BadGzipFile, EOFError, ZstdError...
        raise BodyDecodeError(
            400, f"the request body is not valid {coding} (Content-Encoding): {exc}"
        ) from None
    return bytes(out)


def has_content_encoding(scope: Scope) -> bool:
    """Whether the request says its body has a ``Content-Encoding``."""
    # Every request passes here: ASGI header names are lower-case, so one comparison each.
    for name, _ in scope.get("headers") or ():
        if name == b"content-encoding":
            return True
    return False


def _codings(scope: Scope) -> list[str]:
    codings: list[str] = []
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-encoding":
            for item in value.decode("latin-1").split(","):
                coding = item.strip().lower()
                if coding and coding != "identity":
                    codings.append(coding)
    return codings


class BodyDecoding:
    """ASGI middleware: decodes compressed request bodies (see the module docstring)."""

    def __init__(
        self, app: Any, *, max_body_bytes: int, vendor_error: VendorError | None = None
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.vendor_error = vendor_error
        self.openers = supported_encodings()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        codings = _codings(scope)
        if not codings:
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        unknown = [c for c in codings if c not in self.openers]
        if unknown:
            known = ", ".join(sorted(self.openers))
            hint = " (zstd needs the zstandard package: pip install zstandard)" * (
                "zstd" in unknown
            )
            message = (
                f"Content-Encoding {unknown[0]!r} is not supported{hint}: send the body "
                f"uncompressed or as one of {known}"
            )
            await self._error(send, path, 415, message, [(b"accept-encoding", known.encode())])
            return
        try:
            raw = await read_body(receive, self.max_body_bytes)
            body = decode_body(raw, codings, self.max_body_bytes, self.openers)
        except BodyDecodeError as exc:
            await self._error(send, path, exc.status, exc.message)
            return
        except RequestTooLarge:
            message = (
                f"the request body, as sent, is larger than the limit of {self.max_body_bytes} "
                "bytes (server.max_body_bytes): send less"
            )
            await self._error(send, path, 413, message)
            return
        except ClientDisconnected:
            await self._error(send, path, 400, "the request body ended early")
            return
        headers = [
            (name, value)
            for name, value in scope.get("headers") or ()
            if name.lower() not in (b"content-encoding", b"content-length")
        ]
        headers.append((b"content-length", str(len(body)).encode()))
        delivered = False

        async def decoded_receive() -> MutableMapping[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app({**scope, "headers": headers}, decoded_receive, send)

    async def _error(
        self,
        send: Send,
        path: str,
        status: int,
        message: str,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        code = HTTP_ERROR_CODES.get(status, "invalid_request")
        shaped = self.vendor_error(path, status, code, message) if self.vendor_error else None
        body = shaped or json_error(code, message)
        await send_json(send, status, body, headers or [])
