"""Reliability through the proxy and the drop-in client: error bodies, context windows, circuit
breakers, one retry owner, deadlines, mid-stream failures and caller disconnects."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from _proxy import recording_proxy
from _waits import wait_until

import switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, serve_fake

pytestmark = pytest.mark.integration

MESSAGES: Any = [{"role": "user", "content": "hello"}]


def client_cfg(port: int, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": f"http://127.0.0.1:{port}/v1",
        "timeout": {"connect": 0.5, "read": 0.3, "total": 2},
        "max_retries": 1,
        "retry": {"initial_delay_s": 0.02, "max_delay_s": 0.05, "jitter": 0},
        "circuit_breaker": {"failures": 0},
        **extra,
    }


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    app = FakeUpstream([FakeModel("trickle", per_chunk_s=0.15), FakeModel("vllm-small", context_window=2048)])
    app.stall_s = 5.0
    server = serve_fake(app)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def main(fake: Any) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    port = fake.port
    config = {
        "llm_clients": {"up": client_cfg(port), "slow": client_cfg(port, timeout={"read": 5, "total": 10})},
        "targets": {
            "backup": {"client": "up", "model": "fake-backup", "context_window": 131072},
            "auth": {"client": "up", "model": "fail-401"},
            "bad": {"client": "up", "model": "fail-400"},
            "html": {"client": "up", "model": "fail-502-html"},
            "waf": {"client": "up", "model": "fail-403-html"},
            "down": {"client": "up", "model": "fail-500"},
            "overflow": {"client": "up", "model": "overflow-400"},
            "overflow_big": {"client": "up", "model": "overflow-400", "context_window": 8192},
            "vllm_small": {"client": "up", "model": "vllm-small"},
            "stall": {"client": "slow", "model": "stall-headers"},
            "stall_mid": {"client": "slow", "model": "stall-mid"},
            "trickle": {"client": "up", "model": "trickle", "context_window": 1},
            "trickle_total": {"client": "slow", "model": "trickle"},
        },
        "routes": {
            "auth": {"type": "passthrough", "target": "auth", "fallbacks": ["backup"]},
            "bad": {"type": "passthrough", "target": "bad", "fallbacks": ["backup"]},
            "html": {"type": "passthrough", "target": "html"},
            "waf": {"type": "passthrough", "target": "waf", "fallbacks": ["backup"]},
            "down": {"type": "passthrough", "target": "down"},
            "overflow_all": {"type": "passthrough", "target": "overflow", "fallbacks": ["overflow_big"]},
            "overflow_discover": {"type": "passthrough", "target": "overflow", "fallbacks": ["vllm_small", "backup"]},
            "stall": {"type": "passthrough", "target": "stall", "fallbacks": ["backup"]},
            "stall_mid": {"type": "passthrough", "target": "stall_mid"},
            "trickle": {"type": "passthrough", "target": "trickle_total", "fallbacks": ["backup"]},
        },
    }
    with recording_proxy(config) as served:
        yield served


def sdk(server: ServerThread, **kwargs: Any) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=server.base_url, api_key="k", timeout=10, **kwargs)


# -- what the caller sees ------------------------------------------------------------------------


def test_auth_error_carries_the_upstreams_message(main: Any) -> None:
    with sdk(main[0]) as client, pytest.raises(openai.AuthenticationError) as err:
        client.chat.completions.create(model="auth", messages=MESSAGES)
    assert isinstance(err.value.body, dict) and err.value.body["message"] == "invalid api key"
    assert err.value.response.headers["x-should-retry"] == "false"
    assert [a.target for a in main[1][-1].attempts] == ["auth"]


def test_other_4xx_is_returned_unchanged(main: Any, fake: Any) -> None:
    with sdk(main[0]) as client, pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="bad", messages=MESSAGES)
    # Same API family: the upstream's own body, byte for byte.
    assert err.value.response.json() == {
        "error": {"message": "temperature must be <= 2", "type": "BadRequestError", "code": 400, "param": "temperature"}
    }
    record = main[1][-1]
    assert [a.target for a in record.attempts] == ["bad"] and record.selected is None  # no retry, no fallback


def test_html_error_body_never_reaches_the_caller(main: Any) -> None:
    with sdk(main[0]) as client, pytest.raises(openai.APIStatusError) as err:
        client.chat.completions.create(model="html", messages=MESSAGES)
    assert err.value.status_code == 502
    assert "<html" not in err.value.response.text and "502" in err.value.message


def test_html_4xx_is_reencoded_not_relayed(main: Any) -> None:
    with sdk(main[0]) as client, pytest.raises(openai.PermissionDeniedError) as err:
        client.chat.completions.create(model="waf", messages=MESSAGES)
    assert err.value.response.headers["content-type"] == "application/json"
    assert err.value.body == {
        "message": "upstream answered HTTP 403",
        "type": "permission_error",
        "param": None,
        "code": "upstream_error",
    }


def test_every_candidate_overflowing_is_a_400_agents_can_compact_on(main: Any) -> None:
    with sdk(main[0]) as client, pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="overflow_all", messages=MESSAGES)
    assert "maximum context length is 4096" in err.value.message
    record = main[1][-1]
    assert [a.error_class for a in record.attempts] == ["context_overflow", "context_overflow"]


def test_overflow_reads_vllm_max_model_len(main: Any, fake: Any) -> None:
    with sdk(main[0]) as client:
        raw = client.chat.completions.with_raw_response.create(model="overflow_discover", messages=MESSAGES)
    assert raw.headers["x-switchyard-selected-model"] == "backup"
    record = main[1][-1]
    # The overflow said 4096; GET /v1/models said vllm-small has max_model_len 2048: skipped.
    assert [(s.target, s.reason) for s in record.skipped] == [("vllm_small", "context_window")]
    assert fake.app.count("vllm-small") == 0


# -- deadlines -----------------------------------------------------------------------------------


def test_timeout_header_bounds_the_whole_request(main: Any) -> None:
    started = time.perf_counter()
    with sdk(main[0]) as client, pytest.raises(openai.APIStatusError) as err:
        client.chat.completions.create(
            model="stall", messages=MESSAGES, extra_headers={"x-switchyard-timeout": "total=0.3"}
        )
    # Ended by the 0.3 s deadline, not by the 5 s stall (the margin is for a busy machine).
    assert time.perf_counter() - started < 4.0
    assert err.value.status_code == 504 and "request deadline of 0.3s" in err.value.message
    assert main[1][-1].attempts[0].error_class == "timeout"


def test_timeout_header_read_override(main: Any) -> None:
    started = time.perf_counter()
    with sdk(main[0]) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="stall", messages=MESSAGES, extra_headers={"x-switchyard-timeout": "read=0.2"}
        )
    # Two attempts cut at 0.2 s each instead of the client's 5 s, then the backup.
    assert time.perf_counter() - started < 4.0  # not 2 x 5 s (margin for a busy machine)
    assert raw.headers["x-switchyard-selected-model"] == "backup"
    assert [a.target for a in main[1][-1].attempts] == ["stall", "stall", "backup"]


@pytest.mark.parametrize("value", ["0", "-3", "soon", "total=1, idle=2", "read=", "nan"])
def test_bad_timeout_header_is_a_400(main: Any, value: str) -> None:
    resp = httpx.post(
        f"{main[0].base_url}/chat/completions",
        json={"model": "stall", "messages": MESSAGES},
        headers={"x-switchyard-timeout": value},
        timeout=5,
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "x-switchyard-timeout"


def test_stream_total_deadline_ends_with_an_error_event(main: Any) -> None:
    before = main[0].switchyard.stats()["counters"]["mid_stream_failures"]
    started = time.perf_counter()
    text = ""
    with sdk(main[0]) as client:
        stream = client.chat.completions.create(
            model="trickle",
            messages=[{"role": "user", "content": "one two three four five six seven eight nine ten"}],
            stream=True,
            extra_headers={"x-switchyard-timeout": "0.6"},
        )
        with pytest.raises(openai.APIError) as err:
            for chunk in stream:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
    assert time.perf_counter() - started > 0.5
    assert text and "ten" not in text  # it had started, and it did not finish (cut at 0.6 s of ~1.5 s)
    assert "deadline" in err.value.message
    record = wait_until(
        lambda: main[1][-1] if main[1][-1].details.get("mid_stream_failure") else None, what="the record"
    )
    assert record.details["mid_stream_error_class"] == "timeout"
    assert main[0].switchyard.stats()["counters"]["mid_stream_failures"] == before + 1


def test_stats_endpoint(main: Any) -> None:
    data = httpx.get(f"{main[0].base_url}/stats", timeout=5).json()["reliability"]
    assert data["counters"]["attempts"] > 0
    assert set(data["counters"]) >= {"retries", "fallbacks", "mid_stream_failures", "breaker_skips", "cancelled"}


# -- caller disconnects --------------------------------------------------------------------------


def test_disconnect_cancels_a_json_request_upstream(main: Any, fake: Any) -> None:
    fake.app.disconnects.clear()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{main[0].base_url}/chat/completions",
            json={"model": "stall", "messages": MESSAGES},
            timeout=httpx.Timeout(0.3, connect=1),
        )
    # The proxy saw the caller go, cancelled its upstream request, and the upstream saw that.
    assert wait_until(lambda: "stall-headers" in fake.app.disconnects, 2.0, "the disconnect")
    record = wait_until(lambda: next((r for r in reversed(main[1]) if r.status == 499), None), what="a 499 record")
    assert record.attempts[-1].error_class == "cancelled"


def test_disconnect_cancels_a_stream_upstream(main: Any, fake: Any) -> None:
    fake.app.disconnects.clear()
    with (
        httpx.Client(timeout=5) as client,
        client.stream(
            "POST",
            f"{main[0].base_url}/chat/completions",
            json={"model": "stall_mid", "messages": MESSAGES, "stream": True},
        ) as resp,
    ):
        for line in resp.iter_lines():
            if '"content"' in line:
                break  # content arrived; now hang up mid-stream
    assert wait_until(lambda: "stall-mid" in fake.app.disconnects, 2.0, "the disconnect")
    record = wait_until(lambda: next((r for r in reversed(main[1]) if r.route == "stall_mid"), None), what="the record")
    assert record.details["closed_early"] is True and not record.details.get("mid_stream_failure")
    assert record.status == 499


# -- one retry owner -----------------------------------------------------------------------------


def test_sdk_retries_do_not_multiply_through_the_proxy(main: Any, fake: Any) -> None:
    fake.app.reset()
    with sdk(main[0], max_retries=2) as client, pytest.raises(openai.InternalServerError) as err:
        client.chat.completions.create(model="down", messages=MESSAGES)
    # The engine made 2 attempts (max_retries: 1); the SDK, told x-should-retry: false, none.
    assert err.value.response.headers["x-should-retry"] == "false"
    assert fake.app.count("fail-500") == 2


def test_dropin_client_never_retries(fake: Any) -> None:
    config = {
        "llm_clients": {"up": client_cfg(fake.port)},
        "targets": {"down": {"client": "up", "model": "fail-503"}},
        "routes": {"down": {"type": "passthrough", "target": "down"}},
    }
    client = switchyard.OpenAI(config=config, max_retries=5)
    try:
        assert client.max_retries == 0
        fake.app.reset()
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="down", messages=MESSAGES)
        assert fake.app.count("fail-503") == 2
    finally:
        client.close()
        client.switchyard.close()


# -- circuit breaker -----------------------------------------------------------------------------


def test_circuit_breaker_skips_then_probes_then_closes(fake: Any) -> None:
    fake.app.reset()
    config = {
        "llm_clients": {"up": client_cfg(fake.port, circuit_breaker={"failures": 2, "cooldown_s": 3.0})},
        "targets": {"flaky": {"client": "up", "model": "flaky-2"}, "backup": {"client": "up", "model": "fake-backup"}},
        "routes": {"r": {"type": "passthrough", "target": "flaky", "fallbacks": ["backup"]}},
        "reply_model": "upstream",  # replies name the target that served them
    }
    with recording_proxy(config) as (server, records), sdk(server) as client:
        # 1: two 503s open the breaker; the backup answers.
        assert client.chat.completions.create(model="r", messages=MESSAGES).model == "fake-backup"
        assert [a.target for a in records[-1].attempts] == ["flaky", "flaky", "backup"]
        # 2: the open breaker skips flaky without calling it, and says so in the record.
        assert client.chat.completions.create(model="r", messages=MESSAGES).model == "fake-backup"
        assert [(s.target, s.reason) for s in records[-1].skipped] == [("flaky", "circuit_open")]
        assert [a.target for a in records[-1].attempts] == ["backup"]
        assert fake.app.count("flaky-2") == 2
        state = server.switchyard.stats()["targets"]["flaky"]
        assert state["state"] == "open"
        # 3: after the cooldown one probe goes through; flaky has recovered; the breaker closes.
        # (A 3 s cooldown so that step 2 surely runs inside it on a busy machine; then wait,
        # bounded, for the breaker to say it is half-open rather than sleeping a fixed time.)
        wait_until(lambda: server.switchyard.stats()["targets"]["flaky"]["state"] == "half_open", 15.0, "half-open")
        assert client.chat.completions.create(model="r", messages=MESSAGES).model == "flaky-2"
        assert server.switchyard.stats()["targets"]["flaky"]["state"] == "closed"
        counters = server.switchyard.stats()["counters"]
        assert counters["breaker_opened"] == 1 and counters["breaker_skips"] == 1
