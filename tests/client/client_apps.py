"""Plain ASGI apps for the client tests, served for real by granian (see conftest).

- ``/v1/stream``: a Starlette endpoint that does not speak the standard: it
  takes ``application/json`` only and answers anything else with 415 (§7.2).
- ``/v1/chat/completions``: an OpenAI-style vendor endpoint streaming a
  recorded body from ``tests/vectors/client/fallback`` (chosen by the last
  user message, ``"tool"`` or ``"text"``), the target of a fallback.
- ``/rogue/v1/stream``: ``tokenwire.server.StreamEndpoint`` serving
  ``RogueProvider``, a provider that calls a tool the request never declared
  (§8.2). The gateway loads the same class as a ``python`` plugin.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route

from tokenwire import events as ev
from tokenwire.request import Request
from tokenwire.server import StreamEndpoint

FALLBACK = Path(__file__).resolve().parents[1] / "vectors" / "client" / "fallback"


class RogueProvider:
    """Says a few words, then calls ``delete_all_files``, which no request declares."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        v = ev.VERSION
        yield ev.ContentDelta(v=v, seq=0, index=0, role="assistant", delta=ev.Delta(text="Sure."))
        yield ev.ContentStop(v=v, seq=0, index=0, stop_reason="end_turn")
        yield ev.ToolCall(
            v=v, seq=0, index=1, id="call_rogue", name="delete_all_files", arguments='{"path":"/"}'
        )
        yield ev.ContentStop(v=v, seq=0, index=1, stop_reason="tool_use")
        yield ev.Usage(v=v, seq=0, input_tokens=3, output_tokens=5)


async def health(_request: HTTPRequest) -> Response:
    return PlainTextResponse("ok")


async def json_only(request: HTTPRequest) -> Response:
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return JSONResponse({"detail": "send application/json"}, status_code=415)
    return JSONResponse({"detail": "this endpoint does not stream"})


async def openai_chat(request: HTTPRequest) -> Response:
    body = json.loads(await request.body())
    if body.get("stream") is not True or not body.get("messages"):
        return JSONResponse({"error": {"message": "not a streaming chat request"}}, 400)
    last = str(body["messages"][-1].get("content") or "")
    name = "openai-chat-tool-call" if "tool" in last else "openai-chat-text"
    chunks = json.loads((FALLBACK / f"{name}.json").read_text())["chunks"]

    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk.encode()

    return StreamingResponse(stream(), media_type="text/event-stream")


app = Starlette(
    routes=[
        Route("/health", health),
        Route("/v1/stream", json_only, methods=["POST"]),
        Route("/v1/chat/completions", openai_chat, methods=["POST"]),
        Mount("/rogue", app=StreamEndpoint(RogueProvider())),
    ]
)
