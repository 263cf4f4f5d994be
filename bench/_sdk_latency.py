"""Added latency as an openai SDK user feels it: direct and through a gateway, interleaved.

What ``bench/vs_litellm.py`` and ``bench/serving.py`` measure a gateway with: the
openai SDK's own clients (``openai.OpenAI`` and ``openai.AsyncOpenAI``, their
default httpx transport, nothing set but ``base_url`` and ``api_key``), and the
raw asyncio client of ``tokenwire.testing.loadgen`` as a second row.

Each request straight to the upstream is paired with one through the gateway,
in alternating order (direct first, then gateway first, ...), so that drift in
the machine's load hits both alike. Every figure is a quantile of the gateway's
samples minus the same quantile of the direct ones (the *added* latency):

- **first token**: request sent to the first chunk whose
  ``choices[0].delta.content`` is a non-empty string (the first generated token:
  not the role-only opening chunk, not tokenwire's ``stream.start``);
- **per-chunk gap**: time between consecutive content chunks of a paced reply;
- **non-streaming**: a whole ``stream=False`` call through the gateway, minus the
  whole streamed reply read straight from the upstream (the fake upstream only
  streams; the gateway's non-streaming call has the same upstream work to wait
  for). A route that does not answer 200 is reported as not served, with what it said.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tokenwire.testing import loadgen as lg
from tokenwire.testing.processes import percentile

MESSAGES = [{"role": "user", "content": "bench"}]


@dataclass
class Samples:
    """Seconds, per path (``direct`` and ``via``) and per figure."""

    first: dict[str, list[float]] = field(default_factory=lambda: {"direct": [], "via": []})
    gaps: dict[str, list[float]] = field(default_factory=lambda: {"direct": [], "via": []})
    whole: dict[str, list[float]] = field(default_factory=lambda: {"direct": [], "via": []})
    #: Why the non-streaming call was not measured (the route did not answer 200).
    whole_refused: str = ""

    def added_ms(self, figure: str, q: float) -> float | None:
        values: dict[str, list[float]] = getattr(self, figure)
        if not values["direct"] or not values["via"]:
            return None
        return (percentile(values["via"], q) - percentile(values["direct"], q)) * 1e3

    def absolute_ms(self, figure: str, path: str, q: float) -> float | None:
        values: list[float] = getattr(self, figure)[path]
        return percentile(values, q) * 1e3 if values else None


def _content(chunk: Any) -> str | None:
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return None
    delta = getattr(choices[0], "delta", None)
    content = getattr(delta, "content", None) if delta is not None else None
    return content if isinstance(content, str) and content else None


def _order(n: int) -> Iterator[tuple[int, bool]]:
    """``(i, direct_first)``: pairs in alternating order."""
    for i in range(n):
        yield i, i % 2 == 0


def _note_stream(chunks: Any, started: float, first: list[float], gaps: list[float] | None) -> None:
    seen: float | None = None
    for chunk in chunks:
        if _content(chunk) is None:
            continue
        now = time.perf_counter()
        if seen is None:
            first.append(now - started)
        elif gaps is not None:
            gaps.append(now - seen)
        seen = now
    if seen is None:
        raise RuntimeError("the reply had no content chunk")


async def _anote_stream(
    chunks: Any, started: float, first: list[float], gaps: list[float] | None
) -> None:
    seen: float | None = None
    async for chunk in chunks:
        if _content(chunk) is None:
            continue
        now = time.perf_counter()
        if seen is None:
            first.append(now - started)
        elif gaps is not None:
            gaps.append(now - seen)
        seen = now
    if seen is None:
        raise RuntimeError("the reply had no content chunk")


def _refusal(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    text = str(exc).replace("\n", " ")
    return f"status {status}: {text[:160]}" if status is not None else text[:160]


def measure_sync(
    direct_url: str,
    via_url: str,
    api_key: str,
    *,
    n: int,
    first_model: str,
    paced_model: str,
    paced_n: int,
    whole_n: int,
) -> Samples:
    """The sync client (``openai.OpenAI``), one per path, kept alive across requests."""
    import openai

    out = Samples()
    clients = {
        "direct": openai.OpenAI(base_url=direct_url, api_key="sk-fake", max_retries=0),
        "via": openai.OpenAI(base_url=via_url, api_key=api_key, max_retries=0),
    }

    def stream(path: str, model: str, gaps: bool, first: list[float]) -> None:
        started = time.perf_counter()
        chunks = clients[path].chat.completions.create(model=model, messages=MESSAGES, stream=True)
        with chunks:
            _note_stream(chunks, started, first, out.gaps[path] if gaps else None)

    def pairs(count: int, one: Callable[[str], None]) -> None:
        for _, direct_first in _order(count):
            for path in ("direct", "via") if direct_first else ("via", "direct"):
                one(path)

    try:
        warm: list[float] = []
        for path in ("direct", "via", "direct", "via"):
            stream(path, first_model, False, warm)
        pairs(n, lambda path: stream(path, first_model, False, out.first[path]))
        pairs(paced_n, lambda path: stream(path, paced_model, True, warm))
        try:
            clients["via"].chat.completions.create(model=first_model, messages=MESSAGES)
        except Exception as exc:  # the route refuses non-streaming calls
            out.whole_refused = _refusal(exc)
        else:

            def whole(path: str) -> None:
                started = time.perf_counter()
                if path == "via":
                    clients[path].chat.completions.create(model=first_model, messages=MESSAGES)
                else:
                    chunks = clients[path].chat.completions.create(
                        model=first_model, messages=MESSAGES, stream=True
                    )
                    with chunks:
                        for _ in chunks:
                            pass
                out.whole[path].append(time.perf_counter() - started)

            pairs(whole_n, whole)
    finally:
        for client in clients.values():
            client.close()
    return out


def measure_async(
    direct_url: str,
    via_url: str,
    api_key: str,
    *,
    n: int,
    first_model: str,
    paced_model: str,
    paced_n: int,
) -> Samples:
    """The async client (``openai.AsyncOpenAI``) on asyncio's own event loop, as a user's."""
    import openai

    async def run() -> Samples:
        out = Samples()
        clients = {
            "direct": openai.AsyncOpenAI(base_url=direct_url, api_key="sk-fake", max_retries=0),
            "via": openai.AsyncOpenAI(base_url=via_url, api_key=api_key, max_retries=0),
        }

        async def stream(path: str, model: str, gaps: bool, first: list[float]) -> None:
            started = time.perf_counter()
            chunks = await clients[path].chat.completions.create(
                model=model, messages=MESSAGES, stream=True
            )
            async with chunks:
                await _anote_stream(chunks, started, first, out.gaps[path] if gaps else None)

        try:
            warm: list[float] = []
            for path in ("direct", "via", "direct", "via"):
                await stream(path, first_model, False, warm)
            for _, direct_first in _order(n):
                for path in ("direct", "via") if direct_first else ("via", "direct"):
                    await stream(path, first_model, False, out.first[path])
            for _, direct_first in _order(paced_n):
                for path in ("direct", "via") if direct_first else ("via", "direct"):
                    await stream(path, paced_model, True, warm)
        finally:
            for client in clients.values():
                await client.close()
        return out

    return asyncio.run(run())


class _FirstContent:
    """``search(data)`` for ``loadgen.exchange``: a read holding a non-empty content delta."""

    def search(self, data: bytes) -> bool:
        for frame in data.split(b"\n\n"):
            for line in frame.split(b"\n"):
                if not line.startswith(b"data:") or line.endswith(b"[DONE]"):
                    continue
                try:
                    content = json.loads(line[5:])["choices"][0]["delta"].get("content")
                except (ValueError, LookupError, TypeError, AttributeError):
                    continue
                if isinstance(content, str) and content:
                    return True
        return False


FIRST_CONTENT: Any = _FirstContent()


def measure_raw(
    direct_port: int, via_port: int, headers: dict[str, str], *, n: int, model: str
) -> Samples:
    """The raw asyncio client (``loadgen.exchange``), one kept-alive connection per path."""

    async def run() -> Samples:
        out = Samples()
        conns = {"direct": await lg.connect(direct_port), "via": await lg.connect(via_port)}
        requests = {
            "direct": lg.openai_request(direct_port, model),
            "via": lg.openai_request(via_port, model, headers=headers),
        }

        async def one(path: str, into: list[float] | None) -> None:
            reader, writer = conns[path]
            ex = await lg.exchange(reader, writer, requests[path], first=FIRST_CONTENT)
            if ex.first is None:
                raise RuntimeError("the answer had no content frame")
            if into is not None:
                into.append(ex.first - ex.started)

        try:
            for path in ("direct", "via", "direct", "via"):
                await one(path, None)
            for _, direct_first in _order(n):
                for path in ("direct", "via") if direct_first else ("via", "direct"):
                    await one(path, out.first[path])
        finally:
            for _, writer in conns.values():
                writer.close()
        return out

    return asyncio.run(run())


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)
