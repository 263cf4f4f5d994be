"""What counts as a credential (§8.1: keys never reach a log, a report or a file).

One list for every place that redacts or refuses one: a translator's request
(``VendorRequest.redacted``), a conformance report or saved exchange, and the
gateway config (no literal credential header). Names are compared lower-cased.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SECRET_HEADERS", "SECRET_PARAMS"]

#: Header names whose values are credentials (``set-cookie`` comes back in responses).
SECRET_HEADERS: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-auth-token",
    }
)

#: Query-string parameters whose values are credentials (Gemini's ``key=``, signed URLs).
SECRET_PARAMS: Final = frozenset(
    {"key", "api_key", "apikey", "access_token", "token", "sig", "signature"}
)
