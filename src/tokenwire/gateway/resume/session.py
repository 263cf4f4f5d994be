"""One resumable stream's session: its recording and the generation its manager owns.

The session is a state machine in the h2 style: its ``State``, the ``Input``
events that move it, and one table, ``TRANSITIONS``, of ``(state, input) ->
next state``. Any pair not in the table is a bug and raises
``SessionStateError``. The methods (``detach``, ``cancel``, ``close``, ``take``,
``committed``, ``lose``) feed the machine and do the I/O-free side effects;
the manager does the I/O.

Where the states lead (``lose`` goes from any recording state to its ``LOST_*``
twin, which ends ``DISCARDED``)::

    ATTACHED --detach--> DETACHED --cancel--> CANCELLING
        |                  |                      |
        +------ close -----+------- close --------+--> CLOSED --take_end--> ENDING
                                                                --committed--> DONE
"""

from __future__ import annotations

import asyncio
import collections
import enum
import math
from collections.abc import Callable
from typing import Final, Protocol

from ... import events as ev
from ...errors import TokenwireError
from ...server import CLEANUP_S
from .access import TOKEN_HEADER
from .store import Append, Entry, StreamInfo, closing_entries, end_status

__all__ = ["TRANSITIONS", "Input", "Session", "SessionStateError", "State"]


class State(enum.Enum):
    """Where a resumable stream is; ``LOST_*``: its record was given up."""

    #: Generating; the request that made it is still reading it.
    ATTACHED = "attached"
    #: Generating; its request is gone, so the grace period runs (docs/scaling.md).
    DETACHED = "detached"
    #: Generating; cancelled (DELETE, grace over, shutdown), its task winding down.
    CANCELLING = "cancelling"
    #: The generation is over and every event recorded; the end is not yet in a commit.
    CLOSED = "closed"
    #: The end is in a commit on its way to the store.
    ENDING = "ending"
    #: The end is committed: the stored stream is whole. Terminal.
    DONE = "done"
    #: Not recorded any more (the store refused, lost it, or fell behind), still generating.
    LOST_ATTACHED = "lost_attached"
    LOST_DETACHED = "lost_detached"
    LOST_CANCELLING = "lost_cancelling"
    #: Not recorded, and the generation is over. Terminal.
    DISCARDED = "discarded"


class Input(enum.Enum):
    """What happens to a session."""

    DETACH = "detach"  # the request that made it hung up
    CANCEL = "cancel"  # stop the generation
    CLOSE = "close"  # the generation is over, its last event recorded
    TAKE_END = "take_end"  # the flusher puts the end in a commit
    COMMITTED = "committed"  # that commit succeeded
    LOSE = "lose"  # the record cannot be complete any more
    RETRY = "retry"  # the commit with the end did not reach the store: again


_S, _I = State, Input

