"""The request envelope of §4 (``application/llm-request+json``) as typed values.

Every class carries exactly the draft's fields, under the draft's names, and is
a frozen msgspec Struct. ``parse`` turns a POST body into a ``Request`` or raises
``InvalidRequest`` whose ``path`` names the offending JSON value in the style
``messages[2].tool_call_id``, ``tools[0].parameters``, ``extensions["foo"]``
(``$`` for the body as a whole). ``build`` is the client-side constructor and
checks the same rules; ``dumps`` writes the JSON back, omitting absent fields.

Parsing runs in four steps, cheapest first, so that a hostile body costs little:

1. the size limit, on the raw length, before anything is decoded;
2. the nesting limit, as a linear scan that skips JSON strings (no recursion,
   so 100,000 nested brackets give ``RequestTooLarge``, not ``RecursionError``);
3. JSON decoding into plain values (invalid UTF-8 and malformed JSON are
   reported with a byte offset);
4. one explicit pass over the plain values, checking the rules of §4.2 to §4.8
   in document order, then conversion into the Structs.

Forward compatibility: unknown top-level fields (§4.2), unknown parameters
(§4.5), unknown message, part and tool fields, and unknown extension namespaces
(§4.7) are ignored. They are not kept, so ``dumps`` does not write them back.
"""

from __future__ import annotations

import binascii
import math
import operator
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Annotated, Any, Final, Literal, NoReturn, TypeAlias

import msgspec

from .errors import InvalidRequest, RequestTooLarge
from .toolschema import check_schema

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "MAX_ECHO",
    "MEDIA_TYPE",
    "PART_TYPES",
    "ROLES",
    "VERSION",
    "AudioPart",
    "DocumentPart",
    "ImagePart",
    "Message",
    "Parameters",
    "Part",
    "Request",
    "Role",
    "TextPart",
    "Tool",
    "ToolCallRef",
    "build",
    "dumps",
    "echo",
    "parse",
]

#: §4.1: the request media type.
MEDIA_TYPE: Final = "application/llm-request+json"

#: §4.2: the only protocol version.
VERSION: Final = "1.0"

#: §4.3: the four message roles, in the draft's order.
ROLES: Final = ("system", "user", "assistant", "tool")

#: Default limits of ``parse``: 4 MiB and 64 levels of arrays/objects.
DEFAULT_MAX_BYTES: Final = 4 << 20
DEFAULT_MAX_DEPTH: Final = 64

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


class _Struct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Common configuration: immutable, keyword-only, absent fields not written."""


class _Part(_Struct, frozen=True, tag_field="type"):
    """§4.3.1: a typed content part; ``type`` is the msgspec tag."""


class TextPart(_Part, tag="text", frozen=True, kw_only=True):
    """§4.3.1 Table 3: plain text."""

    text: str


class ImagePart(_Part, tag="image", frozen=True, kw_only=True):
    """§4.3.1 Table 3: a base64-encoded image."""

    media_type: str
    data: str


class DocumentPart(_Part, tag="document", frozen=True, kw_only=True):
    """§4.3.1 Table 3: a base64-encoded document."""

    media_type: str
    data: str


class AudioPart(_Part, tag="audio", frozen=True, kw_only=True):
    """§4.3.1 Table 3: base64-encoded audio."""

    media_type: str
    data: str


Part: TypeAlias = TextPart | ImagePart | DocumentPart | AudioPart

#: §4.3.1 Table 3: part type -> its REQUIRED fields (all strings).
PART_TYPES: Final[dict[str, tuple[str, ...]]] = {
    "text": ("text",),
    "image": ("media_type", "data"),
    "document": ("media_type", "data"),
    "audio": ("media_type", "data"),
}


class ToolCallRef(_Struct, frozen=True, kw_only=True):
    """§4.8: one tool call on an assistant message; ``arguments`` is a JSON text."""

    id: str
    name: str
    arguments: str


class Message(_Struct, frozen=True, kw_only=True):
    """§4.3 Table 2: one message of the conversation history.

    ``content`` is a string or a list of parts (§4.3.1); it is ``None`` only on
    an assistant message that carries ``tool_calls`` (§4.8, Request 2).
    """

    role: Role
    content: str | list[Part] | None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[ToolCallRef] | None = None

    @property
    def text(self) -> str:
        """The message's text: the string content, or its text parts joined."""
        content = self.content
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        return "".join(part.text for part in content if isinstance(part, TextPart))


