"""The request side of same-vendor passthrough (``passthrough.py``): which models
pass through (and which formats serve the others), the body sent upstream, and
the standard's view of it.

Pure functions and one lookup table built from the config; no I/O.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ...errors import InvalidRequest

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["FORMATS", "Routes", "eligible", "lenient", "rename_model"]

_decode = msgspec.json.decode
_encode = msgspec.json.encode

#: Vendor formats whose requests and streams can pass through (their model is in
#: the body; their streams are SSE the translator reads chunk by chunk).
FORMATS: Final = frozenset({"anthropic", "openai-responses", "openai"})

# --- the request: the body as it came, the model renamed -----------------------------

#: ``"model"`` followed by its string value. A JSON string cannot contain an
#: unescaped ``"``, so each match is a real key (at some depth; see rename_model).
_MODEL_KEY: Final = re.compile(rb'"model"\s*:\s*("(?:[^"\\]|\\.)*")')


def rename_model(raw: bytes, obj: Mapping[str, Any], name: str) -> bytes:
    """``raw`` (the JSON text of ``obj``) with its top-level ``model`` set to ``name``.

    Only the model's value changes; every other byte is the client's. A match
    is taken when decoding the spliced text gives ``obj`` with only the model
    changed (a ``"model"`` key nested in a tool schema is not it). Without such
    a match (an escaped key), ``obj`` is re-encoded with the new name.
    """
    if obj.get("model") == name:
        return raw
    value = _encode(name)
    wanted = {**obj, "model": name}
    for match in _MODEL_KEY.finditer(raw):
        start, end = match.span(1)
        spliced = raw[:start] + value + raw[end:]
        with contextlib.suppress(msgspec.DecodeError):
            if _decode(spliced) == wanted:
                return spliced
    return _encode(wanted)


#: What the standard models, per format: the rest is left out of the standard
#: view (``lenient``) and carried by the passthrough body alone.
_ANTHROPIC_BLOCKS: Final = frozenset(
    {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}
)
_RESPONSES_ITEMS: Final = frozenset(
    {"message", "reasoning", "function_call", "function_call_output"}
)
#: How many refusals ``lenient`` may strip one by one after the known ones.
_MAX_STRIPS: Final = 64
_STEPS: Final = re.compile(r"[^.\[\]]+|\[\d+\]")


def _standard_view(fmt: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``obj`` without what the standard cannot model (known kinds)."""
    view = dict(obj)
    if fmt == "anthropic":
        tools = view.get("tools")
        if isinstance(tools, list):
            view["tools"] = [
                t for t in tools if not isinstance(t, dict) or t.get("type", "custom") == "custom"
            ]
        messages = view.get("messages")
        if isinstance(messages, list):
            kept = []
            for message in messages:
                content = message.get("content") if isinstance(message, dict) else None
                if isinstance(content, list):
                    blocks = [
                        b
                        for b in content
                        if not isinstance(b, dict) or b.get("type") in _ANTHROPIC_BLOCKS
                    ]
                    message = {**message, "content": blocks or ""}
                kept.append(message)
            view["messages"] = kept
    elif fmt == "openai-responses":
        items = view.get("input")
        if isinstance(items, list):
            view["input"] = [
                item
                for item in items
                if not isinstance(item, dict)
                or item.get("type", "message" if "role" in item else None) in _RESPONSES_ITEMS
            ]
    return view


def _strip(obj: Any, path: str) -> bool:
    """Remove the innermost array element ``path`` points into; whether one was."""
    end = path.rfind("]")
    start = path.rfind("[", 0, end)
    if end < 0 or start < 0 or not path[start + 1 : end].isdigit():
        return False
    index = int(path[start + 1 : end])
    target: Any = obj
    for step in _STEPS.findall(path[:start]):
        if step.startswith("["):
            k = int(step[1:-1])
            target = target[k] if isinstance(target, list) and k < len(target) else None
        else:
            target = target.get(step) if isinstance(target, dict) else None
        if target is None:
            return False
    if not isinstance(target, list) or index >= len(target):
        return False
    del target[index]
    return True