#: ``(state, input) -> next state``. A pair that is not here raises ``SessionStateError``.
TRANSITIONS: Final[dict[tuple[State, Input], State]] = {
    (_S.ATTACHED, _I.DETACH): _S.DETACHED,
    (_S.ATTACHED, _I.CANCEL): _S.CANCELLING,
    (_S.ATTACHED, _I.CLOSE): _S.CLOSED,
    (_S.ATTACHED, _I.LOSE): _S.LOST_ATTACHED,
    (_S.DETACHED, _I.DETACH): _S.DETACHED,
    (_S.DETACHED, _I.CANCEL): _S.CANCELLING,
    (_S.DETACHED, _I.CLOSE): _S.CLOSED,
    (_S.DETACHED, _I.LOSE): _S.LOST_DETACHED,
    (_S.CANCELLING, _I.DETACH): _S.CANCELLING,
    (_S.CANCELLING, _I.CANCEL): _S.CANCELLING,
    (_S.CANCELLING, _I.CLOSE): _S.CLOSED,
    (_S.CANCELLING, _I.LOSE): _S.LOST_CANCELLING,
    (_S.CLOSED, _I.DETACH): _S.CLOSED,
    (_S.CLOSED, _I.CANCEL): _S.CLOSED,
    (_S.CLOSED, _I.TAKE_END): _S.ENDING,
    (_S.CLOSED, _I.LOSE): _S.DISCARDED,
    (_S.ENDING, _I.DETACH): _S.ENDING,
    (_S.ENDING, _I.CANCEL): _S.ENDING,
    (_S.ENDING, _I.COMMITTED): _S.DONE,
    (_S.ENDING, _I.RETRY): _S.CLOSED,
    (_S.ENDING, _I.LOSE): _S.DISCARDED,
    (_S.DONE, _I.DETACH): _S.DONE,
    (_S.DONE, _I.CANCEL): _S.DONE,
    # A heartbeat that raced the end's commit: the stored stream is whole, keep it.
    (_S.DONE, _I.LOSE): _S.DONE,
    (_S.LOST_ATTACHED, _I.DETACH): _S.LOST_DETACHED,
    (_S.LOST_ATTACHED, _I.CANCEL): _S.LOST_CANCELLING,
    (_S.LOST_ATTACHED, _I.CLOSE): _S.DISCARDED,
    (_S.LOST_ATTACHED, _I.LOSE): _S.LOST_ATTACHED,
    (_S.LOST_DETACHED, _I.DETACH): _S.LOST_DETACHED,
    (_S.LOST_DETACHED, _I.CANCEL): _S.LOST_CANCELLING,
    (_S.LOST_DETACHED, _I.CLOSE): _S.DISCARDED,
    (_S.LOST_DETACHED, _I.LOSE): _S.LOST_DETACHED,
    (_S.LOST_CANCELLING, _I.DETACH): _S.LOST_CANCELLING,
    (_S.LOST_CANCELLING, _I.CANCEL): _S.LOST_CANCELLING,
    (_S.LOST_CANCELLING, _I.CLOSE): _S.DISCARDED,
    (_S.LOST_CANCELLING, _I.LOSE): _S.LOST_CANCELLING,
    (_S.DISCARDED, _I.DETACH): _S.DISCARDED,
    (_S.DISCARDED, _I.CANCEL): _S.DISCARDED,
    (_S.DISCARDED, _I.LOSE): _S.DISCARDED,
    # The end's commit came back after the record was given up: it stays given up.
    (_S.DISCARDED, _I.COMMITTED): _S.DISCARDED,
    (_S.DISCARDED, _I.RETRY): _S.DISCARDED,
}

#: The generation still runs.
GENERATING: Final = frozenset(
    {
        _S.ATTACHED,
        _S.DETACHED,
        _S.CANCELLING,
        _S.LOST_ATTACHED,
        _S.LOST_DETACHED,
        _S.LOST_CANCELLING,
    }
)
#: Its events still go to the store.
RECORDING: Final = frozenset({_S.ATTACHED, _S.DETACHED, _S.CANCELLING, _S.CLOSED, _S.ENDING})
#: Nobody reads it: the grace period runs.
UNREAD: Final = frozenset({_S.DETACHED, _S.LOST_DETACHED})
#: Cancelling is still possible (nobody asked yet).
CANCELLABLE: Final = frozenset({_S.ATTACHED, _S.DETACHED, _S.LOST_ATTACHED, _S.LOST_DETACHED})
#: Over: the manager forgets it.
TERMINAL: Final = frozenset({_S.DONE, _S.DISCARDED})


class SessionStateError(TokenwireError):
    """An input that the session's state does not accept (a bug in the caller)."""


class Registry(Protocol):
    """The manager's side of a session."""

    max_pending: int
    #: How many committed entries a session keeps for ``Append.replay`` (0: none).
    replay_tail: int
    clock: Callable[[], float]

    def mark_dirty(self, session: Session) -> None: ...

    def lose(self, session: Session) -> None: ...

    def forget_if_done(self, session: Session) -> None: ...


