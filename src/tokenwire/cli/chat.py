"""``tokenwire chat [PROMPT] [--url URL] [--model M] [--tools FILE] [--raw] [--system S]``.

Talks to a standard endpoint (the local gateway and its ``demo`` model by
default) with ``tokenwire.Client``. With PROMPT it answers once and exits;
without, it is a REPL that keeps the conversation's history (``/exit``,
``/quit`` or Ctrl-D to leave, ``/reset`` to forget, ``/help``). A line that
starts with ``/`` is a command for the chat itself, never sent to the model.
Ctrl-C during an answer cancels its generation and returns to the prompt. Tokens render live with
rich, after a spinner that runs until the first token; ``--raw`` prints every
SSE event with its seq instead. Tool calls are shown; with ``--tools FILE``
(declarations plus canned results by tool name, see docs/client.md) they are
answered and sent back automatically, the §4.8 loop. Each answer ends with
its usage and timing: time to first token and tokens per second.

``--url`` takes the endpoint's base URL, ``host:port`` or its full
``/v1/stream`` URL (the one grammar of ``tokenwire.client.stream_url``).
A gateway with keys: ``--api-key KEY`` or ``TOKENWIRE_API_KEY`` (sent as
``Authorization: Bearer``), or ``--header 'Name: value'`` for any other.

Exit status: 0 for an answer, 1 when the endpoint failed or the stream
carried an ``error`` event (one-shot), 2 for usage errors (an unknown
``/command`` as PROMPT too), 3 when a tool call with side effects was refused
(§8.2), in one-shot mode or at any point of a REPL session.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click
import msgspec
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from .. import events as ev
from ..client import SIDE_EFFECTS_EXTENSION, Client, ParsedToolCall, Response, Stream, Timeouts
from ..errors import InvalidRequest, TokenwireError
from ..request import Message, Request, build
from ._detect import MAX_DEPTH, too_deep
from ._headers import parse_header

#: Tool rounds in one turn before the chat stops answering calls (a model that
#: keeps calling tools must not loop forever).
MAX_TOOL_ROUNDS: Final = 8

_EXIT: Final = frozenset({"/exit", "/quit"})
_COMMANDS: Final = _EXIT | {"/help", "/reset"}

#: Exit status after a side-effect tool call was refused (§8.2): the answer
#: the user got is not what the model meant to do.
EXIT_REFUSED: Final = 3

_HELP: Final = (
    "commands: /help this list · /reset forget the conversation · /exit or /quit "
    "(or Ctrl-D) leave · Ctrl-C stops an answer"
)


class ToolBox(msgspec.Struct, frozen=True, kw_only=True):
    """``--tools FILE``: declarations, canned results by tool name, side effects."""

    tools: list[dict[str, Any]]
    results: dict[str, Any] = {}

    @property
    def side_effects(self) -> list[str]:
        return [t["name"] for t in self.tools if t.get("side_effects") is True]

    @property
    def declarations(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in t.items() if k != "side_effects"} for t in self.tools]

    def run(self, call: ParsedToolCall) -> str:
        """The canned result for ``call`` (a JSON value is written as JSON text)."""
        if call.name not in self.results:
            return json.dumps({"error": f"no canned result for {call.name}"})
        result = self.results[call.name]
        return result if isinstance(result, str) else json.dumps(result)


#: The tools file is a few KiB of declarations: bounded in size and in depth.
MAX_TOOLS_BYTES: Final = 4 << 20


def _load_tools(path: str) -> ToolBox:
    try:
        raw = Path(path).read_bytes()
        if len(raw) > MAX_TOOLS_BYTES:
            raise msgspec.DecodeError(f"larger than {MAX_TOOLS_BYTES} bytes")
        if too_deep(raw):  # msgspec would recurse with it (RecursionError)
            raise msgspec.DecodeError(f"arrays/objects nest deeper than {MAX_DEPTH} levels")
        box = msgspec.json.decode(raw, type=ToolBox)
        for i, tool in enumerate(box.tools):
            if not isinstance(tool.get("name"), str):
                raise msgspec.ValidationError(f"tools[{i}].name: a string is required")
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror or exc}", param_hint="--tools") from None
    except msgspec.DecodeError as exc:
        where = _position(raw, str(exc))
        raise click.BadParameter(
            f'{path}{where}: {exc}; fix the file (a JSON object with a "tools" list)',
            param_hint="--tools",
        ) from None
    return box


_BYTE = re.compile(r"\(byte (\d+)\)")


def _position(raw: bytes, message: str) -> str:
    """``", line L column C"`` of the byte offset msgspec names in ``message``, or ``""``."""
    found = _BYTE.search(message)
    if found is None:
        return ""
    offset = min(int(found.group(1)), len(raw))
    line = raw.count(b"\n", 0, offset) + 1
    column = offset - (raw.rfind(b"\n", 0, offset) + 1) + 1
    return f", line {line} column {column}"


class Chat:
    """One conversation: its history, its client, and how it is shown."""

    def __init__(
        self,
        client: Client,
        *,
        model: str,
        toolbox: ToolBox | None,
        raw: bool,
        system: str | None,
        out: Console,
        err: Console,
        ask: Callable[[str], bool] | None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.client = client
        self.clock = clock
        #: Side-effect tool calls refused so far (``EXIT_REFUSED``).
        self.refused = 0
        self._asking = 0.0  # seconds spent at confirmation prompts, this answer
        self.model = model
        self.toolbox = toolbox
        self.raw = raw
        self.system = system
        self.out = out
        self.err = err
        self.ask = ask
        self.history: list[Message] = []
        self._view: _LiveView | _RawView | _PlainView | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the conversation (the system message stays)."""
        self.history = [Message(role="system", content=self.system)] if self.system else []

    def request(self, messages: list[Message]) -> Request:
        extensions = None
        tools = None
        if self.toolbox is not None:
            tools = self.toolbox.declarations
            if self.toolbox.side_effects:
                extensions = {SIDE_EFFECTS_EXTENSION: self.toolbox.side_effects}
        return build(model=self.model, messages=messages, tools=tools, extensions=extensions)

    def turn(self, prompt: str) -> bool:
        """Answer ``prompt``, running tool rounds; returns False when it failed.

        The history only grows when the whole turn succeeded.
        """
        messages = [*self.history, Message(role="user", content=prompt)]
        try:
            request = self.request(messages)
            for _ in range(MAX_TOOL_ROUNDS + 1):
                response = self.answer(request)
                if response.error is not None:
                    return False
                if not response.tool_calls or self.toolbox is None:
                    break
                results = {call.id: self.toolbox.run(call) for call in response.tool_calls}
                for call in response.tool_calls:
                    self.err.print(Text(f"  ↳ {call.name} returned {results[call.id]}", "dim"))
                request = response.follow_up(request, results)
            else:
                self.err.print(Text(f"stopped after {MAX_TOOL_ROUNDS} tool rounds", "yellow"))
        except (TokenwireError, InvalidRequest) as exc:
            self.err.print(Text(f"error: {exc}", "bold red"), soft_wrap=True)
            return False
        except KeyboardInterrupt:
            self.err.print(Text("(interrupted)", "yellow"))
            return False
        self.history = [*request.messages, response.to_message()]
        return True

    def answer(self, request: Request) -> Response:
        """Stream one request, rendering as it goes; returns its ``Response``.

        The clocks leave out the time spent at confirmation prompts: it is
        the user's, not the endpoint's.
        """
        clock = self.clock
        stream = self.client.stream(request)
        self._asking = 0.0
        started = clock()
        with stream:
            view = self._view = self._new_view()
            with view:
                first: float | None = None
                rejected = 0
                for event in stream:
                    if first is None and isinstance(event, ev.ContentDelta | ev.ToolCall):
                        first = clock() - self._asking
                    view.show(event)
                    for call in stream.rejected_tool_calls[rejected:]:
                        view.note(f"✗ tool call {call.name} rejected ({call.rule}): {call.reason}")
                    rejected = len(stream.rejected_tool_calls)
                response = stream.final()
        self.refused += sum(c.rule == "not-confirmed" for c in response.rejected_tool_calls)
        self._stats(response, stream, started, first, clock() - self._asking)
        return response

    def _new_view(self) -> _LiveView | _RawView | _PlainView:
        if self.raw:
            return _RawView(self.out)
        if self.out.is_terminal:
            return _LiveView(self.out)
        return _PlainView(self.out)

    def confirm(self, call: ParsedToolCall) -> bool:
        """§8.2: ask before a tool with side effects runs (refused without a terminal)."""
        if self.ask is None:
            self.err.print(Text(f"{call.name} has side effects: no terminal to ask", "yellow"))
            return False
        view = self._view
        if isinstance(view, _LiveView):
            view.pause()
        asked = self.clock()
        try:
            return self.ask(f"run {call.name}({json.dumps(call.arguments)})? [y/N] ")
        finally:
            self._asking += self.clock() - asked
            if isinstance(view, _LiveView):
                view.resume()

    def _stats(
        self, response: Response, stream: Stream, started: float, first: float | None, ended: float
    ) -> None:
        if response.error is not None:
            self.err.print(
                Text(f"error {response.error.code}: {response.error.message}", "bold red")
            )
        parts = []
        usage = response.usage
        if usage is not None:
            parts.append(f"{usage.input_tokens} in / {usage.output_tokens} out tokens")
        if first is not None:
            parts.append(f"TTFT {1000 * (first - started):.0f} ms")
            produced = (
                usage.output_tokens
                if usage is not None
                else sum(isinstance(e, ev.ContentDelta) for e in response.events)
            )
            shown = rate(produced, ended - first)
            if shown is not None:
                parts.append(shown)
        parts.append(f"{ended - started:.2f} s")
        if response.stop_reason:
            parts.append(response.stop_reason)
        self.err.print(Text(" · ".join(parts), "dim"))
        for violation in response.violations:
            self.err.print(Text(f"  ! {violation}", "yellow"), soft_wrap=True)


