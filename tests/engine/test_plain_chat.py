"""The plain Chat lane (switchyard/engine/plain_chat.py): a stand-in only for bodies the decoder
accepts, the same session, and through the engine the same reply and record as the full decode."""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from switchyard.engine import plain_chat
from switchyard.engine.session import identify
from switchyard.protocol.errors import (
    InvalidRequestError,
    UpstreamConnectionError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.protocol.messages import ReasoningPart, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.stream import MessageStart, TextDelta
from switchyard.wire.openai_chat.request import decode_request

Rig = Any  # tests/engine/conftest.py's

_TEXTS = ["", "hello", "You are terse.", "x" * 3000, "Fix the bug in app.py"]


def _content(rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return None
    if kind == 1:
        return [{"type": "text", "text": rng.choice(_TEXTS)} for _ in range(rng.randrange(3))]
    if kind == 2:  # not plain: an image part, a cache marker, a part without text
        return rng.choice(
            [
                [{"type": "image_url", "image_url": {"url": "https://e.x/a.png"}}],
                [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
                [{"type": "text"}],
                [3],
                7,
            ]
        )
    return rng.choice(_TEXTS)


def _message(rng: random.Random) -> Any:
    role = rng.choice(["system", "developer", "user", "user", "assistant", "tool", "function", "critic"])
    msg: dict[str, Any] = {"role": role, "content": _content(rng)}
    if role == "tool" and rng.random() < 0.9:
        msg["tool_call_id"] = rng.choice(["call_1", 5])
    if role == "assistant":
        roll = rng.random()
        if roll < 0.3:
            args = rng.choice(['{"a": 1}', {"a": 1}, ""])
            msg["tool_calls"] = [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": args}}]
        elif roll < 0.4:
            msg[rng.choice(["reasoning", "reasoning_content", "refusal"])] = "because"
    if rng.random() < 0.1:
        msg["name"] = rng.choice(["bob", 3])
    if rng.random() < 0.05:
        return "not a message"
    return msg


def _body(rng: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "solo", "messages": [_message(rng) for _ in range(rng.randrange(6))]}
    optional: dict[str, list[Any]] = {
        "temperature": [0.2, 1, "hot", True],
        "top_p": [0.9, None],
        "max_tokens": [256, 25.0, True, -1],
        "max_completion_tokens": [100, "100"],
        "seed": [7, 7.5],
        "stop": ["\n", ["a", "b"], [1]],
        "stream": [False, True, "yes"],
        "stream_options": [{"include_usage": True}, None, 3],
        "user": ["u-1", 5, ""],
        "metadata": [{"session_id": "s-1"}, {"session_id": 4}, "m"],
        "prompt_cache_key": ["pck-1", 9, ""],
        "response_format": [{"type": "json_object"}, "json"],
        "parallel_tool_calls": [True, "yes"],
        "tool_choice": ["auto", "required", {"type": "function", "function": {"name": "ls"}}, "bogus"],
        "tools": [
            [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
            [{"type": "function", "function": {"name": "ls", "description": 3}}],
            [{"type": "custom", "custom": {"name": "apply_patch"}}],
        ],
        "reasoning_effort": ["low"],
        "top_k": [40],
    }
    for key, values in optional.items():
        if rng.random() < 0.25:
            body[key] = rng.choice(values)
    if rng.random() < 0.03:
        body["messages"] = "hi"
    if rng.random() < 0.03:
        body["model"] = rng.choice([None, 3, ""])
    return body


def _standin_or_error(body: dict[str, Any]) -> ChatRequest | InvalidRequestError | None:
    try:
        return plain_chat.standin(body)
    except InvalidRequestError as exc:
        return exc


def test_a_stand_in_only_for_bodies_the_decoder_accepts_and_the_same_session() -> None:
    rng = random.Random(20261202)
    plain = refused = 0
    for _ in range(4000):
        body = _body(rng)
        original = copy.deepcopy(body)
        got = _standin_or_error(body)
        assert body == original  # read, never changed
        try:
            decoded: ChatRequest | InvalidRequestError = decode_request(copy.deepcopy(body))
        except InvalidRequestError as exc:
            decoded = exc
        if isinstance(got, InvalidRequestError):  # strict.check_body: the decoder's own first check
            assert isinstance(decoded, InvalidRequestError), body
            assert (got.message, got.param) == (decoded.message, decoded.param)
            refused += 1
            continue
        if got is None:
            continue
        assert isinstance(decoded, ChatRequest), (body, decoded)
        plain += 1
        # Reasoning is what a replaying backend reads of the messages (clients/backend.py replays).
        assert not any(isinstance(p, ReasoningPart) for m in decoded.messages for p in m.content), body
        assert (got.model, got.stream, got.include_usage, got.origin) == (
            decoded.model,
            decoded.stream,
            decoded.include_usage,
            decoded.origin,
        )
        for derive in (True, False):
            lane = plain_chat.view(body, {}, {"solo": ()}, _route, derive=derive)
            if not body.get("model"):
                assert lane is None  # no route named: the full decode (and its error)
                continue
            assert lane is not None
            expected = identify({}, decoded, derive=derive)
            assert lane[1] == expected, body
    assert plain >= 100 and refused >= 10, (plain, refused)  # both kinds were exercised (seeded)


def _route(_model: str) -> Any:
    """A route lookup that finds the route ``solo`` for any model (the lane reads its name)."""

    class Found:
        name = "solo"

    return Found()


def test_the_common_agent_shapes_are_plain() -> None:
    body = {
        "model": "solo",
        "messages": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": [{"type": "text", "text": "List the files"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        ],
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": 512,
    }
    request = plain_chat.standin(body)
    assert request is not None and request.stream and request.include_usage
    lane = plain_chat.view(body, {}, {"solo": ()}, _route, derive=True)
    assert lane is not None and lane[1].turn_index == 1 and lane[1].source == "derived"


@pytest.mark.parametrize(
    "headers",
    [{"x-switchyard-session-id": "s"}, {"x-switchyard-require": "eu"}, {"x-claude-code-session-id": "s"}],
)
def test_headers_that_read_the_request_take_the_full_decode(headers: dict[str, str]) -> None:
    body = {"model": "solo", "messages": [{"role": "user", "content": "hi"}]}
    assert plain_chat.view(body, headers, {"solo": ()}, _route, derive=True) is None


def _relaying(backend: Any) -> Any:
    """The rig's scripted backend, declared to replay the caller's body (as HttpBackend does)."""
    relaying = type("Relaying", (type(backend),), {"replays_caller_body": True})
    return relaying(backend.script)


_USAGE = Usage(input_tokens=12, output_tokens=3)


def _answer() -> ChatResponse:
    return ChatResponse(id="r1", model="m-cheap", content=[TextPart(text="done")], stop_reason="end_turn", usage=_USAGE)


def _strip(record: Any) -> dict[str, Any]:
    out: dict[str, Any] = record.to_dict()
    for key in ("request_id", "ts", "overhead_ms", "duration_ms"):
        out.pop(key)
    for attempt in out["attempts"]:
        attempt.pop("elapsed_ms")
    for skip in out["skipped"]:
        skip.pop("retry_in_s")  # a time too: the breaker's cooldown left
    return out


async def _serve(rig: Callable[..., Rig], relay: bool, body: dict[str, Any]) -> tuple[Any, list[Any], Any]:
    made = rig({"cheap": [_answer()], "spare": [_answer()]})
    backend = _relaying(made.backend) if relay else made.backend
    for target in made.engine.targets.values():
        target.backend = backend
    made.engine._plain = plain_chat.relay_routes(made.engine.routes.values(), made.engine.targets)
    reply = await made.engine.handle("openai_chat", orjson.dumps(body), {"content-type": "application/json"})
    return reply, made.records, backend


@pytest.mark.parametrize("stream", [False, True])
async def test_the_lane_answers_and_records_as_the_full_decode(rig: Callable[..., Rig], stream: bool) -> None:
    body = {
        "model": "solo",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "stream": stream,
        "user": "u-7",
        "top_k": 40,
    }
    lane_reply, lane_records, lane_backend = await _serve(rig, True, body)
    full_reply, full_records, full_backend = await _serve(rig, False, body)
    if stream:
        assert lane_reply.stream is not None and full_reply.stream is not None
        lane_bytes = b"".join([c async for c in lane_reply.stream])
        full_bytes = b"".join([c async for c in full_reply.stream])
        assert lane_bytes.replace(b"\n", b"").count(b"done") == full_bytes.replace(b"\n", b"").count(b"done") == 1
    else:
        assert lane_reply.body == full_reply.body
    assert [_strip(r) for r in lane_records] == [_strip(r) for r in full_records]
    assert lane_records[0].session_id == "u-7"
    _, _, lane_request, lane_options = lane_backend.calls[0]
    _, _, full_request, full_options = full_backend.calls[0]
    assert lane_request.messages == [] and len(full_request.messages) == 2  # the stand-in went up
    assert lane_options.raw_body == full_options.raw_body == body  # the caller's body, to replay


async def test_a_known_context_window_takes_the_full_decode(rig: Callable[..., Rig]) -> None:
    body = {"model": "solo", "messages": [{"role": "user", "content": "hi"}]}
    made = rig({"cheap": [_answer()]})
    engine = made.engine
    for target in engine.targets.values():
        target.backend = _relaying(made.backend)
    relaying = plain_chat.relay_routes(engine.routes.values(), engine.targets)
    assert plain_chat.view(body, {}, relaying, engine.route, derive=True) is not None
    cheap = engine.targets["cheap"]
    cheap.info = cheap.info.model_copy(update={"context_window": 8192})  # e.g. read from the upstream at start-up
    assert plain_chat.view(body, {}, relaying, engine.route, derive=True) is None


def test_only_passthroughs_to_relaying_chat_backends_relay(rig: Callable[..., Rig]) -> None:
    made = rig({"cheap": [_answer()]})
    engine = made.engine
    assert plain_chat.relay_routes(engine.routes.values(), engine.targets) == {}  # the scripted one replays nothing
    relaying = _relaying(made.backend)
    for target in engine.targets.values():
        target.backend = relaying
    found = plain_chat.relay_routes(engine.routes.values(), engine.targets)
    assert set(found) == {"solo"}  # "pair" is a random router: it is never a relay
    assert [t.info.name for t in found["solo"]] == ["cheap", "spare"]


_UPSTREAM_ANSWERS = {
    "text": {"content": "done", "refusal": None},
    "tool call": {
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"p": 1}'}}],
    },
    "leaked markup": {"content": "<tool_call><function=ls></function></tool_call>"},
    "reasoning (not plain)": {"content": "done", "reasoning_content": "thought"},
}


async def _serve_http(rig: Callable[..., Rig], lane: bool, message: dict[str, Any]) -> tuple[Any, list[Any], Any]:
    """The engine over a real HttpBackend (its answer served by an httpx mock transport)."""
    import httpx

    from switchyard.clients.backend import HttpBackend

    answer = {
        "id": "chatcmpl-7",
        "object": "chat.completion",
        "created": 1735689600,
        "model": "m-cheap-served",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}},
        "system_fingerprint": "fp_1",
    }
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=answer))
    made = rig({})
    backend = HttpBackend("up", "http://up.test/v1", transport=transport)
    for target in made.engine.targets.values():
        target.backend = backend
    relaying = plain_chat.relay_routes(made.engine.routes.values(), made.engine.targets)
    made.engine._plain = relaying if lane else {}
    body = {"model": "solo", "messages": [{"role": "user", "content": "hi"}]}
    reply = await made.engine.handle("openai_chat", orjson.dumps(body), {"content-type": "application/json"})
    await backend.aclose()
    return reply, made.records, made.engine


