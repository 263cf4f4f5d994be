"""One resolved model per request (issue 30): the model a key is checked for is the model served.

The audit: on the Gemini route the key check read the model from the URL, but
a standard body there is served by the model in the body; and a URL model with
``:`` (``llama3:70b``, as Ollama names them) was cut at the first ``:`` by the
check and at ``:streamGenerateContent`` by the route. Now the check runs on
the parsed request, the same object the route serves.

The table (``tests/vectors/tenant/model-resolution.json``): every stream route x
each body type it takes x model spellings.
For each, the key that may use every model is served some model; the tenant's
key must then be served that same model when its list has it, and refused
with a 403 naming exactly that model when not.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from tests.hostile.tenant_rig import Rig, body, served_model

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway.production import ProductionMiddleware
from tokenwire.server import StreamEndpoint

VECTOR = json.loads(
    (
        Path(__file__).resolve().parents[1] / "vectors" / "tenant" / "model-resolution.json"
    ).read_text()
)
#: Configured models (all demo-served). The tenant may use two of them.
MODELS = tuple(VECTOR["models"])
TENANT = VECTOR["tenant_models"]
STANDARD_OUT = {"accept": 'text/event-stream; profile="llm-stream-1.0"'}
GEMINI = "/v1beta/models/{}:streamGenerateContent"
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def _spelled(template: Any, model: str) -> Any:
    """``template`` with every ``"$MODEL"`` (in a string) spelled ``model``."""
    if isinstance(template, str):
        return template.replace("$MODEL", model)
    if isinstance(template, dict):
        return {k: _spelled(v, model) for k, v in template.items()}
    if isinstance(template, list):
        return [_spelled(v, model) for v in template]
    return template


def _cases() -> list[tuple[str, str, str, str, Any]]:
    """(id, path, content type, model spelled, payload) for every route x spelling."""
    return [
        (
            f"{route['name']}-{model}",
            _spelled(route["path"], model),
            route["content_type"],
            model,
            _spelled(route["body"], model),
        )
        for route in VECTOR["routes"]
        for model in MODELS
    ]


CASES = _cases()
assert len(CASES) == 9 * 4  # the routes and body types of the vector, x 4 spellings


def test_every_route_serves_the_model_it_checked() -> None:
    rig = Rig({"ops": {}, "tenant": {"models": TENANT}}, MODELS)

    async def run() -> list[str]:
        problems: list[str] = []
        for case, path, ctype, model, payload in CASES:
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
