"""What a vendor request body keeps when it is served by an upstream of another format.

The standard carries what every format has (messages, tools, parameters,
reasoning history). For everything else a client of one format may send, the
table (``table.RULES``) gives one outcome per target format:

- **carry**: the standard models it; it reaches the target as the target's own form;
- **map**: the target has a faithful equivalent; the body's value is rewritten to it;
- **drop**: it has no effect on the answer at the target (a cache hint, a context
  edit of thinking the target never receives); it is left out;
- **refuse**: leaving it out would change what the model does or what the client
  would execute; the request gets a 400 naming the JSON path and why.

Every map and drop is reported (``Adapted.report``): the gateway turns the
report into a response header, a field of the request's log line and a metric.
``strict`` turns every map and drop into a refusal.

Pure functions of the decoded body; no I/O. ``adapt`` runs before the format's
ingress parser (it takes out of the body what the parser would refuse, or pass
on to an upstream of the client's format), ``finish`` after it (the mapped
fields join the request's ``vendor:<target>`` extension, which the target's
request builder merges into its body). ``signatures`` seals reasoning across
vendors; ``table`` holds the rows, ``cells`` their parts, ``maps`` the
equivalences they map with.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from ...errors import InvalidRequest
from ...request import Request
from .. import _extensions as x
from .._request import deep_merge, reasoning_history
from ..anthropic.request import DEFAULT_MAX_TOKENS
from ..gemini.ingress import camel_case
from ..gemini.request import UNSIGNED_CALL
from .shapes import OUTCOMES, Action, Adaptation, Adapted, Out, Outcome, Rule
from .table import CARRIED, RULES

__all__ = [
    "ADAPTED",
    "HEADER",
    "OUTCOMES",
    "Outcome",
    "SOURCES",
    "TARGETS",
    "Action",
    "Adaptation",
    "Adapted",
    "Out",
    "Rule",
    "adapt",
    "finish",
    "header_value",
    "table_markdown",
    "report_of",
    "target_of",
]

#: The formats a client may speak (each has a gateway ingress).
SOURCES: Final = ("anthropic", "openai", "openai-responses", "gemini")
#: The formats an upstream may speak: the four, and ``standard`` for every other
#: provider (Cohere, Mistral, SignalR, Connect, a plugin), which reads only the
#: standard request.
TARGETS: Final = (*SOURCES, "standard")

#: The response header naming what was adapted (docs/gateway.md).
HEADER: Final = "tokenwire-adapted"
#: The request extension the report travels in (to the log line and the metric).
ADAPTED: Final = "tokenwire:adapted"
#: The longest header value; the rest is counted (``...(+N)``).
MAX_HEADER_CHARS: Final = 1024

#: The extension each target's request builder merges into its body.
_EXTENSION_OF: Final = {
    "anthropic": "vendor:anthropic",
    "openai": "vendor:openai",
    "openai-responses": "vendor:openai-responses",
    "gemini": "vendor:gemini",
}


def target_of(provider: str) -> str:
    """The table's column for an upstream ``provider`` (a format name)."""
    return provider if provider in SOURCES else "standard"


def _refusal(path: str, target: str, action: Action) -> InvalidRequest:
    where = "another vendor's" if target != "standard" else "a standard-only"
    return InvalidRequest(
        f"{action.how} (this model is served by {where} upstream, {target}): "
        "leaving it out would change the answer",
        path=path,
    )


def _strict_refusal(path: str, target: str, action: Action) -> InvalidRequest:
    verb = "mapped" if action.outcome == "map" else "dropped"
    return InvalidRequest(
        f"would be {verb} for a {target} upstream ({action.how}); this gateway "
        "refuses every adaptation ([translate] strict = true): send only what "
        "the upstream's format takes, or use a model of the same vendor format",
        path=path,
    )


