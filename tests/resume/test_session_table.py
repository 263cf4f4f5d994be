"""The session's state machine: every ``(state, input)`` pair, and what the table promises.

The table is the rule; these tests drive every pair through ``Session.fire``
(a pair not in the table must raise and leave the state alone) and check the
properties the manager and the server rely on.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwire.gateway.resume import Session, SessionStateError, State, StreamInfo
from tokenwire.gateway.resume.session import (
    GENERATING,
    RECORDING,
    TERMINAL,
    TRANSITIONS,
    Input,
)

PAIRS = list(itertools.product(State, Input))


class _Registry:
    max_pending = 100
    replay_tail = 0
    clock: Callable[[], float] = staticmethod(lambda: 0.0)

    def mark_dirty(self, session: Session) -> None:
        pass

    def lose(self, session: Session) -> None:
        pass

    def forget_if_done(self, session: Session) -> None:
        pass


def _session(state: State) -> Session:
    session = Session(_Registry(), "r", StreamInfo("m", 0, "me"))
    session.state = state
    return session


@pytest.mark.parametrize(("state", "event"), PAIRS, ids=lambda x: x.value)
def test_every_pair(state: State, event: Input) -> None:
    session = _session(state)
    if (state, event) in TRANSITIONS:
        assert session.fire(event) is TRANSITIONS[state, event]
        assert session.state is TRANSITIONS[state, event]
    else:
        with pytest.raises(SessionStateError, match=f"{event.value} in state {state.value}"):
            session.fire(event)
        assert session.state is state


def test_outside_events_are_accepted_in_every_state() -> None:
    # A hang-up, a DELETE and a store failure can come at any time.
    for state, event in itertools.product(State, (Input.DETACH, Input.CANCEL, Input.LOSE)):
        assert (state, event) in TRANSITIONS, (state, event)


def test_no_way_back() -> None:
    for (state, _event), after in TRANSITIONS.items():
        if state not in GENERATING:
            assert after not in GENERATING, "a finished generation cannot run again"
        if state not in RECORDING:
            assert after not in RECORDING, "a record given up cannot be taken up again"
        if state in TERMINAL:
            assert after is state, "a terminal state is final"


def test_only_a_closed_stream_ends_and_only_a_commit_makes_it_whole() -> None:
    into_ending = {(s, e) for (s, e), after in TRANSITIONS.items() if after is State.ENDING}
    assert {e for _s, e in into_ending} <= {Input.TAKE_END, Input.DETACH, Input.CANCEL}
    assert (State.CLOSED, Input.TAKE_END) in into_ending
    into_done = {(s, e) for (s, e), after in TRANSITIONS.items() if after is State.DONE}
    assert into_done - {(State.DONE, e) for e in Input} == {(State.ENDING, Input.COMMITTED)}


def test_every_state_can_finish() -> None:
    reach = {s: {s} for s in State}
    changed = True
    while changed:
        changed = False
        for (state, _event), after in TRANSITIONS.items():
            if not reach[after] <= reach[state]:
                reach[state] |= reach[after]
                changed = True
    for state in State:
        assert reach[state] & TERMINAL, f"{state} never ends"


@given(st.lists(st.sampled_from(list(Input)), max_size=40))
def test_any_sequence_keeps_the_state_in_the_table(events: list[Input]) -> None:
    session = _session(State.ATTACHED)
    seen_terminal = False
    for event in events:
        before = session.state
        try:
            session.fire(event)
        except SessionStateError:
            assert (before, event) not in TRANSITIONS and session.state is before
            continue
        if seen_terminal:
            assert session.state is before
        seen_terminal = seen_terminal or session.state in TERMINAL
