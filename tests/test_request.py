"""Tests for ``tokenwire.request``: the request envelope of §4.

The shared vectors live in ``tests/vectors/request/``:

``valid.json``
    A list of ``{"name", "body", "expect"}``. ``body`` is the request as a JSON
    value. Each key of ``expect`` is either a ``Request`` field (compared with
    the parsed field written back as plain JSON; ``null`` means absent), or one
    of the derived views ``texts`` (each message's ``text``), ``roles``,
    ``part_types`` (the part types of each array-content message),
    ``tool_names`` or ``request_id``. Optional ``max_bytes``/``max_depth`` are
    passed to ``parse``.

``invalid.json``
    A list of ``{"name", "body" | "raw" | "raw_hex", "path", "message_contains"}``.
    ``raw`` is a body that is not JSON (sent as UTF-8), ``raw_hex`` one that is
    not even UTF-8. ``path`` is the exact ``InvalidRequest.path``, and
    ``message_contains`` a substring of ``str(error)``. Optional ``error``
    (default ``InvalidRequest``) names the exact class; optional
    ``max_bytes``/``max_depth`` are passed to ``parse``.
"""

from __future__ import annotations

import ast
import base64
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenwire import request as R
from tokenwire import toolschema
from tokenwire.errors import InvalidRequest, RequestTooLarge
from tokenwire.request import (
    MEDIA_TYPE,
    AudioPart,
    DocumentPart,
    ImagePart,
    Message,
    Parameters,
    Request,
    TextPart,
    Tool,
    ToolCallRef,
    build,
    dumps,
    parse,
)

VECTORS = Path(__file__).parent / "vectors" / "request"
VALID: list[dict[str, Any]] = json.loads((VECTORS / "valid.json").read_text("utf-8"))
INVALID: list[dict[str, Any]] = json.loads((VECTORS / "invalid.json").read_text("utf-8"))
ERRORS = {"InvalidRequest": InvalidRequest, "RequestTooLarge": RequestTooLarge}

# messages[2].tool_call_id, tools[0].parameters, extensions["foo"], or $.
PATH_STYLE = re.compile(r'\$|[a-z_]+(\[\d+\]|\["(?:[^"\\]|\\.)*"\]|\.[A-Za-z_$][A-Za-z0-9_$]*)*')

WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "Get current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Vienna"},
            "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}


def envelope(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"version": "1.0", "stream": True, "model": "example-model"}
    body.update(fields)
    return body


def encode(value: Any) -> bytes:
    return msgspec.json.encode(value)


def limits(entry: dict[str, Any]) -> dict[str, int]:
    return {key: entry[key] for key in ("max_bytes", "max_depth") if key in entry}


def plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


# --- Shared vectors -----------------------------------------------------------------


def test_vector_names_are_unique() -> None:
    names = [entry["name"] for entry in VALID + INVALID]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("entry", VALID, ids=[entry["name"] for entry in VALID])
def test_valid_vector(entry: dict[str, Any]) -> None:
    req = parse(encode(entry["body"]), **limits(entry))
    for key, expected in entry["expect"].items():
        if key in Request.__struct_fields__:
            actual = plain(getattr(req, key))
        elif key == "texts":
            actual = [message.text for message in req.messages]
        elif key == "roles":
            actual = [message.role for message in req.messages]
        elif key == "part_types":
            actual = [
                [type(part).__struct_config__.tag for part in message.content]
                for message in req.messages
                if isinstance(message.content, list)
            ]
        elif key == "tool_names":
            actual = [tool.name for tool in req.tools or ()]
        elif key == "request_id":
            actual = req.request_id
        else:
            raise AssertionError(f"unknown expect key {key!r}")
        assert actual == expected, key
    # Every valid vector survives the round trip, and parses as a str too.
    assert parse(dumps(req)) == req
    assert parse(encode(entry["body"]).decode(), **limits(entry)) == req