class Tool(_Struct, frozen=True, kw_only=True):
    """§4.4 Table 4: a tool declaration; ``parameters`` is a JSON Schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


class Parameters(_Struct, frozen=True, kw_only=True):
    """§4.5 Table 5: generation parameters, all optional; unknown ones are dropped."""

    max_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0)] | None = None
    top_p: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    stop_sequences: list[str] | None = None


class Request(_Struct, frozen=True, kw_only=True):
    """§4.2 Table 1: the request envelope."""

    version: str
    stream: bool
    model: str
    messages: list[Message]
    tools: list[Tool] | None = None
    parameters: Parameters | None = None
    metadata: dict[str, Any] | None = None
    extensions: dict[str, Any] | None = None

    @property
    def request_id(self) -> str | None:
        """§4.6: ``metadata["request_id"]`` when it is a string, else ``None``."""
        value = self.metadata.get("request_id") if self.metadata else None
        return value if isinstance(value, str) else None

    def tool(self, name: str) -> Tool | None:
        """The declared tool called ``name`` (§4.4), or ``None``."""
        for tool in self.tools or ():
            if tool.name == name:
                return tool
        return None

    def extension(self, key: str, default: Any = None) -> Any:
        """The value of extension ``key`` (a ``"vendor:name"`` key, §4.7), or ``default``."""
        if self.extensions is None:
            return default
        return self.extensions.get(key, default)


_decode_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


# --- Limits ---------------------------------------------------------------------

_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
# A translation table: opening brackets become +1, closing ones -1 (as a
# signed byte), everything else 0.
_STEP_OF: Final = bytes(1 if b in b"[{" else 255 if b in b"]}" else 0 for b in range(256))


def _without_escapes(body: bytes) -> bytes:
    """``body`` with escaped backslashes and quotes blanked, offsets kept.

    Pairs of backslashes go first, so ``\\\\"`` still ends a string and
    ``\\\\\\"`` does not; after that every quote opens or closes a string.
    """
    if b"\\" not in body:
        return body
    return body.replace(b"\\\\", b"  ").replace(b'\\"', b"  ")


def _check_depth(body: bytes, max_depth: int) -> None:
    """Raise ``RequestTooLarge`` if arrays/objects nest deeper than ``max_depth``.

    One linear pass of C-level steps, without recursion, so 100,000 nested
    brackets cost milliseconds: escapes are blanked, strings are cut out by
    splitting on quotes, the brackets left become +1/-1 steps, and the running
    depth is searched for ``max_depth + 1`` (depth moves by one, so it cannot
    pass the limit without touching that value).

    On valid JSON this is exact. On invalid JSON it agrees with the decoder up
    to the first byte the decoder rejects, so nothing deeper is ever decoded.
    """
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return  # the common case: few brackets in all, strings included
    parts = _without_escapes(body).split(b'"')  # odd parts are string contents
    outside = b"".join(parts[::2])
    if outside.count(b"[") + outside.count(b"{") <= max_depth:
        return
    limit = max_depth + 1
    if limit not in accumulate(memoryview(outside.translate(_STEP_OF, _NOT_BRACKETS)).cast("b")):
        return
    # Over the limit: find where, keeping every byte this time, then add back
    # the strings (contents and two quotes each) cut out before that point.
    at = operator.indexOf(accumulate(memoryview(outside.translate(_STEP_OF)).cast("b")), limit)
    i = bisect_right(list(accumulate(map(len, parts[::2]))), at)  # `at` falls in parts[2 * i]
    offset = at + 2 * i + sum(map(len, parts[1 : 2 * i : 2]))
    raise RequestTooLarge(
        f"arrays/objects nest deeper than {max_depth} levels (at byte {offset})", path="$"
    )


def _to_bytes(body: bytes | str, max_bytes: int) -> bytes:
    if isinstance(body, str):
        # A character is at least one byte: refuse before encoding a huge string.
        if len(body) > max_bytes:
            raise RequestTooLarge(f"body is over the {max_bytes}-byte limit", path="$")
        try:
            return body.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRequest(
                f"body is not valid Unicode: lone surrogate at character {exc.start}", path="$"
            ) from None
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    raise TypeError(f"body must be bytes or str, not {type(body).__name__}")


# --- Errors -----------------------------------------------------------------------

# msgspec says "<problem> - at `$.messages[2].role`", or "... - at `key` in `$.metadata`".
_MSGSPEC_PATH: Final = re.compile(r"^(.*) - at `(key` in `)?\$(.*)`$", re.DOTALL)


def _path_from_msgspec(where: str) -> str:
    """``$.messages[2].role`` (given without the ``$``) -> ``messages[2].role``."""
    return where[1:] if where.startswith(".") else where or "$"


def _from_msgspec(exc: msgspec.ValidationError) -> InvalidRequest:
    """A msgspec error as an ``InvalidRequest`` with a path in our style."""
    text = str(exc)
    match = _MSGSPEC_PATH.match(text)
    if match is None:
        return InvalidRequest(text, path="$")
    message = f"{match[1]} (in an object key)" if match[2] else match[1]
    return InvalidRequest(message, path=_path_from_msgspec(match[3]))


def _malformed(body: bytes, exc: msgspec.DecodeError) -> InvalidRequest:
    """The error for a body msgspec could not decode, with a byte offset."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        # §9.1: the body is UTF-8 JSON.
        return InvalidRequest(f"body is not valid UTF-8 (at byte {bad.start})", path="$")
    text = str(exc)
    if isinstance(exc, msgspec.ValidationError):  # a number msgspec cannot hold
        return InvalidRequest(f"body holds a number out of range: {text}", path="$")
    if "(byte " not in text:  # "Input data was truncated": the end is the offset
        text = f"{text} (at byte {len(body)})"
    return InvalidRequest(f"body is not valid JSON: {text}", path="$")


