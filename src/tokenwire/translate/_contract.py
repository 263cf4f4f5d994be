"""The vendor contract: one ``VendorFormat`` record per vendor, and the registry.

Everything the rest of tokenwire needs to know about a vendor is on its record:
the stream translator, the request builder, the HTTP error mapping, the
optional ingress (a vendor request body in, the vendor's own stream out), the
transport that carries it and the fake upstream the tests run against. Each
vendor package defines its record as ``FORMAT``; the registry imports a
vendor's package the first time the vendor is asked for, so importing
``tokenwire.translate`` stays cheap.

Layers: ``translate`` imports only the core (events, request, writer, sse).
The fake is named by a module path, imported only by ``VendorFormat.fake_module``
(from the tests and the ``testing`` package), never here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, Literal, Protocol, TypeAlias

from .. import events as ev
from ..request import Request
from ._aggregate import Aggregator
from ._base import StreamTranslator, VendorRequest

__all__ = [
    "TRANSPORTS",
    "AggregatorFactory",
    "EncodeEvent",
    "ErrorBody",
    "HTTPErrorMapping",
    "Registry",
    "RequestBuilder",
    "TokenCount",
    "Transport",
    "VendorFormat",
    "VendorIngress",
    "formats",
    "get",
    "registry",
    "status_error",
    "vendor_table",
]

#: How a vendor's stream travels: an HTTP response of SSE, SignalR records over
#: a WebSocket, Connect envelopes over HTTP (docs/bindings.md).
Transport: TypeAlias = Literal["http-sse", "signalr", "connect"]
TRANSPORTS: Final[frozenset[str]] = frozenset({"http-sse", "signalr", "connect"})

#: Standard events -> the vendor's stream bytes (``b""`` when an event has none).
EncodeEvent: TypeAlias = Callable[[ev.Event], bytes]
#: ``(status, body) -> (§5.3.6 code, message)`` for an error answered before streaming.
HTTPErrorMapping: TypeAlias = Callable[[int, bytes], tuple[str, str]]


#: Standard request (+ the vendor's options: ``base_url``, ``api_key``,
#: ``upstream_model``, ``headers``...) -> the vendor's HTTP request. Raises
#: ``InvalidRequest`` (``.path`` in the standard request) for what the vendor
#: cannot take. The options differ per vendor, so the signature is open.
RequestBuilder: TypeAlias = Callable[..., VendorRequest]


#: A vendor body (decoded JSON) and its standard request -> a fresh aggregator.
AggregatorFactory: TypeAlias = Callable[[dict[str, Any], Request], Aggregator]
#: ``(HTTP status, standard error code, message, JSON path or None)`` -> the body.
ErrorBody: TypeAlias = Callable[[int, str, str, "str | None"], bytes]
#: ``(standard error code, message, events sent so far)`` -> one in-stream error
#: event in the vendor's stream format.
ErrorFrame: TypeAlias = Callable[[str, str, int], bytes]


class IngressParser(Protocol):
    """A vendor request body (decoded JSON) -> the standard request and the
    encoder that answers it in the vendor's stream format. Raises ``InvalidRequest``."""

    def __call__(self, body: dict[str, Any], /) -> tuple[Request, EncodeEvent]: ...


@dataclass(frozen=True, slots=True)
class VendorIngress:
    """A vendor's request format served by the gateway (§7.3 dual format)."""

    #: The route the vendor's SDKs post to (``/v1/messages``).
    route: str
    #: Body -> ``(Request, encode)``; ``encode`` turns each standard event into
    #: the vendor's stream bytes.
    parse: IngressParser
    #: The request media types the route takes besides the standard's.
    media_types: frozenset[str] = frozenset({"application/json"})
    #: Path parameters of ``route`` (``{model}``) the gateway copies into the
    #: body under the same name before ``parse`` (Google's REST mapping binds
    #: ``model`` of a ``GenerateContentRequest`` to the path). A route with path
    #: parameters streams by its path: its body needs no ``"stream": true``.
    path_params: tuple[str, ...] = ()
    #: ``(body, request) -> Aggregator``: the vendor's non-streaming answer, built
    #: from the standard events (``_aggregate``); ``None``: streaming only.
    aggregate: AggregatorFactory | None = None
    #: ``(status, code, message, path) -> body``: an error answered before any
    #: stream (bad body, unknown model...) in the vendor's own error shape.
    error_body: ErrorBody | None = None
    #: ``(code, message, seq) -> bytes``: the in-stream error the vendor itself
    #: sends, for an error the gateway adds to a stream that passes through
    #: untranslated (the upstream cut, a timeout): the SDK raises it as the vendor's.
    error_frame: ErrorFrame | None = None


_STATUS_CODES: Final = {
    408: "overloaded",
    429: "rate_limited",
    503: "overloaded",
    504: "overloaded",
    529: "overloaded",
}