def invalid_body(entry: dict[str, Any]) -> bytes:
    if "raw" in entry:
        return str(entry["raw"]).encode()
    if "raw_hex" in entry:
        return bytes.fromhex(entry["raw_hex"])
    return encode(entry["body"])


@pytest.mark.parametrize("entry", INVALID, ids=[entry["name"] for entry in INVALID])
def test_invalid_vector(entry: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse(invalid_body(entry), **limits(entry))
    exc = info.value
    assert type(exc) is ERRORS[entry.get("error", "InvalidRequest")]
    assert exc.path == entry["path"]
    assert entry["message_contains"] in str(exc)
    assert str(exc) == f"{exc.path}: {exc.reason}"
    assert PATH_STYLE.fullmatch(exc.path), exc.path


# --- The draft's examples -------------------------------------------------------------


def test_section_4_3_multi_turn_example() -> None:
    body = envelope(
        messages=[
            {"role": "system", "content": "You are a coding assistant."},
            {"role": "user", "content": "Write a Python function to sort a list."},
            {"role": "assistant", "content": "def sort_list(items):\n    return sorted(items)"},
            {"role": "user", "content": "Now make it sort in reverse order."},
        ]
    )
    req = parse(encode(body))
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "user"]
    assert req.messages[2].content == "def sort_list(items):\n    return sorted(items)"
    assert req.messages[3].text == "Now make it sort in reverse order."
    assert req.tools is None and req.parameters is None and req.request_id is None


def test_section_4_3_1_multimodal_example() -> None:
    body = envelope(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is shown in this image?"},
                    {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
                ],
            }
        ]
    )
    (message,) = parse(encode(body)).messages
    assert message.content == [
        TextPart(text="What is shown in this image?"),
        ImagePart(media_type="image/png", data="iVBORw0KGgo="),
    ]
    assert message.text == "What is shown in this image?"
    # The draft's own placeholder is not base64: issue 16 makes it a 400.
    body["messages"][0]["content"][1]["data"] = "<base64-encoded image>"
    with pytest.raises(InvalidRequest) as info:
        parse(encode(body))
    assert info.value.path == "messages[0].content[1].data"


def test_section_4_3_1_string_equals_one_text_part() -> None:
    # §4.3.1: a string is semantically a single text part.
    as_string = Message(role="user", content="What is the capital of France?")
    as_parts = Message(role="user", content=[TextPart(text="What is the capital of France?")])
    assert as_string.text == as_parts.text


def test_section_4_8_request_2_tool_loop() -> None:
    body = envelope(
        messages=[
            {"role": "user", "content": "What is the weather in Vienna?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Vienna"}'}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "Vienna: 24C, sunny"},
        ],
        tools=[WEATHER],
    )
    req = parse(encode(body))
    user, assistant, tool = req.messages
    assert assistant.content is None and assistant.text == ""
    assert assistant.tool_calls == [
        ToolCallRef(id="call_1", name="get_weather", arguments='{"city":"Vienna"}')
    ]
    assert tool.role == "tool" and tool.tool_call_id == "call_1"
    assert tool.text == "Vienna: 24C, sunny"
    declared = req.tool("get_weather")
    assert declared is not None and declared.parameters["required"] == ["city"]
    assert req.tool("get_time") is None
    # content is REQUIRED, so a null content is written, not dropped.
    assert b'"content":null' in dumps(req)
    assert msgspec.json.decode(dumps(req)) == body