def adapt(
    source: str,
    body: dict[str, Any],
    targets: Iterable[str],
    *,
    strict: bool = False,
    carried: Iterable[str] | None = None,
) -> Adapted:
    """Adapt a ``source`` body for upstreams of ``targets`` (formats other than ``source``).

    ``carried``: the fields the source's ingress parser maps to the standard
    (default: ``table.CARRIED``); any other top-level field no rule names is
    dropped and reported. Returns ``Adapted``; raises ``InvalidRequest`` naming
    the JSON path of the first value that is refused (of every map and drop,
    when ``strict``).
    """
    if source == "gemini":
        body = camel_case(body)  # Google takes either spelling; the rows use one
    columns = sorted({target_of(t) for t in targets} - {source})
    out = Adapted(body=dict(body), source=source, outs={t: Out(t) for t in columns})
    if not columns:
        return out
    chosen = RULES.get(source, ())
    # Paths name the client's body: every rule finds in it before any strips.
    strips: list[tuple[Any, list[tuple[str, Any]]]] = []
    for rule in chosen:
        hits = rule.find(out.body)
        if not hits:
            continue
        stripped = False
        for path, value in hits:
            for target in columns:
                action = rule.actions[target]
                if action.outcome == "carry":
                    continue
                if action.outcome == "refuse":
                    raise _refusal(path, target, action)
                if strict:
                    raise _strict_refusal(path, target, action)
                outcome = action.outcome
                if action.apply is not None:
                    outcome = action.apply(value, out.body, out.outs[target]) or outcome
                how = action.how if outcome == action.outcome else _DROPPED_INSTEAD
                out.report.append(Adaptation(path, target, outcome, how))
                stripped = True
        if stripped and rule.strip is not None:
            strips.append((rule.strip, hits))
    for strip, hits in strips:
        strip(out.body, hits)
    known = set(CARRIED.get(source, ()) if carried is None else carried)
    _drop_unknown(out, columns, {r.path for r in chosen} | known, strict)
    if source in {target_of(t) for t in targets}:
        # An upstream of the client's own format serves the model too: it gets
        # what was taken out, as it came (its builder merges vendor:<source>).
        out.kept = {k: v for k, v in body.items() if out.body.get(k) != v}
    return out


_UNKNOWN: Final = Action("drop", "a field the adaptation table does not know")


def _drop_unknown(out: Adapted, columns: list[str], known: set[str], strict: bool) -> None:
    """Report and remove the fields no rule names and the standard does not carry
    (top level, and inside an object some rule or carried field reaches into)."""

    def unknown(path: str) -> None:
        for target in columns:
            if strict:
                raise _strict_refusal(path, target, _UNKNOWN)
            out.report.append(Adaptation(path, target, "drop", _UNKNOWN.how))

    body = out.body
    for key in list(body):
        value = body[key]
        if value is None or key in known:
            continue
        prefix = key + "."
        if isinstance(value, dict) and any(p.startswith(prefix) for p in known):
            kept = {}
            for sub, inner in value.items():
                if prefix + sub in known:
                    kept[sub] = inner
                elif inner is not None:
                    unknown(prefix + sub)
            if kept:
                body[key] = kept
            else:
                del body[key]
            continue
        unknown(key)
        del body[key]


_DROPPED_INSTEAD: Final = "no faithful form for this value at the target"


def finish(adapted: Adapted, request: Request) -> Request:
    """``request`` (parsed from ``adapted.body``) with what each target gets, and the report.

    Hosted tools join the target's function tools (the target's whole ``tools``
    list then travels in its extension, since a builder's extension replaces lists).
    """
    extensions = dict(request.extensions or {})
    for target, out in adapted.outs.items():
        if target == "anthropic" and "thinking" in out.fields:
            _fit_thinking(adapted, out, request)
        if out.hosted:
            _declare_hosted(out, request)
        key = _EXTENSION_OF.get(target)
        if key is not None and out.fields:
            merged = dict(extensions.get(key) or {})
            deep_merge(merged, out.fields)
            extensions[key] = merged
        for name, value in out.extensions.items():
            extensions.setdefault(name, value)
    if "gemini" in adapted.outs:
        _stand_in_signatures(extensions, request)
    own = _EXTENSION_OF.get(adapted.source)
    if adapted.kept and own is not None:
        extensions[own] = {**(extensions.get(own) or {}), **adapted.kept}
    if adapted.report:
        extensions[ADAPTED] = [[a.path, a.target, a.outcome] for a in adapted.report]
    if extensions == (request.extensions or {}):
        return request
    return msgspec.structs.replace(request, extensions=extensions)


def _stand_in_signatures(extensions: dict[str, Any], request: Request) -> None:
    """Gemini's documented stand-in signature on each assistant turn's first call
    that Gemini did not sign (another model made it, or the client's format has
    no place for the signature): Gemini 3 refuses such a turn unsigned."""
    signed = {
        (i, p.get(x.TOOL_CALL_ID))
        for i, parts in reasoning_history(request)
        for p in parts
        if p.get(x.VENDOR) == "gemini" and p.get(x.SIGNATURE)
    }
    history = list(extensions.get(x.REASONING_HISTORY) or [])
    for i, message in enumerate(request.messages):
        first = message.tool_calls[0] if message.tool_calls else None
        if first is None or (i, first.id) in signed:
            continue
        stand_in = {
            "type": x.REASONING,
            x.SIGNATURE: UNSIGNED_CALL,
            x.TOOL_CALL_ID: first.id,
            x.VENDOR: "gemini",
        }
        history.append({"message": i, "parts": [stand_in]})
    if history:
        extensions[x.REASONING_HISTORY] = history


#: Anthropic's smallest thinking budget.
_MIN_BUDGET: Final = 1024