def status_error(status: int, body: bytes = b"") -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` for an upstream error status, from the status alone.

    The mapping of a vendor whose error bodies say nothing more.
    """
    return _STATUS_CODES.get(status, "internal_error"), f"upstream answered HTTP {status}"


@dataclass(frozen=True, slots=True)
class TokenCount:
    """A vendor's own token-counting endpoint."""

    #: The generation request ``build_request`` made -> the counting request for it.
    request: Callable[[VendorRequest], VendorRequest]
    #: The counting endpoint's JSON answer -> the number of input tokens.
    #: Raises ``ValueError`` for an answer without one.
    result: Callable[[bytes], int]
    #: The count as that endpoint answers it (the gateway's counting route).
    answer: Callable[[int], dict[str, Any]] = lambda n: {"input_tokens": n}
    #: ``(counting body, route's path parameters) -> a generation body`` the
    #: ingress parser takes (what the counting body lacks, or wraps).
    generation_body: Callable[[dict[str, Any], Mapping[str, str]], dict[str, Any]] = (
        lambda body, _params: body
    )


@dataclass(frozen=True, slots=True)
class VendorFormat:
    """Everything about one vendor format, in one record (see the module docstring)."""

    #: The name configs, the CLI and ``translator(name)`` use (``openai-responses``).
    name: str
    #: What the docs call it (``OpenAI Responses``).
    title: str
    transport: Transport
    #: The media type of the vendor's response stream.
    media_type: str
    #: The stream translator: vendor bytes -> standard events.
    translator: type[StreamTranslator]
    #: Standard request -> the vendor's HTTP request.
    build_request: RequestBuilder
    #: The vendor's HTTP error answer -> ``(code, message)``.
    http_error: HTTPErrorMapping = status_error
    #: The request the upstream receives, for the docs (``POST {base_url}/v1/messages``).
    endpoint: str = ""
    #: The gateway route that speaks this vendor's format, when there is one.
    ingress: VendorIngress | None = None
    #: The module of the fake upstream's renderer in ``tokenwire.testing``, when
    #: there is one (a path, so that ``translate`` never imports ``testing``).
    fake: str | None = None
    #: Whether ``request`` enabled reasoning at the vendor itself (through
    #: ``vendor:*`` fields): the stream then carries it without
    #: ``"tokenwire:reasoning": true`` (no extra flag).
    vendor_reasoning: Callable[[Request], bool] = lambda request: False
    #: The vendor's token-counting endpoint, when it has one.
    count: TokenCount | None = None

    def wants_reasoning(self, request: Request) -> bool:
        """Whether a stream for ``request`` carries reasoning (docs/extensions.md)."""
        return request.extension("tokenwire:reasoning") is True or self.vendor_reasoning(request)

    def new_translator(
        self, *, model: str, request_id: str | None = None, **options: Any
    ) -> StreamTranslator:
        """A fresh translator for one response body (``options`` are the vendor's)."""
        return self.translator(model=model, request_id=request_id, **options)

    def fake_module(self) -> ModuleType:
        """The fake upstream's renderer module (imported now). Raises ``LookupError``."""
        if self.fake is None:
            raise LookupError(f"vendor format {self.name!r} has no fake upstream")
        return importlib.import_module(self.fake)


#: Vendor name -> the ``tokenwire.translate`` package that defines its ``FORMAT``.
_PACKAGES: Final[dict[str, str]] = {
    "openai": "openai",
    "mistral": "mistral",
    "openai-responses": "openai_responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "cohere": "cohere",
    "signalr": "signalr",
    "connect": "connect",
}


class Registry(Mapping[str, VendorFormat]):
    """Vendor name -> ``VendorFormat``; a vendor's package is imported on first use."""

    def __init__(self, packages: Mapping[str, str]) -> None:
        self._packages = dict(packages)
        self._formats: dict[str, VendorFormat] = {}

    @property
    def modules(self) -> Mapping[str, str]:
        """Vendor name -> module name inside ``tokenwire.translate`` (nothing imported)."""
        return self._packages

    def __getitem__(self, name: str) -> VendorFormat:
        found = self._formats.get(name)
        if found is not None:
            return found
        package = self._packages[name]  # KeyError for an unknown name
        module = importlib.import_module(f"{__package__}.{package}")
        fmt = module.FORMAT
        if not isinstance(fmt, VendorFormat) or fmt.name != name:  # pragma: no cover
            raise TypeError(f"tokenwire.translate.{package}.FORMAT is not the {name!r} format")
        self._formats[name] = fmt
        return fmt

    def __iter__(self) -> Iterator[str]:
        return iter(self._packages)

    def __len__(self) -> int:
        return len(self._packages)

    def __contains__(self, name: object) -> bool:
        return name in self._packages

    def get_format(self, name: str) -> VendorFormat:
        """The format called ``name``. Raises ``ValueError`` naming the known ones."""
        try:
            return self[name]
        except KeyError:
            known = ", ".join(sorted(self._packages))
            raise ValueError(f"unknown vendor format {name!r} (known: {known})") from None

    def by_transport(self, transport: Transport) -> list[VendorFormat]:
        """Every format carried by ``transport``, in registry order."""
        return [fmt for fmt in self.values() if fmt.transport == transport]


#: Every vendor format tokenwire translates.
registry: Final = Registry(_PACKAGES)


def get(name: str) -> VendorFormat:
    """The ``VendorFormat`` called ``name``. Raises ``ValueError`` for an unknown name."""
    return registry.get_format(name)


def formats() -> list[VendorFormat]:
    """Every ``VendorFormat``, in registry order (imports every vendor package)."""
    return list(registry.values())


def vendor_table() -> str:
    """The vendor formats as a Markdown table, generated from ``registry``.

    ``docs/translation.md`` carries this table verbatim; a test keeps the two in sync.
    """
    rows = [
        "| format | vendor | module | transport | upstream request | stream media type "
        "| gateway ingress | fake upstream |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for fmt in formats():
        ingress = f"`POST {fmt.ingress.route}`" if fmt.ingress is not None else "—"
        fake = f"`{fmt.fake}`" if fmt.fake is not None else "—"
        rows.append(
            f"| `{fmt.name}` | {fmt.title} | `tokenwire.translate.{registry.modules[fmt.name]}` "
            f"| `{fmt.transport}` | `{fmt.endpoint}` "
            f"| `{fmt.media_type}` | {ingress} | {fake} |"
        )
    return "\n".join(rows)