def test_section_4_6_request_id_and_4_7_extensions() -> None:
    body = envelope(
        messages=[{"role": "user", "content": "x"}],
        metadata={"request_id": "550e8400-e29b-41d4-a716-446655440000", "user_id": "u"},
        extensions={
            "vendor:openai": {"logprobs": True},
            "vendor:anthropic": {"thinking": {"type": "enabled", "budget_tokens": 10000}},
            "tokenwire:resumable": True,
        },
    )
    req = parse(encode(body))
    assert req.request_id == "550e8400-e29b-41d4-a716-446655440000"
    assert req.extension("vendor:openai") == {"logprobs": True}
    assert req.extension("tokenwire:resumable") is True
    assert req.extension("vendor:unknown") is None
    assert req.extension("vendor:unknown", False) is False
    bare = parse(encode(envelope(messages=[{"role": "user", "content": "x"}])))
    assert bare.extension("tokenwire:resumable", "dflt") == "dflt"


def test_unknown_fields_parameters_and_namespaces_are_ignored() -> None:
    body = envelope(
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
                "x-trace": 1,
            }
        ],
        tools=[dict(WEATHER, strict=True)],
        parameters={"max_tokens": 5, "frequency_penalty": 0.5, "vendor_knob": [1, 2]},
        extensions={"vendor:never-heard-of-it": {"anything": [1, {"goes": None}]}},
        future_top_level_field={"a": 1},
    )
    req = parse(encode(body))
    assert req.parameters == Parameters(max_tokens=5)
    assert req.tools == [Tool(**WEATHER)]
    assert req.extension("vendor:never-heard-of-it") == {"anything": [1, {"goes": None}]}
    written = dumps(req)
    for dropped in (b"future_top_level_field", b"frequency_penalty", b"cache_control", b"x-trace"):
        assert dropped not in written


# --- The API -------------------------------------------------------------------------


def test_constants_and_error_classes() -> None:
    assert MEDIA_TYPE == "application/llm-request+json"
    assert R.VERSION == "1.0"
    assert R.ROLES == ("system", "user", "assistant", "tool")
    assert set(R.PART_TYPES) == {"text", "image", "document", "audio"}
    assert InvalidRequest("x").status_hint == 400
    assert RequestTooLarge("x").status_hint == 413
    assert issubclass(RequestTooLarge, InvalidRequest)


def test_exports_are_complete() -> None:
    public = {
        name
        for name, value in vars(R).items()
        if not name.startswith("_")
        and getattr(value, "__module__", None) == R.__name__
        and callable(value)
    }
    assert public <= set(R.__all__)
    assert all(hasattr(R, name) for name in R.__all__)


def test_structs_are_frozen() -> None:
    req = build(model="m", messages="hi")
    with pytest.raises(AttributeError):
        req.model = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        req.messages[0].content = "changed"  # type: ignore[misc]


def test_dumps_omits_none_fields() -> None:
    req = build(model="m", messages="hi")
    assert dumps(req) == (
        b'{"version":"1.0","stream":true,"model":"m","messages":[{"role":"user","content":"hi"}]}'
    )
    params = build(model="m", messages="hi", parameters=Parameters(top_p=0.5)).parameters
    assert msgspec.json.encode(params) == b'{"top_p":0.5}'


def test_part_tags_are_the_wire_types() -> None:
    parts = [
        TextPart(text="t"),
        ImagePart(media_type="image/png", data="AA=="),
        DocumentPart(media_type="application/pdf", data="AA=="),
        AudioPart(media_type="audio/wav", data="AA=="),
    ]
    written = msgspec.json.decode(encode(parts))
    assert [part["type"] for part in written] == ["text", "image", "document", "audio"]


def test_message_text_joins_text_parts_only() -> None:
    message = Message(
        role="user",
        content=[
            TextPart(text="a"),
            ImagePart(media_type="image/png", data="AA=="),
            TextPart(text="b"),
        ],
    )
    assert message.text == "ab"