#: The shortest stretch of streaming a rate is given for: below it the figure
#: measures the terminal and the clock more than the model (an answer that arrives
#: at once would read as tens of thousands of tokens a second).
MIN_RATE_S: Final = 0.25


def rate(tokens: int, seconds: float) -> str | None:
    """``"N tokens/s"`` for ``tokens`` streamed over ``seconds`` after the first one,
    or ``None`` when that is too short (``MIN_RATE_S``) or too few tokens to say."""
    if tokens < 2 or seconds < MIN_RATE_S:
        return None
    return f"{tokens / seconds:.1f} tokens/s"


class _LiveView:
    """The answer as it streams: a spinner until the first token, then the text."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.text = Text()
        self.notes: list[Text] = []
        self.waiting = True
        self.live = Live(
            self._render(), console=out, refresh_per_second=20, vertical_overflow="visible"
        )

    def _render(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.text:
            parts.append(self.text)
        parts.extend(self.notes)
        if self.waiting:
            parts.append(Spinner("dots", text=Text("waiting for the first token…", "dim")))
        return Group(*parts)

    def __enter__(self) -> _LiveView:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.waiting = False
        self.live.update(self._render(), refresh=True)
        self.live.stop()

    def pause(self) -> None:
        self.live.stop()

    def resume(self) -> None:
        self.live.start()

    def show(self, event: ev.Event) -> None:
        if isinstance(event, ev.ContentDelta):
            self.waiting = False
            self.text.append(event.delta.text, style="dim italic" if event.reasoning else "")
        elif isinstance(event, ev.ToolCall):
            self.waiting = False
            self.notes.append(Text(f"⚙ {event.name}({event.arguments})", "cyan"))
        elif isinstance(event, ev.ErrorEvent):
            self.waiting = False
        else:
            return
        self.live.update(self._render())

    def note(self, line: str) -> None:
        self.notes.append(Text(line, "yellow"))
        self.live.update(self._render())


class _PlainView:
    """Output that is not a terminal: the text as it arrives, without redrawing."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.at_line_start = True

    def __enter__(self) -> _PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.at_line_start:
            self.out.file.write("\n")
            self.out.file.flush()

    def show(self, event: ev.Event) -> None:
        if isinstance(event, ev.ContentDelta) and not event.reasoning:
            self.out.file.write(event.delta.text)
            self.out.file.flush()
            self.at_line_start = event.delta.text.endswith("\n")
        elif isinstance(event, ev.ToolCall):
            self.note(f"tool call {event.name}({event.arguments})")

    def note(self, line: str) -> None:
        if not self.at_line_start:
            self.out.file.write("\n")
        self.out.file.write(line + "\n")
        self.out.file.flush()
        self.at_line_start = True


