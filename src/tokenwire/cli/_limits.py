"""How many connections ``tokenwire serve`` holds open at once, per worker.

granian serves at most ``backpressure`` requests at once per worker and, when
it is not given, takes ``backlog // workers`` (1,024 for one worker): the
1,025th stream waits in the kernel's accept queue until another one ends, so a
worker would never hold more than 1,024 slow streams however little each
costs. Every open stream is one socket (two through an upstream provider), so
the real bound is the process's open-file limit: raise its soft limit to the
hard one (as nginx's ``worker_rlimit_nofile`` does) and let granian take as
many requests as that leaves room for. Memory stays bounded by the request
guard's budgets (``server.guard``), which answer ``503 overloaded`` past them.
"""

from __future__ import annotations

import resource
from typing import Final

__all__ = ["FD_RESERVE", "concurrent_requests", "raise_open_files"]

#: Open files kept free for everything but client sockets (listeners, logs,
#: imports, upstream connections of the first streams).
FD_RESERVE: Final = 256
#: granian's own default (its ``backlog``): never serve fewer at once than this.
MIN_CONCURRENT: Final = 1024


def raise_open_files() -> int:
    """Raise the open-file soft limit to the hard limit; return the soft limit now.

    Forked workers inherit it. A limit that cannot be raised is left as it is.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def concurrent_requests(open_files: int) -> int:
    """granian's ``backpressure`` for a worker with ``open_files`` file descriptors."""
    return max(MIN_CONCURRENT, open_files - FD_RESERVE)