def test_build_from_a_string_structs_and_dicts() -> None:
    assert build(model="m", messages="hi").messages == [Message(role="user", content="hi")]
    from_structs = build(
        model="m",
        messages=[
            Message(role="system", content="Be brief."),
            Message(role="user", content="What is the weather in Vienna?"),
            Message(
                role="assistant",
                content=None,
                tool_calls=[ToolCallRef(id="call_1", name="get_weather", arguments="{}")],
            ),
            Message(role="tool", tool_call_id="call_1", content="24C"),
        ],
        tools=[Tool(**WEATHER)],
        parameters=Parameters(max_tokens=100, temperature=0.2),
        metadata={"request_id": "r-1"},
        extensions={"tokenwire:resumable": True},
    )
    from_dicts = build(
        model="m",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is the weather in Vienna?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": "{}"}],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "24C"},
        ],
        tools=[WEATHER],
        parameters={"max_tokens": 100, "temperature": 0.2},
        metadata={"request_id": "r-1"},
        extensions={"tokenwire:resumable": True},
    )
    assert from_structs == from_dicts
    assert from_structs.version == "1.0" and from_structs.stream is True
    assert from_structs.request_id == "r-1"
    assert parse(dumps(from_structs)) == from_structs


@pytest.mark.parametrize(
    ("kwargs", "path", "contains"),
    [
        ({"messages": []}, "messages", "non-empty"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id", "required"),
        ({"messages": [Message(role="user", content=None)]}, "messages[0].content", "null"),
        ({"messages": "hi", "tools": [WEATHER, WEATHER]}, "tools[1].name", "duplicate"),
        (
            {"messages": "hi", "parameters": Parameters(max_tokens=0)},
            "parameters.max_tokens",
            ">= 1",
        ),
        (
            {"messages": "hi", "parameters": Parameters(temperature=math.nan)},
            "parameters.temperature",
            "got nan",
        ),
        ({"messages": "hi", "parameters": {"top_p": math.inf}}, "parameters.top_p", "got inf"),
        ({"messages": "hi", "extensions": {"plain": 1}}, 'extensions["plain"]', "vendor:name"),
        ({"messages": "\ud800"}, "$", "cannot be written as JSON"),
        ({"messages": "hi", "metadata": {"when": object()}}, "$", "cannot be written as JSON"),
        ({"messages": "hi", "model": ""}, "model", "must not be empty"),
    ],
)
def test_build_validates_like_parse(kwargs: dict[str, Any], path: str, contains: str) -> None:
    kwargs.setdefault("model", "m")
    with pytest.raises(InvalidRequest) as info:
        build(**kwargs)
    assert info.value.path == path
    assert contains in str(info.value)


def test_msgspec_errors_map_to_the_path_style() -> None:
    # The backstop behind the explicit checks: msgspec's `$.a[0].b` becomes `a[0].b`.
    with pytest.raises(InvalidRequest) as info:
        build(model="m", messages="hi", metadata={1: "int key"})  # type: ignore[dict-item]
    assert info.value.path == "metadata"
    assert info.value.reason == "Expected `str`, got `int` (in an object key)"
    raw = envelope(messages=[{"role": "user", "content": "x"}, {"role": "robot", "content": "x"}])
    with pytest.raises(msgspec.ValidationError) as error:
        msgspec.convert(raw, Request)
    mapped = R._from_msgspec(error.value)
    assert (mapped.path, mapped.reason) == ("messages[1].role", "Invalid enum value 'robot'")
    assert R._path_from_msgspec("") == "$"
    assert R._path_from_msgspec(".tools[0].parameters") == "tools[0].parameters"


def _top_level_imports(path: str) -> set[str]:
    tree = ast.parse(Path(path).read_text("utf-8"))
    imported: set[str] = set()
    for node in tree.body:  # top level only: jsonschema and re2 are imported lazily
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or "").split(".")[0])
    return {name for name in imported if name not in sys.stdlib_module_names}


def test_request_module_imports_only_msgspec_stdlib_and_errors() -> None:
    assert _top_level_imports(R.__file__) <= {"msgspec", ".errors", ".toolschema"}
    assert _top_level_imports(toolschema.__file__) <= {"msgspec", ".errors"}