def _fail(path: str, message: str) -> NoReturn:
    raise InvalidRequest(message, path=path)


def _kind(value: object) -> str:
    """The JSON kind of a decoded value, with its article: "a string", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"  # only reachable from build()


#: Echoed strings are cut to this many characters (plus an ellipsis): a
#: hostile value must not come back whole in an error message or a log line.
MAX_ECHO: Final = 64


def _show(value: object) -> str:
    """A short JSON rendering of a scalar for an error message, else its kind."""
    if isinstance(value, str):
        return _encode(value if len(value) <= MAX_ECHO else value[:MAX_ECHO] + "…").decode()
    if value is None or isinstance(value, bool):
        return _encode(value).decode()
    if isinstance(value, int) and value.bit_length() <= 64 or isinstance(value, float):
        return repr(value)
    return _kind(value)


def echo(value: object) -> str:
    """``value`` as it may appear in an error message: a JSON string cut to
    ``MAX_ECHO`` characters and an ellipsis, or a short rendering of a scalar
    (e.g. ``f"unknown model {echo(request.model)}"``)."""
    return _show(value)


def _quote(key: str) -> str:
    """A key as a JSON string, for paths like ``extensions["foo"]`` (cut like ``_show``)."""
    return _encode(key if len(key) <= MAX_ECHO else key[:MAX_ECHO] + "…").decode()


def _number(value: object) -> float | None:
    """``value`` as a finite float if it is a JSON number, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


# --- Validation -------------------------------------------------------------------

_ROLE_LIST: Final = ", ".join(f'"{role}"' for role in ROLES)
_PART_LIST: Final = ", ".join(f'"{name}"' for name in PART_TYPES)
# §4.7: "vendor:name". docs/conformance.md ruling 14: the vendor is an ASCII
# letter then letters, digits, "-" or "_"; the name a letter or digit then
# letters, digits, "-", "_" or "."; exactly one colon; 64 characters at most.
_EXTENSION_KEY: Final = re.compile(
    r"(?=.{3,64}\Z)[A-Za-z][A-Za-z0-9_-]*:[A-Za-z0-9][A-Za-z0-9_.-]*\Z", re.ASCII
)
# RFC 6838 §4.2 restricted-name, for the subtype of an image part's media type.
_IMAGE_MEDIA_TYPE: Final = re.compile(r"image/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\Z", re.ASCII)


