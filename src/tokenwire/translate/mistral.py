"""Mistral chat <-> the standard (§7.1): OpenAI-like, with its own quirks.

The stream side is OpenAI's ``Translator`` unchanged: it already accepts what
Mistral does differently (usage on the finish chunk without being asked, whole
tool calls without ``index``, ``"name": ""`` on later argument fragments,
Magistral's ``content`` arrays with ``thinking`` chunks, the flat
``{"object": "error"}`` error, finish reasons ``model_length`` and ``error``).
The request side differs: ``max_tokens`` instead of ``max_completion_tokens``,
no ``stream_options`` (Mistral rejects unknown fields and streams usage
anyway), and Mistral's shapes for image, document and audio parts.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import request as rq
from ._base import VendorRequest
from ._contract import VendorFormat
from ._request import vendor_parameters
from .openai.ingress import request_from_vendor as _openai_request_from_vendor
from .openai.request import (
    PARAMETERS,
    _data_url,
    _subtype,
    http_headers,
    merge_extension,
    messages_to_openai,
    tools_to_openai,
)
from .openai.stream import Translator as _OpenAITranslator

__all__ = ["FORMAT", "Translator", "build_request", "request_from_vendor"]


class Translator(_OpenAITranslator):
    """A Mistral chat SSE body -> standard events (see ``translate.openai.Translator``)."""

    name = "mistral"


def _part_to_mistral(part: rq.Part, k: int) -> dict[str, Any]:
    if isinstance(part, rq.TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, rq.ImagePart):
        return {"type": "image_url", "image_url": _data_url(part.media_type, part.data)}
    if isinstance(part, rq.AudioPart):
        return {"type": "input_audio", "input_audio": part.data}
    return {
        "type": "document_url",
        "document_url": _data_url(part.media_type, part.data),
        "document_name": f"document-{k}.{_subtype(part.media_type)}",
    }


# The signature is `_contract.RequestBuilder`, the same for every vendor.
def build_request(
    req: rq.Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
) -> VendorRequest:
    """The ``POST {base_url}/chat/completions`` request for ``req`` (Mistral's shape).

    ``base_url`` includes the version (``https://api.mistral.ai/v1``).
    ``extensions["vendor:mistral"]`` is merged into the body last (shallow),
    except ``stream``. Returns a ``VendorRequest``; raises ``InvalidRequest``
    for an extension that is not an object.
    """
    body: dict[str, Any] = {
        "model": upstream_model or req.model,
        "messages": messages_to_openai(req.messages, _part_to_mistral),
        "stream": True,
    }
    tools = tools_to_openai(req.tools)
    if tools is not None:
        body["tools"] = tools
    # Mistral calls max_completion_tokens max_tokens.
    names = {**PARAMETERS, "max_tokens": "max_tokens"}
    body.update(vendor_parameters(req.parameters, names, keep_empty=True))
    merge_extension(body, req.extension("vendor:mistral"), "vendor:mistral")
    return VendorRequest(
        url=base_url.rstrip("/") + "/chat/completions",
        headers=http_headers(api_key, headers),
        body=msgspec.json.encode(body),
    )


def request_from_vendor(body: Any) -> rq.Request:
    """A standard request from a Mistral chat request body.

    Mistral's body is OpenAI's with a few renamed fields; unmapped fields
    travel in ``extensions["vendor:mistral"]``. Raises ``InvalidRequest``.
    """
    return _openai_request_from_vendor(body, vendor="mistral")


#: The Mistral chat vendor format.
FORMAT = VendorFormat(
    name="mistral",
    title="Mistral chat",
    transport="http-sse",
    media_type="text/event-stream",
    translator=Translator,
    build_request=build_request,
    endpoint="POST {base_url}/chat/completions",
    fake="tokenwire.testing.mistral",
)