# --- Limits ---------------------------------------------------------------------------


@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
@pytest.mark.parametrize("as_str", [False, True])
def test_100000_nested_brackets_are_too_large(opener: bytes, as_str: bool) -> None:
    closer = b"]" if opener == b"[" else b"}"
    body = opener * 100_000 + closer * 100_000
    with pytest.raises(RequestTooLarge) as info:
        parse(body.decode() if as_str else body)
    assert info.value.path == "$"
    assert f"(at byte {64 * len(opener)})" in str(info.value)


def test_unclosed_nesting_is_too_large() -> None:
    with pytest.raises(RequestTooLarge, match=r"at byte 64\)"):
        parse(b"[" * 1_000_000)


@pytest.mark.parametrize("levels", [10, 11])
def test_nesting_at_the_limit_passes_and_one_more_fails(levels: int) -> None:
    # The body is one level, metadata a second, then `levels - 2` arrays.
    arrays = b"[" * (levels - 2) + b"]" * (levels - 2)
    body = encode(envelope(messages=[{"role": "user", "content": "x"}]))
    body = body[:-1] + b',"metadata":{"x":' + arrays + b"}}"
    if levels <= 10:
        assert parse(body, max_depth=10).metadata == msgspec.json.decode(body)["metadata"]
        return
    with pytest.raises(RequestTooLarge) as info:
        parse(body, max_depth=10)
    offset = body.index(b'"x":') + 4 + (10 - 2)  # the array that makes level 11
    assert str(info.value).endswith(f"nest deeper than 10 levels (at byte {offset})")


def test_brackets_inside_strings_do_not_count() -> None:
    tricky = '[[[[{{{{ \\" ]]]] \\\\ [[[[ \\\\\\" {{{{'
    body = encode(envelope(messages=[{"role": "user", "content": tricky}], metadata={"k": tricky}))
    assert parse(body, max_depth=3).messages[0].content == tricky


def test_body_over_max_bytes_is_refused_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(_: bytes) -> Any:
        raise AssertionError("decoded a body over the limit")

    monkeypatch.setattr(R, "_decode_any", boom)
    monkeypatch.setattr(R, "_check_depth", boom)
    for body in (b"\xff" * 101, b"[" * 101, "x" * 101, "é" * 51):
        with pytest.raises(RequestTooLarge) as info:
            parse(body, max_bytes=100)
        assert info.value.path == "$" and "100-byte limit" in str(info.value)
    with pytest.raises(RequestTooLarge):
        parse(b" " * ((4 << 20) + 1))


def test_body_at_max_bytes_passes() -> None:
    body = encode(envelope(messages=[{"role": "user", "content": "x"}]))
    assert parse(body, max_bytes=len(body)).model == "example-model"


@pytest.mark.parametrize(
    ("body", "offset"),
    [
        (b'{"a": "\xff"}', 7),
        (b'{"model": "caf\xc3"}', 14),
        (b'\x80{"a": 1}', 0),
        (b'{"a": "ok \xe2\x82\xac", "b": "\xed\xa0\x80"}', 22),  # an encoded surrogate
    ],
)
def test_invalid_utf8_names_the_offset(body: bytes, offset: int) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse(body)
    assert info.value.path == "$"
    assert f"not valid UTF-8 (at byte {offset})" in str(info.value)


def test_str_body_with_a_lone_surrogate() -> None:
    with pytest.raises(InvalidRequest, match="lone surrogate at character 7"):
        parse('{"a": "\ud800"}')


def test_invalid_json_names_the_offset() -> None:
    with pytest.raises(InvalidRequest, match=r"not valid JSON: .*\(byte 10\)"):
        parse(b'{"a":[1,2,}')
    with pytest.raises(InvalidRequest, match=r"truncated \(at byte 9\)"):
        parse(b'{"a":[1,2')


# --- Properties -----------------------------------------------------------------------

