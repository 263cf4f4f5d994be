"""tokenwire's own HTTP/1.1 server (``[server] engine = "h1"``).

``H1Server`` is in ``server.py``, one connection in ``protocol.py``.
"""

from .server import H1Server
from .settings import MAX_CHUNK_LINE, MAX_HEAD, MAX_HEADERS, WRITE_HIGH_WATER, Settings

__all__ = [
    "MAX_CHUNK_LINE",
    "MAX_HEAD",
    "MAX_HEADERS",
    "WRITE_HIGH_WATER",
    "H1Server",
    "Settings",
]