class _RawView:
    """``--raw``: every event as its SSE frame, seq first."""

    def __init__(self, out: Console) -> None:
        self.out = out

    def __enter__(self) -> _RawView:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def show(self, event: ev.Event) -> None:
        frame = ev.dump(event).decode("utf-8", "replace").rstrip("\n")
        self.out.print(Text(f"[seq {event.seq}]", "bold cyan"))
        self.out.print(frame, markup=False, highlight=False, soft_wrap=True)

    def note(self, line: str) -> None:
        self.out.print(Text(f"# {line}", "yellow"))


def _ask(err: Console) -> Callable[[str], bool] | None:
    if not sys.stdin.isatty():
        return None

    def ask(question: str) -> bool:
        # A Text prompt: "[y/N]" in a str would be read as rich markup.
        answer = err.input(Text(question, "bold yellow"))
        return answer.strip().lower() in ("y", "yes")

    return ask


def command_line(chat: Chat, line: str, err: Console) -> bool:
    """Run ``line`` when it is a chat command (``/...``); False to leave the chat.

    Commands are the chat's own: none reaches the model.
    """
    name = line.split(maxsplit=1)[0].lower()
    if name in _EXIT:
        return False
    if name == "/reset":
        chat.reset()
        err.print(Text("(history cleared)", "dim"))
    elif name == "/help":
        err.print(Text(_HELP, "dim"))
    else:
        err.print(Text(f"unknown command {name}: /help lists the commands", "yellow"))
    return True