texts = st.text(max_size=12)
names = st.text(min_size=1, max_size=8)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)
base64_texts = st.binary(min_size=1, max_size=12).map(lambda b: base64.b64encode(b).decode())
images = st.builds(
    ImagePart,
    media_type=st.sampled_from(["image/png", "image/jpeg", "image/svg+xml"]),
    data=base64_texts,
)
blobs = images | st.sampled_from([DocumentPart, AudioPart]).flatmap(
    lambda cls: st.builds(
        cls,
        media_type=st.sampled_from(["image/png", "application/pdf", "audio/wav"]),
        data=st.text("ABCDEFabcdef0123456789+/=", max_size=16),
    )
)
parts = st.builds(TextPart, text=texts) | blobs
contents = texts | st.lists(parts, max_size=3)
tool_call_refs = st.builds(ToolCallRef, id=names, name=names, arguments=texts)
messages = st.one_of(
    st.builds(
        Message,
        role=st.sampled_from(["system", "user"]),
        content=contents,
        name=st.none() | texts,
    ),
    st.builds(
        Message,
        role=st.just("assistant"),
        content=contents,
        name=st.none() | texts,
        tool_calls=st.none() | st.lists(tool_call_refs, max_size=2),
    ),
    st.builds(
        Message,
        role=st.just("assistant"),
        content=st.none(),
        tool_calls=st.lists(tool_call_refs, min_size=1, max_size=2),
    ),
    st.builds(Message, role=st.just("tool"), content=contents, tool_call_id=names),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Messages in which every tool result answers an earlier assistant tool call."""
    out: list[Message] = []
    calls: list[str] = []
    for message in draw(st.lists(messages, min_size=1, max_size=4)):
        if message.role == "tool":
            if not calls:
                continue
            message = msgspec.structs.replace(message, tool_call_id=draw(st.sampled_from(calls)))
        out.append(message)
        calls += [call.id for call in message.tool_calls or ()]
    return out or [Message(role="user", content="hi")]


# Valid tool schemas (tools are checked when a request is parsed), with free annotations.
schemas = st.sampled_from(
    [
        {},
        {"type": "object"},
        WEATHER["parameters"],
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}},
        {"type": "object", "properties": {"q": {"type": "string", "pattern": "^[a-z]+$"}}},
    ]
).flatmap(
    lambda base: st.dictionaries(st.sampled_from(["title", "description", "x-note"]), texts).map(
        lambda notes: {**base, **notes}
    )
)
tools = st.lists(
    st.builds(Tool, name=names, description=texts, parameters=schemas),
    max_size=3,
    unique_by=lambda tool: tool.name,
)
parameters = st.builds(
    Parameters,
    max_tokens=st.none() | st.integers(min_value=1, max_value=2**40),
    temperature=st.none() | st.floats(min_value=0, max_value=2),
    top_p=st.none() | st.floats(min_value=0, max_value=1),
    stop_sequences=st.none() | st.lists(texts, max_size=3),
)
# docs/conformance.md ruling 14.
extension_keys = st.from_regex(
    r"[A-Za-z][A-Za-z0-9_-]{0,8}:[A-Za-z0-9][A-Za-z0-9_.-]{0,8}", fullmatch=True
)
requests = st.builds(
    Request,
    version=st.just("1.0"),
    stream=st.just(True),
    model=names,
    messages=conversations(),
    tools=st.none() | tools,
    parameters=st.none() | parameters,
    metadata=st.none() | json_objects,
    extensions=st.none() | st.dictionaries(extension_keys, json_values, max_size=3),
)


@given(requests)
def test_dumps_parse_round_trip(req: Request) -> None:
    body = dumps(req)
    again = parse(body)
    assert again == req
    assert dumps(again) == body
    assert (
        build(
            model=req.model,
            messages=req.messages,
            tools=req.tools,
            parameters=req.parameters,
            metadata=req.metadata,
            extensions=req.extensions,
        )
        == req
    )


def is_request_or_invalid(body: bytes | str, **kwargs: int) -> Request | InvalidRequest:
    """Parse, allowing only a Request or an InvalidRequest (the h11 fuzz invariant)."""
    try:
        return parse(body, **kwargs)
    except InvalidRequest as exc:
        assert PATH_STYLE.fullmatch(exc.path), exc.path
        return exc


@given(st.binary(max_size=512))
def test_arbitrary_bytes_give_a_request_or_invalid_request(body: bytes) -> None:
    is_request_or_invalid(body)


@given(st.text(alphabet='[]{}":,\\ 0tru', max_size=200))
def test_json_punctuation_soup(body: str) -> None:
    is_request_or_invalid(body, max_depth=4)


@given(requests, st.data())
def test_mutated_bodies_give_a_request_or_invalid_request(
    req: Request, data: st.DataObject
) -> None:
    body = bytearray(dumps(req))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(body)))
        action = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if action == "insert" or at == len(body):
            body[at:at] = data.draw(st.binary(min_size=1, max_size=3))
        elif action == "flip":
            body[at] = data.draw(st.integers(0, 255))
        else:
            del body[at]
    is_request_or_invalid(bytes(body))


def _slots(node: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) pair in a JSON value, for replacing one value."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in list(items):
        out.append((node, key))
        if isinstance(value, dict | list):
            _slots(value, out)
    return out


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(requests, st.data())
def test_any_value_anywhere_gives_an_explicit_error(req: Request, data: st.DataObject) -> None:
    # Replace one value of a valid request with any JSON value: the result is a
    # Request or an error from the explicit checks, never msgspec's backstop.
    raw = plain(req)
    container, key = data.draw(st.sampled_from(_slots(raw, [])))
    container[key] = data.draw(json_values)
    result = is_request_or_invalid(encode(raw))
    if isinstance(result, InvalidRequest):
        assert not result.reason.startswith(("Expected", "Object missing", "Invalid")), result


def reference_depth_offset(body: bytes, max_depth: int) -> int | None:
    """A plain state machine: the offset where nesting first passes max_depth."""
    depth, in_string, escaped = 0, False, False
    for i, byte in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            if depth > max_depth:
                return i
        elif byte in b"]}":
            depth -= 1
    return None


tricky_json = st.recursive(
    st.text('[]{}"\\ab\u2028', max_size=6) | st.integers(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text('[]{}"\\k', max_size=3), inner, max_size=3)
    ),
    max_leaves=30,
)


@given(tricky_json, st.integers(min_value=0, max_value=8))
def test_depth_scan_matches_a_reference_on_valid_json(value: Any, max_depth: int) -> None:
    body = encode(value)
    expected = reference_depth_offset(body, max_depth)
    if expected is None:
        R._check_depth(body, max_depth)
    else:
        with pytest.raises(RequestTooLarge, match=rf"\(at byte {expected}\)$"):
            R._check_depth(body, max_depth)


@given(
    st.binary(max_size=200).map(
        lambda b: b.translate(bytes.maketrans(b"\x00\x01\x02\x03\x04", b'[]{"\\'))
    ),
    st.integers(0, 6),
)
def test_depth_scan_on_garbage_points_at_a_bracket(body: bytes, max_depth: int) -> None:
    try:
        R._check_depth(body, max_depth)
    except RequestTooLarge as exc:
        offset = int(re.search(r"at byte (\d+)", str(exc))[1])  # type: ignore[index]
        assert body[offset : offset + 1] in (b"[", b"{")


def test_echo_cuts_long_values() -> None:
    assert R.echo("gpt-4o") == '"gpt-4o"'
    long = R.echo("m" * 10_000)
    assert long == '"' + "m" * R.MAX_ECHO + '…"'
    assert R.echo(None) == "null" and R.echo([1]) == "an array"
