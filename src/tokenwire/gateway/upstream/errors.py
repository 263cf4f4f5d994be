"""The one error the HTTP/1.1 upstream transport raises."""

from __future__ import annotations

from typing import Literal

from ...errors import TokenwireError

__all__ = ["Phase", "UpstreamError"]

#: Where a request failed: connecting, waiting for a pooled connection, or reading.
Phase = Literal["connect", "pool", "read", "write"]


class UpstreamError(TokenwireError):
    """The upstream connection failed, timed out, or sent a malformed response.

    ``timeout`` tells a timeout (``phase`` names which) from a failure;
    ``reason`` is a short text naming what went wrong, never the upstream's
    address (``"ConnectError: connection refused"``,
    ``"RemoteProtocolError: chunk-size line over 4096 bytes"``).
    """

    def __init__(self, reason: str, *, timeout: bool = False, phase: Phase = "read") -> None:
        super().__init__(reason)
        self.reason = reason
        self.timeout = timeout
        self.phase: Phase = phase

    @classmethod
    def timed_out(cls, phase: Phase) -> UpstreamError:
        """A timeout in ``phase``."""
        return cls(f"{phase} timeout", timeout=True, phase=phase)

    @classmethod
    def malformed(cls, what: str) -> UpstreamError:
        """The upstream's response broke HTTP/1.1: ``what`` says how."""
        return cls(f"RemoteProtocolError: {what}")