def _string(obj: dict[str, Any], key: str, path: str, *, required: str | None) -> str | None:
    """``obj[key]`` as a string; absent/null is an error ``required`` if that is set."""
    value = obj.get(key)
    if value is None:
        if required is not None:
            _fail(path, required)
        return None
    if not isinstance(value, str):
        _fail(path, f"must be a string, got {_kind(value)}")
    return value


def _check_part(part: object, path: str) -> None:
    # §4.3.1 Table 3.
    if not isinstance(part, dict):
        _fail(path, f"a content part must be an object (§4.3.1), got {_kind(part)}")
    kind = _string(part, "type", f"{path}.type", required="required (§4.3.1)")
    fields = PART_TYPES.get(kind) if kind is not None else None
    if fields is None:
        _fail(
            f"{path}.type",
            f"unknown content part type {_show(kind)}; expected one of {_PART_LIST} (§4.3.1)",
        )
    for field in fields:
        _string(part, field, f"{path}.{field}", required=f'required for type "{kind}" (§4.3.1)')
    if kind == "image":
        # §4.3.1 Table 3: "a base64-encoded image", with its media type.
        media_type = part["media_type"]
        if not _IMAGE_MEDIA_TYPE.match(media_type):
            _fail(
                f"{path}.media_type",
                f'must be an image media type such as "image/png" (§4.3.1), '
                f"got {_show(media_type)}",
            )
        _check_base64(part["data"], f"{path}.data")


def _check_base64(data: str, path: str) -> None:
    """``data`` must be standard base64 (RFC 4648 §4, padded, no whitespace), not empty."""
    if not data:
        _fail(path, "must not be empty: the base64-encoded bytes (§4.3.1)")
    try:
        binascii.a2b_base64(data.encode("ascii"), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error):
        _fail(path, "must be standard base64 (RFC 4648, padded, no whitespace) (§4.3.1)")


def _check_tool_call(call: object, path: str) -> None:
    # §4.8: each assistant tool call repeats the tool.call event's id, name, arguments.
    if not isinstance(call, dict):
        _fail(path, f"a tool call must be an object (§4.8), got {_kind(call)}")
    for field in ("id", "name"):
        value = _string(call, field, f"{path}.{field}", required="required (§4.8)")
        if not value:
            _fail(f"{path}.{field}", "must not be empty (§4.8)")
    _string(
        call,
        "arguments",
        f"{path}.arguments",
        required="required (§4.8): the arguments as a JSON text",
    )


def _check_message(message: object, path: str, calls: set[str]) -> None:
    # §4.3 Table 2. ``calls``: the ids of the assistant tool calls before this message.
    if not isinstance(message, dict):
        _fail(path, f"a message must be an object (§4.3), got {_kind(message)}")
    role = message.get("role")
    if role is None:
        _fail(f"{path}.role", f"required (§4.3): one of {_ROLE_LIST}")
    if not isinstance(role, str) or role not in ROLES:
        _fail(f"{path}.role", f"must be one of {_ROLE_LIST} (§4.3), got {_show(role)}")
    tool_calls = message.get("tool_calls")

    # §4.3: content is REQUIRED; §4.8 shows null content on an assistant
    # message whose whole turn was tool calls, and nowhere else.
    if "content" not in message:
        _fail(f"{path}.content", "required (§4.3)")
    content = message["content"]
    if content is None:
        if role != "assistant" or not (isinstance(tool_calls, list) and tool_calls):
            _fail(
                f"{path}.content",
                "may be null only on an assistant message with tool_calls (§4.8)",
            )
    elif isinstance(content, list):
        # §4.3.1: implementations MUST support both the string and the array form.
        for k, part in enumerate(content):
            _check_part(part, f"{path}.content[{k}]")
    elif not isinstance(content, str):
        _fail(
            f"{path}.content",
            f"must be a string or an array of content parts (§4.3.1), got {_kind(content)}",
        )

    _string(message, "name", f"{path}.name", required=None)

    # §4.3: tool_call_id is REQUIRED when role is "tool".
    call_id = _string(
        message,
        "tool_call_id",
        f"{path}.tool_call_id",
        required='required when role is "tool"' if role == "tool" else None,
    )
    if role == "tool" and not call_id:
        _fail(f"{path}.tool_call_id", 'must not be empty when role is "tool" (§4.3)')
    if role == "tool" and call_id not in calls:
        # §4.8 step 4: a tool result answers a call the model made earlier.
        _fail(
            f"{path}.tool_call_id",
            f"{_show(call_id)} names no tool call of an earlier assistant message (§4.8)",
        )

    if tool_calls is not None:
        if role != "assistant":
            _fail(f"{path}.tool_calls", f"allowed only on assistant messages (§4.8), not {role!r}")
        if not isinstance(tool_calls, list):
            _fail(f"{path}.tool_calls", f"must be an array (§4.8), got {_kind(tool_calls)}")
        for j, call in enumerate(tool_calls):
            _check_tool_call(call, f"{path}.tool_calls[{j}]")
            calls.add(call["id"])