def _fit_thinking(adapted: Adapted, out: Out, request: Request) -> None:
    """Anthropic thinking as Anthropic takes it, else dropped (and reported so):
    a budget below ``max_tokens``, its own sampling, and, in a tool loop, the last
    assistant turn starting with a thinking block Anthropic signed (it refuses
    the request otherwise)."""
    thinking = out.fields["thinking"]
    limit = (request.parameters.max_tokens if request.parameters else None) or DEFAULT_MAX_TOKENS
    budget = min(int(thinking.get("budget_tokens", 0)), limit - 1)
    last = max((i for i, m in enumerate(request.messages) if m.role == "assistant"), default=None)
    signed = {i for i, parts in reasoning_history(request) if _signed_by_anthropic(parts)}
    unsigned_loop = (
        last is not None and bool(request.messages[last].tool_calls) and last not in signed
    )
    params = request.parameters
    # Anthropic takes thinking only at its own sampling: temperature 1, top_p >= 0.95.
    sampled = params is not None and (
        params.temperature not in (None, 1) or (params.top_p is not None and params.top_p < 0.95)
    )
    if budget >= _MIN_BUDGET and not unsigned_loop and not sampled:
        thinking["budget_tokens"] = budget
        return
    del out.fields["thinking"]
    adapted.report[:] = [
        Adaptation(a.path, a.target, "drop", _NO_THINKING)
        if a.target == "anthropic" and a.how == "thinking.budget_tokens"
        else a
        for a in adapted.report
    ]


_NO_THINKING: Final = (
    "Anthropic would refuse thinking here (it needs a budget of 1024 or more under "
    "max_tokens, temperature 1 and top_p of 0.95 or more, and in a tool loop a last "
    "turn that starts with Anthropic's own thinking)"
)


def _signed_by_anthropic(parts: list[dict[str, Any]]) -> bool:
    return any(p.get(x.VENDOR) == "anthropic" and p.get(x.SIGNATURE) for p in parts)


def _declare_hosted(out: Out, request: Request) -> None:
    tools = request.tools or ()
    if out.target == "anthropic":
        declared: list[Any] = []
        for tool in tools:
            entry: dict[str, Any] = {"name": tool.name}
            if tool.description:
                entry["description"] = tool.description
            entry["input_schema"] = tool.parameters
            declared.append(entry)
    elif out.target == "openai-responses":
        declared = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": False,
            }
            for tool in tools
        ]
    else:  # gemini
        functions = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in tools
        ]
        declared = [{"functionDeclarations": functions}] if functions else []
    out.fields["tools"] = [*declared, *out.hosted]


def report_of(request: Request | None) -> list[tuple[str, str, str]]:
    """``(path, target, outcome)`` per adaptation made for ``request`` (none: ``[]``)."""
    entries = request.extension(ADAPTED) if request is not None else None
    if not isinstance(entries, list):
        return []
    return [
        (str(e[0]), str(e[1]), str(e[2])) for e in entries if isinstance(e, list) and len(e) == 3
    ]


def header_value(report: Iterable[tuple[str, str, str]]) -> str:
    """The ``tokenwire-adapted`` header: ``path=outcome`` per adaptation, in order,
    each once, cut at ``MAX_HEADER_CHARS`` with ``...(+N)`` counting the rest."""
    seen: dict[str, None] = {}
    for path, _target, outcome in report:
        # Header values are visible ASCII: a path names keys of the client's body.
        safe = path.encode("ascii", "backslashreplace").decode().replace(",", "%2C")
        seen.setdefault(f"{safe}={outcome}", None)
    entries = list(seen)
    out: list[str] = []
    size = 0
    for n, entry in enumerate(entries):
        if size + len(entry) + 2 > MAX_HEADER_CHARS - 12:
            out.append(f"...(+{len(entries) - n})")  # header values are ASCII
            break
        out.append(entry)
        size += len(entry) + 2
    return ", ".join(out)


def table_markdown() -> str:
    """The adaptation table as Markdown (docs/translation.md, "Adaptation"): per
    client format, one row per thing it may send and one column per target."""
    out: list[str] = []
    for source in SOURCES:
        columns = [t for t in TARGETS if t != source]
        out.append(f"**From {source}** (fields the standard carries are not listed)\n")
        out.append("| the client sends | " + " | ".join(f"to `{t}`" for t in columns) + " |")
        out.append("|---" * (len(columns) + 1) + "|")
        for rule in RULES[source]:
            path, _, note = rule.path.partition(" ")
            name = f"`{path}` {note}".strip()
            cells = []
            for target in columns:
                action = rule.actions[target]
                cells.append(f"**{action.outcome}**: {action.how}".replace("|", "\\|"))
            out.append(f"| {name} | " + " | ".join(cells) + " |")
        unknown = " | ".join("**drop**" for _ in columns)
        out.append(f"| any other field | {unknown} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
