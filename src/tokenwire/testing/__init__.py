"""Test helpers shipped for users' own tests too: faithful fake vendor upstreams
on 127.0.0.1 with fault injection (``tokenwire.testing.upstream``), each vendor's
wire rendering in its own module, the process launcher (``processes``) and
waiting on a condition instead of a fixed sleep (``wait_until``,
``async_wait_until``).
"""

from .waiting import WaitTimeout, async_wait_until, eventually, wait_for_file, wait_until

__all__ = ["WaitTimeout", "async_wait_until", "eventually", "wait_for_file", "wait_until"]