@pytest.mark.parametrize("kind", list(_UPSTREAM_ANSWERS))
async def test_a_relayed_answer_replies_records_and_flags_as_the_decoded_one(
    rig: Callable[..., Rig], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switchyard.clients import backend as backend_module

    relayed: list[Any] = []

    def counted(body: dict[str, Any]) -> Any:
        relayed.append(backend_module_plain(body))
        return relayed[-1]

    backend_module_plain = backend_module.plain_answer
    monkeypatch.setattr(backend_module, "plain_answer", counted)
    lane_reply, lane_records, lane_engine = await _serve_http(rig, True, _UPSTREAM_ANSWERS[kind])
    assert [r is not None for r in relayed] == [kind != "reasoning (not plain)"]  # the relay was taken
    full_reply, full_records, full_engine = await _serve_http(rig, False, _UPSTREAM_ANSWERS[kind])
    assert lane_reply.status == full_reply.status == 200
    assert lane_reply.body == full_reply.body
    assert [_strip(r) for r in lane_records] == [_strip(r) for r in full_records]
    record = lane_records[0]
    assert (record.input_tokens, record.output_tokens, record.cache_read_tokens) == (12, 3, 4)
    assert record.selected_model == "m-cheap" and record.cost_usd
    lane_health, full_health = lane_engine.health.stats(), full_engine.health.stats()
    for stats in (lane_health, full_health):  # how long ago a leak was seen: a time, not a fact
        stats["targets"].get("cheap", {}).get("markup_leaks", {}).pop("last_s_ago", None)
    assert lane_health == full_health
    flagged = "markup_leak" in orjson.dumps(record.to_dict()).decode()
    assert flagged == (kind == "leaked markup")


# -- the relay lane (engine/relay.py): the walk's outcome, whatever the first attempt does -------------

_CLIENT = {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}


def _leaky() -> ChatResponse:
    return ChatResponse(
        id="r2",
        model="m-cheap",
        content=[TextPart(text="<tool_call>x</tool_call>")],
        stop_reason="end_turn",
        usage=_USAGE,
    )


_FIRST_ATTEMPTS: dict[str, tuple[dict[str, Any], list[Any]]] = {
    "answered": ({}, [_answer()]),
    "retried after a 500": (
        {"max_retries": 1, "retry": {"initial_delay_s": 0, "max_delay_s": 0}},
        [UpstreamStatusError("boom", upstream_status=500), _answer()],
    ),
    "fell back after a refused connection": ({}, [UpstreamConnectionError("refused")]),
    "fell back after a timeout": ({}, [UpstreamTimeoutError("slow")]),
    "a 400 goes back to the caller": (
        {},
        [UpstreamStatusError("bad", upstream_status=400, body=b'{"error":{"message":"bad"}}')],
    ),
    "a leak falls back": ({"markup_leak": "fallback"}, [_leaky()]),
    "a bug in the call": ({}, [RuntimeError("bug")]),
    # Streamed, the answer breaks after its first words: twice in a row opens the breaker only
    # when neither opening told it of a success (a stream's success is told at its end).
    "cut short twice": (
        {"circuit_breaker": {"failures": 2, "cooldown_s": 3600}},
        [[MessageStart(id="r1", model="m-cheap"), TextDelta(text="par"), UpstreamConnectionError("cut")]],
    ),
}


async def _relay_or_walk(
    rig: Callable[..., Rig],
    monkeypatch: pytest.MonkeyPatch,
    lane: bool,
    client: dict[str, Any],
    cheap: list[Any],
    stream: bool = False,
) -> tuple[list[Any], list[Any], Any, list[str], int]:
    """Two requests (streamed with ``stream``) through one engine whose plain Chat lane is on,
    the relay lane on or (``lane`` off) always stepping aside for the walk: the replies (or
    errors), records, health and calls."""
    from switchyard.engine import relay

    taken: list[bool] = []
    ready = relay._ready

    def counted(*args: Any) -> bool:
        taken.append(lane and ready(*args))
        return taken[-1]

    monkeypatch.setattr(relay, "_ready", counted)
    llm = {"up": {**_CLIENT, "max_retries": 0, "circuit_breaker": {"failures": 1000}, **client}}
    made = rig({"cheap": list(cheap), "spare": [_answer()]}, llm_clients=llm)
    backend = _relaying(made.backend)
    for target in made.engine.targets.values():
        target.backend = backend
    made.engine._plain = plain_chat.relay_routes(made.engine.routes.values(), made.engine.targets)
    body = orjson.dumps({"model": "solo", "messages": [{"role": "user", "content": "hi"}], "stream": stream})
    replies: list[Any] = []
    for _ in range(2):
        try:
            reply = await made.engine.handle("openai_chat", body, {"content-type": "application/json"})
            varying = ("x-switchyard-request-id", "x-switchyard-overhead-ms")  # an id and a time
            got = reply.body if reply.stream is None else b"".join([c async for c in reply.stream])
            got = re.sub(rb'"created":\d+', b"", got)  # a stream's chunks carry the time
            replies.append((reply.status, got, {k: v for k, v in reply.headers.items() if k not in varying}))
        except Exception as exc:  # a bug in the call reaches the server, as from the walk
            replies.append(repr(exc))
    health = made.engine.health.stats()
    for breaker in health["targets"].values():  # the cooldown left is a time: it moves between two runs
        breaker.pop("open_for_s", None)
    return replies, [_strip(r) for r in made.records], health, backend.targets_called(), sum(taken)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("case", list(_FIRST_ATTEMPTS))
async def test_the_relay_lane_ends_as_the_walk_does(
    rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch, case: str, stream: bool
) -> None:
    client, cheap = _FIRST_ATTEMPTS[case]
    relayed = await _relay_or_walk(rig, monkeypatch, True, client, cheap, stream)
    walked = await _relay_or_walk(rig, monkeypatch, False, client, cheap, stream)
    assert relayed[4] == 2 and walked[4] == 0  # the lane made both first attempts, or none
    for mine, theirs in zip(relayed[:4], walked[:4], strict=True):  # replies, records, health, calls
        assert mine == theirs


@pytest.mark.parametrize("stream", [False, True])
async def test_the_relay_lane_steps_aside_for_a_breaker_that_is_not_closed(
    rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    # The first request's failure opens cheap's breaker: the second is not the lane's to make.
    client = {"circuit_breaker": {"failures": 1, "cooldown_s": 3600}}
    failing = [UpstreamConnectionError("refused"), _answer()]
    relayed = await _relay_or_walk(rig, monkeypatch, True, client, list(failing), stream)
    walked = await _relay_or_walk(rig, monkeypatch, False, client, list(failing), stream)
    assert relayed[4] == 1  # the first request only
    assert relayed[1] == walked[1] and relayed[3] == walked[3] == ["cheap", "spare", "spare"]
    assert [a["target"] for a in relayed[1][1]["attempts"]] == ["spare"]
    assert relayed[1][1]["skipped"][0]["reason"] == "circuit_open"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_cancelled_first_attempt_is_recorded_as_the_walk_records_it(
    rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    import asyncio

    from switchyard.engine import relay

    async def outcome(lane: bool) -> tuple[Any, Any]:
        if not lane:
            monkeypatch.setattr(relay, "_ready", lambda *_: False)
        made = rig({"cheap": [_answer()]})
        calling = asyncio.Event()

        class Stuck(_relaying(made.backend).__class__):  # type: ignore[misc]
            async def complete(self, *args: Any) -> Any:
                calling.set()
                await asyncio.Event().wait()  # never answers: the caller goes away first

            open_stream = complete

        backend = Stuck(made.backend.script)
        for target in made.engine.targets.values():
            target.backend = backend
        made.engine._plain = plain_chat.relay_routes(made.engine.routes.values(), made.engine.targets)
        body = orjson.dumps({"model": "solo", "messages": [{"role": "user", "content": "hi"}], "stream": stream})
        task = asyncio.ensure_future(made.engine.handle("openai_chat", body, {}))
        await asyncio.wait_for(calling.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return [_strip(r) for r in made.records], made.engine.health.stats()

    relayed = await outcome(True)
    monkeypatch.undo()
    walked = await outcome(False)
    assert relayed == walked
    attempt = relayed[0][0]["attempts"][0]
    assert (attempt["target"], attempt["ok"], attempt["status"]) == ("cheap", False, 499)


def test_a_stand_in_is_shared_frozen_and_kept_for_a_bounded_set_of_models() -> None:
    import pydantic

    body = {"model": "solo", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    first, again = plain_chat.standin(body), plain_chat.standin(copy.deepcopy(body))
    assert first is again and isinstance(first, ChatRequest)
    with pytest.raises(pydantic.ValidationError):
        first.model = "other"
    assert plain_chat.standin({**body, "stream": False}) is not first  # its own flags
    for i in range(plain_chat._MAX_STANDINS + 5):  # a caller naming ever new models
        plain_chat.standin({**body, "model": f"m{i}"})
    assert len(plain_chat._STANDINS) <= plain_chat._MAX_STANDINS
