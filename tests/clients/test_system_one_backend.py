"""The System One client (``format: system_one``) against the fake decision model, in process."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from switchyard.clients.system_one import SystemOneBackend, decode, endpoint
from switchyard.protocol.call import CallOptions
from switchyard.protocol.decision import ChoiceQuestion
from switchyard.protocol.errors import (
    RouterError,
    UpstreamConnectionError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.testing import FakeUpstream

TARGET = TargetInfo(name="jev", model="jev-latest", client="ts", format="system_one")
QUESTION = ChoiceQuestion(instructions="Who fits?", options={"easy": "typo fixes", "hard": "race conditions"})


def ask(text: str, question: ChoiceQuestion | None = QUESTION) -> ChatRequest:
    return ChatRequest(messages=[Message.of("user", text)], choice=question)


def backend(transport: httpx.AsyncBaseTransport, key: str | None = "secret-key") -> SystemOneBackend:
    return SystemOneBackend("ts", "http://decisions.test/v1", api_key=key, transport=transport)


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("https://api.typesafe.ai/v1", "https://api.typesafe.ai/v1/systemone"),
        ("https://api.typesafe.ai/v1/", "https://api.typesafe.ai/v1/systemone"),
        ("https://api.typesafe.ai", "https://api.typesafe.ai/v1/systemone"),
        ("https://api.typesafe.ai/v1/systemone", "https://api.typesafe.ai/v1/systemone"),
        ("https://openrouter.ai/api/alpha/decisions", "https://openrouter.ai/api/alpha/decisions"),
    ],
)
def test_endpoint(base: str, url: str) -> None:
    assert endpoint(base) == url


async def test_asks_the_question_and_reads_the_typed_answer() -> None:
    fake = FakeUpstream()
    client = backend(httpx.ASGITransport(app=fake))
    response = await client.complete(ask("please fix the race conditions [route:hard@0.8]"), TARGET, CallOptions())
    await client.aclose()
    (sent,) = fake.received
    assert sent.path == "/v1/systemone"
    assert sent.headers["authorization"] == "Bearer secret-key"
    assert sent.body["model"] == "jev-latest"
    assert sent.body["state"] == "please fix the race conditions [route:hard@0.8]"
    assert sent.body["questions"] == {
        "route": {
            "type": "choice",
            "instructions": "Who fits?",
            "criteria": {"easy": "typo fixes", "hard": "race conditions"},
        }
    }
    assert response.choice is not None
    assert response.choice.choice == "hard"
    assert response.choice.probabilities == {"easy": pytest.approx(0.2), "hard": pytest.approx(0.8)}
    assert response.model == "jev-1.13.0"
    assert response.usage.input_tokens > 0


async def test_refusals_are_typed_errors_without_the_key() -> None:
    fake = FakeUpstream()
    unauthorised = backend(httpx.ASGITransport(app=fake), key=None)
    with pytest.raises(UpstreamStatusError) as err:
        await unauthorised.complete(ask("x"), TARGET, CallOptions())
    assert err.value.upstream_status == 401
    one_option = ChoiceQuestion.model_construct(instructions="Who?", options={"only": "one"})
    with pytest.raises(UpstreamStatusError) as err:
        await backend(httpx.ASGITransport(app=fake)).complete(ask("x", one_option), TARGET, CallOptions())
    assert err.value.upstream_status == 422
    assert "questions.route.criteria" in err.value.message
    assert "secret-key" not in err.value.message


async def test_a_request_without_a_question_is_a_router_bug() -> None:
    with pytest.raises(RouterError):
        await backend(httpx.ASGITransport(app=FakeUpstream())).complete(ask("x", None), TARGET, CallOptions())


def _transport(handler: Any) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


async def test_transport_failures_and_timeouts() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(UpstreamConnectionError):
        await backend(_transport(refuse)).complete(ask("x"), TARGET, CallOptions())

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(UpstreamTimeoutError):
        await backend(_transport(slow)).complete(ask("x"), TARGET, CallOptions())


async def test_non_json_answer_is_a_protocol_error() -> None:
    html = _transport(lambda request: httpx.Response(200, text="<html>maintenance</html>"))
    with pytest.raises(UpstreamProtocolError):
        await backend(html).complete(ask("x"), TARGET, CallOptions())


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"answers": {}},
        {"answers": {"route": {"type": "noul", "noul": 0.3}}},
        {"answers": {"route": {"type": "choice", "choice": "easy"}}},
        {"answers": {"route": {"type": "choice", "choice": "easy", "probabilities": {"easy": "high"}}}},
        {"answers": {"route": {"type": "choice", "choice": "easy", "probabilities": {"easy": 1}, "confidence": "x"}}},
    ],
)
def test_decode_refuses_what_is_not_a_choice_answer(body: Any) -> None:
    with pytest.raises(UpstreamProtocolError):
        decode(body, "jev")


def test_decode_keeps_usage_and_confidence() -> None:
    body = {
        "model": "jev-1.13.0",
        "answers": {
            "route": {"type": "choice", "choice": "a", "confidence": 0.81, "probabilities": {"a": 0.9, "b": 0.1}}
        },
        "usage": {"input_tokens": 318, "output_tokens": 34},
    }
    response = decode(json.loads(json.dumps(body)), "jev", "req-1")
    assert (response.id, response.usage.input_tokens, response.usage.output_tokens) == ("req-1", 318, 34)
    assert response.choice is not None and response.choice.confidence == 0.81