class Session:
    """A resumable stream's recording and the generation task the manager owns.

    Implements ``tokenwire.server.ResumeSession``. ``headers`` go on the POST
    answer: the resume token (the store has only its digest).
    """

    def __init__(
        self, manager: Registry, request_id: str, info: StreamInfo, token: str = ""
    ) -> None:
        self.manager = manager
        self.request_id = request_id
        self.info = info
        self.headers: list[tuple[bytes, bytes]] = [(TOKEN_HEADER, token.encode())] if token else []
        self.state = State.ATTACHED
        self.pending: list[Entry] = []
        self.last: Entry | None = None
        self.error_code: str | None = None
        self.appends = 0  # appends handed to the store so far (the first one creates it)
        #: The last entries handed to the store (``Append.replay``), when the store can lose some.
        self.tail: collections.deque[Entry] | None = (
            collections.deque(maxlen=manager.replay_tail) if manager.replay_tail else None
        )
        self.retry = False  # the next append repeats one that may or may not have landed
        self.task: asyncio.Task[None] | None = None
        self.last_reader = math.inf  # while attached, the original client is the reader
        self.next_reader_check = 0.0
        self._cancel: tuple[str, str] | None = None
        self._escalation: asyncio.TimerHandle | None = None

    def fire(self, event: Input) -> State:
        """Move the machine; raises ``SessionStateError`` for a pair not in the table."""
        try:
            self.state = TRANSITIONS[self.state, event]
        except KeyError:
            raise SessionStateError(
                f"resumable stream {self.request_id!r}: {event.value} in state {self.state.value}"
            ) from None
        return self.state

    @property
    def recording(self) -> bool:
        return self.state in RECORDING

    # -- server.ResumeSession --------------------------------------------------------

    def record(self, events: list[ev.Event], frames: list[bytes]) -> None:
        if self.state not in RECORDING:
            return
        for event, frame in zip(events, frames, strict=True):
            seq = event.seq if event.seq is not None else (self.last.seq + 1 if self.last else 0)
            entry = Entry(seq, event.type, frame)
            self.pending.append(entry)
            self.last = entry
            if isinstance(event, ev.ErrorEvent) and self.error_code is None:
                self.error_code = event.code
        if len(self.pending) > self.manager.max_pending:
            # The store is not keeping up (or hangs): stop recording rather than
            # hold the whole stream in memory.
            self.manager.lose(self)
            return
        self.manager.mark_dirty(self)

    def run(self, task: asyncio.Task[None]) -> None:
        self.task = task
        task.add_done_callback(self._task_done)

    def detach(self) -> None:
        before = self.state
        if self.fire(Input.DETACH) is not before:
            self.last_reader = self.manager.clock()  # the grace period starts

    def cancel_reason(self) -> tuple[str, str] | None:
        return self._cancel

    def close(self) -> None:
        self.fire(Input.CLOSE)
        if self._escalation is not None:
            self._escalation.cancel()
            self._escalation = None
        self.manager.mark_dirty(self)
        self.manager.forget_if_done(self)

    # -- the manager's side -----------------------------------------------------------

    def cancel(self, code: str, message: str) -> bool:
        """Stop the generation; the stream ends with ``error`` ``code``.
        True while the generation still runs (now cancelling), False if it is over."""
        task = self.task
        if task is None or task.done():
            return False
        if self.state in CANCELLABLE:
            self._cancel = (code, message)
            task.cancel()
            # A provider gets CLEANUP_S to clean up, as in server/stream.py; then it is
            # cancelled again.
            loop = asyncio.get_running_loop()
            self._escalation = loop.call_later(CLEANUP_S, task.cancel)
        return self.fire(Input.CANCEL) in GENERATING

    def lose(self) -> bool:
        """Give up the record. True if it was being recorded until now."""
        was = self.state in RECORDING
        self.fire(Input.LOSE)
        if was and self.state not in RECORDING:
            self.pending = []
            return True
        return False

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if self.state in GENERATING:
            # Cancelled before it ran: nothing ended the stream, so end it here.
            code, message = self._cancel or ("internal_error", "internal error")
            closing = closing_entries(self.request_id, self.info, self.last, code, message)
            if closing and self.state in RECORDING:
                self.error_code = self.error_code or code
                self.pending += closing
                self.last = closing[-1]
            self.close()
        self.manager.forget_if_done(self)

    def take(self) -> Append | None:
        """What the next commit should write for this stream, or ``None``."""
        if self.state not in RECORDING:
            return None
        ending = self.state is State.CLOSED
        if not self.pending and not ending:
            return None
        entries, self.pending = self.pending, []
        end = None
        if ending:
            self.fire(Input.TAKE_END)
            end = end_status(self.error_code)
        first = self.appends == 0
        self.appends += 1
        tail = self.tail
        replay: collections.deque[Entry] | tuple[()] = ()
        if tail is not None:
            replay = tail
            top = tail[-1].seq if tail else -1
            tail.extend(e for e in entries if e.seq > top)
        retry, self.retry = self.retry, False
        return Append(self.request_id, entries, end, first, retry, replay)

    def requeue(self, append: Append) -> None:
        """``append`` did not reach the store (unreachable): its entries go back in front
        of what came since, for the next commit, which skips what did land."""
        if self.state not in RECORDING:
            return
        self.pending = append.entries + self.pending
        self.retry = True
        if append.first:
            self.appends -= 1  # the next one still creates the stream
        if append.end is not None:
            self.fire(Input.RETRY)
        if len(self.pending) > self.manager.max_pending:
            self.manager.lose(self)  # an outage longer than the session may hold

    def committed(self) -> None:
        """The commit with this stream's end succeeded."""
        self.fire(Input.COMMITTED)
