"""Record and error-shape fixes of issue 16 (item 5) and the cap on client-supplied timeouts."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from switchyard.api import Switchyard
from switchyard.clients.backend import Timeouts
from switchyard.protocol.errors import ErrorInfo
from switchyard.protocol.stream import MessageStart, StreamError, TextDelta, ToolCallDelta
from switchyard.wire.openai_responses.stream import ResponsesStreamEncoder

MESSAGES = [{"role": "user", "content": "hi"}]


def _events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                out.append(orjson.loads(line[6:]))
    return out


def test_a_responses_stream_failing_mid_item_never_marks_it_completed() -> None:
    enc = ResponsesStreamEncoder(model="m")
    raw = enc.encode(MessageStart(id="x", model="m")) + enc.encode(TextDelta(text="half an ans"))
    raw += enc.encode(StreamError(error=ErrorInfo(status=502, message="upstream reset")))
    events = _events(raw)
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert done and all(e["item"]["status"] == "incomplete" for e in done)
    final = events[-1]
    assert final["type"] == "response.failed"
    assert [i["status"] for i in final["response"]["output"]] == ["incomplete"]
    assert not any(e.get("item", {}).get("status") == "completed" for e in events)


def test_a_tool_call_cut_short_is_incomplete_too() -> None:
    enc = ResponsesStreamEncoder(model="m")
    raw = enc.encode(ToolCallDelta(index=0, id="call_1", name="ls", arguments='{"pa'))
    raw += enc.encode(StreamError(error=ErrorInfo(status=504, message="stalled")))
    done = [e for e in _events(raw) if e["type"] == "response.output_item.done"]
    assert [e["item"]["status"] for e in done] == ["incomplete"]


def test_a_clean_responses_stream_still_completes_its_items() -> None:
    from switchyard.protocol.stream import MessageStop

    enc = ResponsesStreamEncoder(model="m")
    raw = enc.encode(TextDelta(text="done")) + enc.encode(MessageStop(stop_reason="end_turn"))
    done = [e for e in _events(raw) if e["type"] == "response.output_item.done"]
    assert [e["item"]["status"] for e in done] == ["completed"]


def test_client_timeouts_cannot_exceed_the_operators() -> None:
    operator = Timeouts(connect=5, read=30, total=60)
    merged = operator.merged({"read": 3600, "connect": 100, "total": 10_000})
    assert (merged.connect, merged.read, merged.total) == (5, 30, 60)
    tighter = operator.merged({"read": 2, "connect": 1, "total": 9})
    assert (tighter.connect, tighter.read, tighter.total) == (1, 2, 9)
    assert Timeouts(total=None).merged({"total": 50}).total == 50


def test_an_exhausted_pool_is_reported_as_such(upstream: Any) -> None:
    upstream.app.stall_s = 1.5
    config = {
        "llm_clients": {
            "one": {
                "base_url": f"http://127.0.0.1:{upstream.port}/v1",
                "max_connections": 1,
                "max_retries": 0,
                "timeout": {"connect": 0.3, "read": 5, "total": 5},
                "circuit_breaker": {"failures": 0},
            }
        },
        "targets": {"slow": {"client": "one", "model": "stall-headers"}},
        "routes": {"slow": {"type": "passthrough", "target": "slow"}},
    }
    sy = Switchyard.from_config(config)
    body = orjson.dumps({"model": "slow", "messages": MESSAGES})
    headers = {"content-type": "application/json"}

    async def both() -> list[Any]:
        first = asyncio.ensure_future(sy.dispatch("POST", "/v1/chat/completions", body, headers))
        await asyncio.sleep(0.2)  # the first request holds the only connection
        second = await sy.dispatch("POST", "/v1/chat/completions", body, headers)
        done = [second, await first]
        await sy.aclose()
        return done

    second, first = asyncio.run(both())
    message = orjson.loads(second.body)["error"]["message"]
    assert "connection pool exhausted" in message and "max_connections" in message
    assert "headers" not in message
    # The request that held the connection got the upstream's own answer (a 500 after its stall).
    assert "pool" not in orjson.loads(first.body)["error"]["message"]
