"""A stalled stream's backlog is a few buffers, not one object per frame.

Thousands of small frames per stalled client, each its own object, fill the
allocator's arenas; after the clients leave, a few long-lived objects among
them keep that memory from coming back (bench/RESULTS.md, "storm"). What the
client gets is unchanged: the same bytes, in order, as ``bytes``.
"""

from __future__ import annotations

from tokenwire.server.outbox import COALESCE, SEND_SLICE, Outbox


def test_a_backlog_of_small_frames_is_held_in_few_buffers_and_sent_unchanged() -> None:
    outbox = Outbox(0.0)
    frames = [b'event: content.delta\ndata: {"n":%d}\n\n' % i for i in range(5000)]
    for frame in frames:
        outbox.push(frame)
    total = sum(map(len, frames))
    assert outbox.size == total
    assert len(outbox.chunks) <= total // COALESCE + 2
    sent = []
    while outbox.chunks:
        data = outbox.take()
        assert type(data) is bytes
        assert len(data) <= SEND_SLICE + COALESCE + len(frames[-1])  # still sliced
        sent.append(data)
    assert b"".join(sent) == b"".join(frames)


def test_a_frame_the_sender_takes_at_once_is_not_copied() -> None:
    outbox = Outbox(0.0)
    frame = b"data: x\n\n"
    outbox.push(frame)
    assert outbox.take() is frame
