"""`tokenwire serve`: granian's per-worker request cap follows the open-file limit."""

from __future__ import annotations

import resource

from tokenwire.cli._limits import FD_RESERVE, MIN_CONCURRENT, concurrent_requests, raise_open_files


def test_the_cap_is_the_open_files_minus_a_reserve_never_below_granians_default() -> None:
    assert concurrent_requests(20_000) == 20_000 - FD_RESERVE
    assert concurrent_requests(1_024) == MIN_CONCURRENT  # a low limit keeps granian's default


def test_the_soft_limit_is_raised_to_the_hard_limit() -> None:
    soft = raise_open_files()
    now, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == now
    if hard != resource.RLIM_INFINITY:
        assert now == hard
