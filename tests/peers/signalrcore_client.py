"""PyPI signalrcore against a hub: ``python signalrcore_client.py URL PROMPT negotiate|skip``.

Streams ``StreamChat(PROMPT)`` and prints one JSON line: the items, whether the
stream completed, and the errors the client reported.
"""

from __future__ import annotations

import json
import sys
import threading

from signalrcore.hub_connection_builder import HubConnectionBuilder


def main() -> None:
    url, prompt, mode = sys.argv[1:4]
    items: list[object] = []
    errors: list[str] = []
    opened, finished = threading.Event(), threading.Event()
    connection = (
        HubConnectionBuilder().with_url(url, options={"skip_negotiation": mode == "skip"}).build()
    )
    connection.on_open(opened.set)
    # signalrcore reports a Completion error on the connection, not on the stream.
    connection.on_error(lambda m: (errors.append(str(getattr(m, "error", m))), finished.set()))
    connection.start()
    ok = opened.wait(10)
    connection.stream("StreamChat", [prompt]).subscribe(
        {
            "next": items.append,
            "complete": lambda *_: finished.set(),
            "error": lambda e: (errors.append(str(e)), finished.set()),
        }
    )
    completed = finished.wait(10) and not errors
    connection.stop()
    print(json.dumps({"opened": ok, "items": items, "completed": completed, "errors": errors}))


if __name__ == "__main__":
    main()
