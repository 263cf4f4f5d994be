"""The received bytes of a length-prefixed framing, shared by every binary decoder.

The binary binding (``tokenwire.binary``, §6.2), Connect envelopes and SignalR
records all read frames out of one growing buffer; this is that buffer.
"""

from __future__ import annotations

__all__ = ["PushBuffer"]


class PushBuffer:
    """The received bytes of a binary framing (Connect envelopes, SignalR records).

    A subclass reads frames from ``_buf[_pos:]`` and moves ``_pos`` past each;
    ``push`` drops what was read before it appends, so the buffer holds one
    incomplete frame at most. ``_offset`` is the byte offset of ``_buf[0]`` in
    the whole body, for error messages.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._offset = 0

    @property
    def pending(self) -> int:
        """Bytes held of a frame that is not complete yet."""
        return len(self._buf) - self._pos

    def push(self, data: bytes) -> None:
        """Append the next bytes of the body."""
        if self._pos:
            del self._buf[: self._pos]
            self._offset += self._pos
            self._pos = 0
        self._buf += data