def _check_tools(tools: object) -> None:
    # §4.4 Table 4: name, description and parameters are all REQUIRED.
    if not isinstance(tools, list):
        _fail("tools", f"must be an array (§4.4), got {_kind(tools)}")
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            _fail(path, f"a tool must be an object (§4.4), got {_kind(tool)}")
        name = _string(tool, "name", f"{path}.name", required="required (§4.4)")
        if not name:
            _fail(f"{path}.name", "must not be empty (§4.4)")
        if name in seen:
            # A tool.call names its tool (§5.3.4): two declarations would be ambiguous.
            _fail(f"{path}.name", f"duplicate tool name {_show(name)}")
        seen.add(name)
        _string(tool, "description", f"{path}.description", required="required (§4.4)")
        if "parameters" not in tool:
            _fail(f"{path}.parameters", "required (§4.4): a JSON Schema object")
        schema = tool["parameters"]
        if not isinstance(schema, dict):
            _fail(f"{path}.parameters", f"must be a JSON Schema object (§4.4), got {_kind(schema)}")
        # §4.4/§8.2: a usable schema, or a 400 now; never fetched, linear-time
        # patterns, bounded sizes (toolschema.py, docs/conformance.md ruling 15).
        check_schema(schema, f"{path}.parameters")


def _check_parameters(params: object) -> None:
    # §4.5 Table 5: all optional; unknown parameters MUST be ignored.
    if not isinstance(params, dict):
        _fail("parameters", f"must be an object (§4.5), got {_kind(params)}")
    max_tokens = params.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        _fail("parameters.max_tokens", f"must be an integer >= 1 (§4.5), got {_show(max_tokens)}")
    temperature = params.get("temperature")
    if temperature is not None:
        number = _number(temperature)
        if number is None or number < 0:
            _fail(
                "parameters.temperature", f"must be a number >= 0 (§4.5), got {_show(temperature)}"
            )
    top_p = params.get("top_p")
    if top_p is not None:
        number = _number(top_p)
        if number is None or not 0 <= number <= 1:
            _fail("parameters.top_p", f"must be a number from 0 to 1 (§4.5), got {_show(top_p)}")
    stops = params.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list):
            _fail(
                "parameters.stop_sequences",
                f"must be an array of strings (§4.5), got {_kind(stops)}",
            )
        for i, stop in enumerate(stops):
            if not isinstance(stop, str):
                _fail(f"parameters.stop_sequences[{i}]", f"must be a string, got {_kind(stop)}")


def _check_extensions(extensions: object) -> None:
    # §4.7: keys MUST be "vendor:name"; unknown namespaces MUST be ignored, so
    # only the key's shape is checked, never the value.
    if not isinstance(extensions, dict):
        _fail("extensions", f"must be an object (§4.7), got {_kind(extensions)}")
    for key in extensions:
        if not isinstance(key, str) or not _EXTENSION_KEY.fullmatch(key):
            _fail(
                f"extensions[{_quote(str(key))}]",
                'extension keys MUST be namespaced as "vendor:name" (§4.7): ASCII letters, '
                'digits, "-" and "_" (and "." in the name), at most 64 characters',
            )


