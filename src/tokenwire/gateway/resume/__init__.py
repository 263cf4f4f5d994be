"""Resumable streams (docs/scaling.md): the stores, the sessions, the manager and the
``/v1/streams/{request_id}`` route.

=====================  ==========================================================
``store``              the ``Store`` protocol, its values and errors
``memory``             ``MemoryStore``: one process (the default)
``redis``              ``RedisStore``: Redis Streams, any number of replicas
``redis_scripts``      its Lua scripts, reply parsing and health
``redis_follow``       its multiplexed follow (one ``XREAD BLOCK`` per replica)
``access``             resume tokens and credential binding (who may resume)
``session``            one stream's state machine (``State`` x ``Input`` table)
``manager``            ``ResumeManager``: which streams are resumable, the flusher,
                       grace periods, leases; ``build_manager`` from ``[resume]``
``endpoint``           ``ResumeEndpoint``: ``GET`` resumes, ``DELETE`` cancels
=====================  ==========================================================

May import: the core, ``tokenwire.server`` (with its ``asgi`` and ``outbox``), and of the
gateway ``config``, ``context``, ``telemetry`` and ``upstream``; never ``policy``,
``providers`` or the app.
"""

from __future__ import annotations

from .access import TOKEN_HEADER
from .endpoint import NOT_FOUND, ResumeEndpoint, parse_after
from .manager import ResumeManager, build_manager
from .memory import MemoryStore
from .redis import RedisStore
from .session import Session, SessionStateError, State
from .store import (
    CANCEL_MESSAGE,
    ENTRY_OVERHEAD,
    EXTENSION,
    GRACE_MESSAGE,
    LOST_MESSAGE,
    ORPHAN_MESSAGE,
    SHUTDOWN_MESSAGE,
    Append,
    Created,
    Entry,
    EventsTrimmed,
    ResumeStoreError,
    Store,
    StoreReader,
    StoreRefused,
    StoreUnavailable,
    StreamInfo,
    StreamNotFound,
    StreamState,
    closing_entries,
)

__all__ = [
    "CANCEL_MESSAGE",
    "ENTRY_OVERHEAD",
    "EXTENSION",
    "GRACE_MESSAGE",
    "LOST_MESSAGE",
    "NOT_FOUND",
    "ORPHAN_MESSAGE",
    "SHUTDOWN_MESSAGE",
    "TOKEN_HEADER",
    "Append",
    "Created",
    "Entry",
    "EventsTrimmed",
    "MemoryStore",
    "RedisStore",
    "ResumeEndpoint",
    "ResumeManager",
    "ResumeStoreError",
    "Session",
    "SessionStateError",
    "State",
    "Store",
    "StoreReader",
    "StoreRefused",
    "StoreUnavailable",
    "StreamInfo",
    "StreamNotFound",
    "StreamState",
    "build_manager",
    "closing_entries",
    "parse_after",
]
