"""One resolved model per request (issue 30): the model a key is checked for is the model served.

The audit: on the Gemini route the key check read the model from the URL, but
a standard body there is served by the model in the body; and a URL model with
``:`` (``llama3:70b``, as Ollama names them) was cut at the first ``:`` by the
check and at ``:streamGenerateContent`` by the route. Now the check runs on
the parsed request, the same object the route serves.

The table: every stream route x each body type it takes x model spellings.
For each, the key that may use every model is served some model; the tenant's
key must then be served that same model when its list has it, and refused
with a 403 naming exactly that model when not.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from tests.hostile.tenant_rig import Rig, body, served_model

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway.production import ProductionMiddleware
from tokenwire.server import StreamEndpoint

#: Configured models (all demo-served). The tenant may use two of them.
MODELS = ("allowed", "secret", "llama3", "llama3:70b")
TENANT = ["allowed", "llama3"]
STANDARD_OUT = {"accept": 'text/event-stream; profile="llm-stream-1.0"'}
#: How each route's own vendor body names a model.
VENDOR_BODIES: dict[str, Callable[[str], dict[str, Any]]] = {
    "/v1/chat/completions": lambda m: {
        "model": m,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    },
    "/v1/messages": lambda m: {
        "model": m,
        "stream": True,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    },
    "/v1/responses": lambda m: {"model": m, "stream": True, "input": "hi"},
}
GEMINI = "/v1beta/models/{}:streamGenerateContent"
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def _cases() -> list[tuple[str, str, str, str, Any]]:
    """(id, path, content type, model spelled, payload)."""
    out: list[tuple[str, str, str, str, Any]] = []
    for model in MODELS:
        out.append((f"stream-std-{model}", "/v1/stream", "standard", model, body(model)))
        for path, make in VENDOR_BODIES.items():
            out.append((f"{path}-vendor-{model}", path, "vendor", model, make(model)))
            out.append((f"{path}-std-{model}", path, "standard", model, body(model)))
        # Gemini: the model is in the URL (a ':' in it kept: the route splits at
        # the last ':' that names a method) ...
        out.append((f"gemini-vendor-{model}", GEMINI.format(model), "vendor", model, GEMINI_BODY))
        # ... or, with a standard body, in the body, whatever the URL says.
        out.append(
            (f"gemini-std-{model}", GEMINI.format("allowed"), "standard", model, body(model))
        )
    return out


CASES = _cases()


def test_every_route_serves_the_model_it_checked() -> None:
    rig = Rig({"ops": {}, "tenant": {"models": TENANT}}, MODELS)

    async def run() -> list[str]:
        problems: list[str] = []
        for case, path, kind, model, payload in CASES:
            ctype = "application/llm-request+json" if kind == "standard" else "application/json"
            headers = {**STANDARD_OUT, **rig.auth("ops")}
            ops = await rig.call(path, payload, headers=headers, content_type=ctype)
            served = served_model(ops)
            if served != model:
                problems.append(f"{case}: the open key was served {served!r} ({ops.status})")
                continue
            headers = {**STANDARD_OUT, **rig.auth("tenant")}
            tenant = await rig.call(path, payload, headers=headers, content_type=ctype)
            if model in TENANT:
                if served_model(tenant) != model:
                    problems.append(f"{case}: tenant got {tenant.status}, not {model!r}")
            elif tenant.status != 403:
                problems.append(f"{case}: tenant got {tenant.status} for {served!r}")
            else:
                message = json.loads(tenant.body)["error"]["message"]
                if repr(model) not in message:
                    problems.append(f"{case}: the refusal names another model: {message}")
        return problems

    assert asyncio.run(run()) == []


@pytest.mark.parametrize(
    ("path", "payload", "ctype"),
    [
        # The audit's first probe: a standard body on the Gemini route.
        (GEMINI.format("allowed"), body("secret"), "application/llm-request+json"),
        # The second: a ':' in the URL model, cut at the first ':' by the old check.
        (GEMINI.format("llama3:70b"), GEMINI_BODY, "application/json"),
    ],
    ids=["standard-body-on-gemini", "colon-in-gemini-model"],
)
def test_a_tenant_cannot_reach_a_model_outside_its_list(
    path: str, payload: Any, ctype: str
) -> None:
    rig = Rig({"tenant": {"models": TENANT}}, MODELS)

    async def run() -> int:
        refused = await rig.call(path, payload, headers=rig.auth("tenant"), content_type=ctype)
        return refused.status

    assert asyncio.run(run()) == 403


def test_a_model_outside_the_list_is_refused_alike_whether_configured_or_not() -> None:
    # A tenant cannot map the configured models by 403 against 404.
    rig = Rig({"tenant": {"models": TENANT}}, MODELS)

    async def run() -> list[tuple[int, str]]:
        out = []
        for model in ("secret", "no-such-model"):
            answer = await rig.call("/v1/stream", body(model), headers=rig.auth("tenant"))
            error = json.loads(answer.body)["error"]
            out.append((answer.status, error["message"].replace(repr(model), "M")))
        return out

    first, second = asyncio.run(run())
    assert first == second and first[0] == 403


def test_a_route_without_the_admission_hook_fails_closed() -> None:
    # A stream route added without StreamEndpoint's admission hook still cannot
    # serve a model outside the key's list: the metered provider admits it itself.
    rig = Rig({"tenant": {"models": TENANT, "token_budget": 1000}}, MODELS)
    bare = ProductionMiddleware(StreamEndpoint(rig.gateway.providers), rig.gateway.production)
    rig.app = bare  # type: ignore[assignment]

    async def run() -> tuple[list[ev.Event], list[ev.Event]]:
        refused = await rig.call("/v1/stream", body("secret"), headers=rig.auth("tenant"))
        served = await rig.call("/v1/stream", body("allowed"), headers=rig.auth("tenant"))
        await rig.settled()
        return list(tokenwire.iter_events(refused.body)), list(tokenwire.iter_events(served.body))

    refused, served = asyncio.run(run())
    assert not any(isinstance(e, ev.ContentDelta) for e in refused)
    errors = [e for e in refused if isinstance(e, ev.ErrorEvent)]
    assert errors and "'secret'" in errors[0].message
    assert isinstance(refused[-1], ev.StreamEnd)
    assert any(isinstance(e, ev.ContentDelta) for e in served)
    # ... and its tokens were metered and settled like any other stream's.
    state = rig.gateway.production.limits._state["tenant"]  # type: ignore[attr-defined]
    assert 0 < state[4] < 1000