def _repl(chat: Chat, err: Console) -> None:
    try:
        import readline  # noqa: F401  - line editing for input()
    except ImportError:  # pragma: no cover - not on every platform
        pass
    err.print(Text("tokenwire chat: /help for commands, /exit or Ctrl-D to leave", "dim"))
    while True:
        try:
            line = err.input("[bold green]you>[/] ")
        except EOFError:
            err.print()
            return
        except KeyboardInterrupt:
            err.print()
            continue
        prompt = line.strip()
        if not prompt:
            continue
        if prompt.startswith("/"):
            if not command_line(chat, prompt, err):
                return
            continue
        chat.turn(prompt)


@click.command()
@click.argument("prompt", required=False)
@click.option(
    "--url",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="The endpoint: its base URL (host:port works) or its /v1/stream URL.",
)
@click.option(
    "--api-key",
    envvar="TOKENWIRE_API_KEY",
    show_envvar=True,
    help="The gateway key, sent as 'Authorization: Bearer KEY'.",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="An extra request header (repeatable), e.g. 'x-api-key: KEY'.",
)
@click.option("--model", "-m", default="demo", show_default=True, help="The model to ask.")
@click.option(
    "--tools",
    "tools_path",
    type=click.Path(exists=True, dir_okay=False),
    help="JSON file: tool declarations and canned results by tool name (docs/client.md).",
)
@click.option("--raw", is_flag=True, help="Show every SSE event with its seq.")
@click.option("--system", "-s", help="A system message that opens the conversation.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="First-event and idle timeout, in seconds.",
)
def command(
    prompt: str | None,
    url: str,
    api_key: str | None,
    headers: tuple[str, ...],
    model: str,
    tools_path: str | None,
    raw: bool,
    system: str | None,
    timeout: float,
) -> None:
    """Chat with an LLM-Stream endpoint; a REPL when PROMPT is omitted."""
    out = Console(highlight=False)
    # soft_wrap: the chat's own messages are never cut into lines mid-phrase;
    # the terminal folds a long one where it must.
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    # The chat shows violations and rejected tool calls itself, after each answer.
    logging.getLogger("tokenwire.client").setLevel(logging.ERROR)
    toolbox = _load_tools(tools_path) if tools_path else None
    ask = _ask(err)
    chat: Chat | None = None

    def confirm(call: ParsedToolCall) -> bool:
        assert chat is not None
        return chat.confirm(call)

    timeouts = Timeouts(connect=min(timeout, 10.0), first_event=timeout, idle=timeout)
    extra = dict(parse_header(h, "--header") for h in headers)
    try:
        client = Client(url, api_key=api_key, headers=extra, timeout=timeouts, confirm=confirm)
    except ValueError as exc:  # the URL grammar's one-line message
        raise click.BadParameter(str(exc), param_hint="--url") from None
    with client:
        chat = Chat(
            client,
            model=model,
            toolbox=toolbox,
            raw=raw,
            system=system,
            out=out,
            err=err,
            ask=ask,
        )
        if prompt is not None and prompt.strip().startswith("/"):
            # A command as PROMPT: run it (nothing to send); an unknown one is a usage error.
            command_line(chat, prompt.strip(), err)
            sys.exit(0 if prompt.split()[0].lower() in _COMMANDS else 2)
        if prompt is not None:
            ok = chat.turn(prompt)
            sys.exit(1 if not ok else EXIT_REFUSED if chat.refused else 0)
        _repl(chat, err)
        sys.exit(EXIT_REFUSED if chat.refused else 0)
