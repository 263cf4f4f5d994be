"""A draining gateway (SIGTERM) lets a socket's response in flight finish, then tells the
client and closes the socket with 1001 (going away), so that the client reconnects."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from tests.production.conftest import start, table
from tests.responses_ws.helpers import client, until_done
from websockets.exceptions import ConnectionClosed

from tokenwire.testing import wait_until
from tokenwire.testing.processes import words
from tokenwire.testing.upstream import FakeUpstream, Script


def test_a_draining_gateway_closes_its_sockets_after_their_responses(tmp_path: Path) -> None:
    streamed = Script(text=words(20), delay_s=0.05)
    with FakeUpstream("openai", streamed) as fake:
        model = {"name": "chat", "provider": "openai", "base_url": fake.url + "/v1"}
        config = table("server", {"drain_s": 20.0}) + "\n" + table("models", model, array=True)
        gateway = start(tmp_path, config)
        try:
            with client(gateway.url).responses.connect() as conn:
                conn.response.create(model="chat", input="hi")
                assert conn.recv().type == "response.created"
                assert gateway.proc is not None
                gateway.proc.send_signal(signal.SIGTERM)
                # The response in flight finishes whole...
                assert [e.type for e in until_done(conn)][-1] == "response.completed"
                # ...then the socket says why it closes, and closes with 1001.
                told = conn.recv()
                assert (told.type, told.status, told.error.code) == ("error", 503, "draining")
                with pytest.raises(ConnectionClosed) as closed:
                    conn.recv()
                # 1001 when the close frame gets out before the server stops (on
                # granian's one-process stop the connection may go without it).
                rcvd = closed.value.rcvd
                assert rcvd is None or rcvd.code == 1001
            proc = gateway.proc
            wait_until(lambda: proc.poll() is not None, what="the gateway's exit")
        finally:
            gateway.stop()