def lenient(
    fmt: str, raw: bytes, obj: dict[str, Any], parse: Callable[[dict[str, Any]], Any]
) -> Any:
    """``parse`` of the standard view of ``obj``: what the standard does not model is
    left out (known server tools and item types first, then, one at a time, any
    array element the parser still refuses). A refusal of a top-level field is
    raised: the gateway needs ``model`` and the like to serve the request at all.
    """
    view = _standard_view(fmt, obj)
    copied = False
    for _ in range(_MAX_STRIPS):
        try:
            return parse(view)
        except InvalidRequest as exc:
            if not copied:
                # Stripping edits nested lists: work on a copy of the client's body.
                view = _standard_view(fmt, _decode(raw))
                copied = True
            if not _strip(view, exc.path):
                raise
    return parse(view)


# --- which models pass through --------------------------------------------------------


class Routes:
    """Model name -> the one vendor format that serves it everywhere, if there is one.

    A model passes through on its format's route when each of its deployments and
    each deployment of its fallbacks is an ``http-sse`` upstream of that format.
    """

    def __init__(self, config: Config) -> None:
        from ... import translate
        from ..config import deployment_models

        production = config.production
        own: dict[str, set[str | None]] = {}
        providers: dict[str, set[str]] = {}
        for model in config.models:
            formats: set[str | None] = set()
            for entry, _weight in deployment_models(model, production.routing_for(model.name)):
                provider = entry.provider
                providers.setdefault(model.name, set()).add(provider)
                fmt = translate.registry.get(provider) if provider in translate.registry else None
                ok = fmt is not None and fmt.transport == "http-sse" and provider in FORMATS
                formats.add(provider if ok else None)
            own[model.name] = formats
        self._format: dict[str, str] = {}
        self._models = frozenset(own)
        self._targets: dict[str, frozenset[str]] = {}
        self._strict = frozenset(m.name for m in config.models if config.strict_translation(m.name))
        named = config.translate.signing_key_env
        given = os.environ.get(named) if named else None
        #: The key of the reasoning signatures the gateway mints (translate/adapt/signatures.py).
        self.signing_key = given.encode() if given else secrets.token_bytes(32)
        for model in config.models:
            formats = set(own[model.name])
            targets = set(providers.get(model.name, ()))
            for fallback in production.routing_for(model.name).fallbacks:
                formats |= own.get(fallback, {None})
                targets |= providers.get(fallback, set())
            self._targets[model.name] = frozenset(targets)
            if len(formats) == 1:
                (only,) = formats
                if only is not None:
                    self._format[model.name] = only

    def known(self, model: object) -> bool:
        """Whether ``model`` is a configured model."""
        return isinstance(model, str) and model in self._models

    def targets(self, model: object) -> frozenset[str]:
        """The provider of every deployment and fallback of ``model`` (format names,
        ``demo``, ``python``...): the formats its requests may be served in."""
        return self._targets.get(model, frozenset()) if isinstance(model, str) else frozenset()

    def strict(self, model: object) -> bool:
        """Whether ``model`` refuses every adaptation (``[translate] strict``)."""
        return isinstance(model, str) and model in self._strict

    def format_of(self, model: object) -> str | None:
        """The format every upstream of ``model`` speaks, or ``None`` (mixed, not HTTP...)."""
        return self._format.get(model) if isinstance(model, str) else None


def eligible(fmt: str, obj: Mapping[str, Any]) -> bool:
    """Whether a body of format ``fmt`` can pass through (its model's routes aside).

    An OpenAI Chat stream reports usage only when asked (``stream_options.include_usage``):
    without it the parallel parse would have none to charge keys and limits with,
    so such a body is translated as before (the gateway asks for usage itself).
    """
    if fmt != "openai":
        return True
    options = obj.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True
