"""The answer call: candidate order, which failures fall back, and what is recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from switchyard.protocol.errors import (
    ContextWindowExceededError,
    RouteNotFoundError,
    RouterError,
    UpstreamConnectionError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage

Rig = Any


def answer(text: str = "ok", usage: Usage | None = None) -> ChatResponse:
    return ChatResponse(
        id="r", model="m", content=[TextPart(text=text)], usage=usage or Usage(input_tokens=10, output_tokens=5)
    )


def request(route: str, text: str = "hi") -> ChatRequest:
    return ChatRequest(model=route, messages=[Message.of("user", text)])


def status(code: int) -> UpstreamStatusError:
    return UpstreamStatusError(f"HTTP {code}", upstream_status=code, body=b'{"error": {"message": "x"}}')


async def test_order_is_route_targets_then_fallbacks(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [status(503)], "pricey": [UpstreamConnectionError("refused")], "spare": [answer("from spare")]})
    done = await r.engine.complete(request("pair"))
    assert done.response.text == "from spare"
    assert done.target == "spare"
    assert r.backend.targets_called() == ["cheap", "pricey", "spare"]
    record = r.records[-1]
    assert record.candidates == ["cheap", "pricey", "spare"]
    assert [(a.target, a.ok, a.status) for a in record.attempts] == [
        ("cheap", False, 503),
        ("pricey", False, 502),
        ("spare", True, None),
    ]
    assert record.fallbacks_tried == 2
    assert record.selected == "spare" and record.selected_model == "m-spare"
    assert record.status == 200 and record.error is None


async def test_passthrough_falls_back_to_its_fallbacks(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [UpstreamTimeoutError("slow")], "spare": [answer()]})
    done = await r.engine.complete(request("solo"))
    assert done.target == "spare"
    assert r.records[-1].candidates == ["cheap", "spare"]


@pytest.mark.parametrize(
    "error",
    [
        status(500),
        status(502),
        status(503),
        status(429),
        status(408),
        UpstreamConnectionError("reset"),
        UpstreamTimeoutError("read timeout"),
        UpstreamProtocolError("garbage"),
        ContextWindowExceededError("too long", upstream_status=400, status=400),
    ],
    ids=lambda e: f"{type(e).__name__}-{getattr(e, 'upstream_status', '')}",
)
async def test_failures_that_fall_back(rig: Callable[..., Rig], error: Exception) -> None:
    r = rig({"cheap": [error], "pricey": [answer("second")], "spare": [answer()]})
    assert (await r.engine.complete(request("pair"))).response.text == "second"


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
async def test_client_errors_do_not_fall_back(rig: Callable[..., Rig], code: int) -> None:
    r = rig({"cheap": [status(code)], "pricey": [answer()], "spare": [answer()]})
    with pytest.raises(UpstreamStatusError) as err:
        await r.engine.complete(request("pair"))
    assert err.value.upstream_status == code and err.value.target == "cheap"
    assert r.backend.targets_called() == ["cheap"]
    record = r.records[-1]
    assert record.status == code and record.error == f"HTTP {code}"
    assert [a.target for a in record.attempts] == ["cheap"]


async def test_every_candidate_failing_raises_the_last_error(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [status(500)], "pricey": [status(503)], "spare": [UpstreamConnectionError("down")]})
    with pytest.raises(UpstreamConnectionError, match="down"):
        await r.engine.complete(request("pair"))
    (record,) = r.records
    assert record.status == 502
    assert record.fallbacks_tried == 2
    assert record.selected is None
    assert len(record.attempts) == 3 and not any(a.ok for a in record.attempts)


async def test_streams_fall_back_until_the_first_content(rig: Callable[..., Rig]) -> None:
    from switchyard.protocol.errors import ErrorInfo
    from switchyard.protocol.stream import MessageStart, MessageStop, StreamError, TextDelta

    r = rig(
        {
            "cheap": [status(503)],
            # An in-band error before any content is a failed attempt too.
            "pricey": [[MessageStart(id="p"), StreamError(error=ErrorInfo(status=500, message="boom"))]],
            "spare": [[MessageStart(id="s"), TextDelta(text="made it"), MessageStop()]],
        }
    )
    events = await r.engine.stream(request("pair"))
    text = "".join(e.text for e in [e async for e in events] if isinstance(e, TextDelta))
    assert text == "made it"
    record = r.records[-1]
    assert [(a.target, a.ok) for a in record.attempts] == [("cheap", False), ("pricey", False), ("spare", True)]
    assert record.attempts[1].error == "boom"


async def test_empty_upstream_stream_falls_back(rig: Callable[..., Rig]) -> None:
    from switchyard.protocol.stream import MessageStop, TextDelta

    r = rig({"cheap": [[]], "pricey": [[TextDelta(text="x"), MessageStop()]], "spare": [answer()]})
    events = await r.engine.stream(request("pair"))
    got = [e async for e in events]
    assert got[0] == TextDelta(text="x")
    assert r.records[-1].attempts[0].error == "cheap: upstream stream was empty"


async def test_unknown_route_and_missing_model(rig: Callable[..., Rig]) -> None:
    from switchyard.protocol.errors import InvalidRequestError

    r = rig({})
    with pytest.raises(RouteNotFoundError) as err:
        await r.engine.complete(request("ghost"))
    assert err.value.status == 404 and "pair, solo" in err.value.message
    with pytest.raises(InvalidRequestError):
        await r.engine.complete(request(""))
    assert r.backend.calls == [] and r.records == []


async def test_aliases_and_default_route(rig: Callable[..., Rig]) -> None:
    routes = {"solo": {"type": "passthrough", "target": "cheap", "aliases": ["gpt-4o"]}}
    r = rig({"cheap": [answer()]}, routes=routes, default_route="solo")
    assert (await r.engine.complete(request("gpt-4o"))).record.route == "solo"
    assert (await r.engine.complete(request("anything-else"))).record.route == "solo"


class _Crashing:
    async def route(self, *args: Any) -> Any:
        raise ZeroDivisionError("oops")


class _Wild:
    async def route(self, *args: Any) -> Any:
        from switchyard.routers.base import Decision

        return Decision(candidates=("nowhere",), source="wild")


@pytest.mark.parametrize(("router", "message"), [(_Crashing(), "ZeroDivisionError: oops"), (_Wild(), "unknown target")])
async def test_router_failures_are_router_errors(rig: Callable[..., Rig], router: Any, message: str) -> None:
    r = rig({"cheap": [answer()]})
    r.engine.routes["solo"].router = router
    with pytest.raises(RouterError, match=message) as err:
        await r.engine.complete(request("solo"))
    assert err.value.status == 500
    assert r.backend.calls == []


async def test_decide_makes_no_answer_call(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [answer()]})
    record = await r.engine.decide(request("pair"))
    assert record.selected == "cheap" and record.selected_model == "m-cheap"
    assert record.candidates == ["cheap", "pricey", "spare"]
    assert record.source == "random"
    assert r.backend.calls == []


async def test_raw_body_is_offered_for_replay_only_when_unchanged(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [answer()]})
    body = b'{"model": "solo", "messages": [{"role": "user", "content": "hi"}], "top_k": 3}'
    reply = await r.engine.handle("openai_chat", body, {"Anthropic-Beta": "x", "X-Other": "y"})
    assert reply.status == 200
    (_, _, _, options) = r.backend.calls[-1]
    assert options.raw_body == {"model": "solo", "messages": [{"role": "user", "content": "hi"}], "top_k": 3}
    assert options.raw_format == "openai_chat"
    assert dict(options.headers) == {"anthropic-beta": "x"}
    # The library API has no raw body.
    await r.engine.complete(request("solo"))
    assert r.backend.calls[-1][3].raw_body is None