def _validate(raw: object) -> Request:
    """Check the decoded body against §4.2 to §4.8 and build the ``Request``."""
    if not isinstance(raw, dict):
        _fail("$", f"the request body must be a JSON object (§4.2), got {_kind(raw)}")

    # §4.2 Table 1, in order.
    if "version" not in raw:
        _fail("version", f'required (§4.2): MUST be "{VERSION}"')
    if raw["version"] != VERSION:
        _fail("version", f'MUST be "{VERSION}" (§4.2), got {_show(raw["version"])}')
    if "stream" not in raw:
        _fail("stream", "required (§4.2): MUST be true")
    if raw["stream"] is not True:
        _fail(
            "stream",
            f"MUST be true (§4.2): responses are always streamed, got {_show(raw['stream'])}",
        )
    model = _string(raw, "model", "model", required="required (§4.2): the model identifier")
    if not model:
        _fail("model", "must not be empty (§4.2)")

    messages = raw.get("messages")
    if messages is None:
        _fail("messages", "required (§4.3): the conversation history")
    if not isinstance(messages, list) or not messages:
        _fail("messages", f"must be a non-empty array of messages (§4.3), got {_show(messages)}")
    calls: set[str] = set()
    for i, message in enumerate(messages):
        _check_message(message, f"messages[{i}]", calls)

    # OPTIONAL members: null is the same as absent.
    if raw.get("tools") is not None:
        _check_tools(raw["tools"])
    if raw.get("parameters") is not None:
        _check_parameters(raw["parameters"])
    metadata = raw.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        _fail("metadata", f"must be an object (§4.6), got {_kind(metadata)}")
    if raw.get("extensions") is not None:
        _check_extensions(raw["extensions"])

    try:
        return msgspec.convert(raw, Request)
    except msgspec.ValidationError as exc:
        # A backstop: every rule above should already have caught the problem.
        raise _from_msgspec(exc) from None


# --- Public API ---------------------------------------------------------------------


def parse(
    body: bytes | str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Request:
    """Parse and validate a request body (§4.2).

    ``max_bytes`` bounds the body's length in bytes and ``max_depth`` the
    nesting of arrays and objects; both are checked before the JSON is decoded.

    Returns the ``Request``. Raises ``RequestTooLarge`` (path ``$``) when a limit
    is passed, and ``InvalidRequest`` for invalid UTF-8 or JSON (with the byte
    offset) and for any broken §4 rule (``.path`` names the JSON value, e.g.
    ``messages[2].tool_call_id``). Nothing else is raised for any input.
    """
    data = _to_bytes(body, max_bytes)
    if len(data) > max_bytes:
        raise RequestTooLarge(
            f"body is {len(data)} bytes, over the {max_bytes}-byte limit", path="$"
        )
    _check_depth(data, max_depth)
    try:
        raw = _decode_any(data)
    except msgspec.DecodeError as exc:
        raise _malformed(data, exc) from None
    except RecursionError:  # only with a max_depth beyond what msgspec can nest
        raise RequestTooLarge("arrays/objects nest too deeply to decode", path="$") from None
    return _validate(raw)


def build(
    *,
    model: str,
    messages: str | Sequence[Message | Mapping[str, Any]],
    tools: Sequence[Tool | Mapping[str, Any]] | None = None,
    parameters: Parameters | Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> Request:
    """Build a request for a client, checked like ``parse`` checks a body.

    ``messages`` may be a string (one user message), or a list of ``Message``
    values or plain dicts; ``tools`` and ``parameters`` likewise accept Structs
    or dicts. ``version`` and ``stream`` are always ``"1.0"`` and ``true``.
    No size or depth limit applies.

    Returns the ``Request``. Raises ``InvalidRequest`` (with ``.path``) when
    the result would break a §4 rule or cannot be written as JSON.
    """
    history: Any = (
        [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
    )
    raw: dict[str, Any] = {"version": VERSION, "stream": True, "model": model, "messages": history}
    optional = {
        "tools": None if tools is None else list(tools),
        "parameters": parameters,
        "metadata": None if metadata is None else dict(metadata),
        "extensions": None if extensions is None else dict(extensions),
    }
    raw.update((key, value) for key, value in optional.items() if value is not None)
    try:
        plain = msgspec.to_builtins(raw)
        _encode(plain)  # every string must be encodable as UTF-8 (no lone surrogates)
    except (TypeError, UnicodeEncodeError) as exc:
        raise InvalidRequest(f"cannot be written as JSON: {exc}", path="$") from None
    return _validate(plain)


def dumps(req: Request) -> bytes:
    """The request as compact UTF-8 JSON, omitting fields that are ``None``.

    ``content: null`` is kept, since ``content`` is REQUIRED (§4.3).
    ``parse(dumps(req)) == req`` for every valid request.
    """
    return _encode(req)
