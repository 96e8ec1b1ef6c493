"""Backend health through the proxy with the real openai SDK: markup leaks, GET /health with
probes that take a backend out of routing, and the pre-call context-window check."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from _waits import eventually, wait_until

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, leaky_brain, serve_fake

pytestmark = pytest.mark.integration

HI: Any = [{"role": "user", "content": "hello"}]
LONG: Any = [{"role": "user", "content": "word " * 6000}]  # ~7.5k tokens by the estimate


def client(port: int, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": f"http://127.0.0.1:{port}/v1",
        "timeout": {"connect": 1, "read": 5, "total": 10},
        "max_retries": 0,
        **extra,
    }


class Stack:
    def __init__(self, vllm: Any, cloud: Any, proxy: ServerThread, records: list[DecisionRecord]) -> None:
        self.vllm: FakeUpstream = vllm.app
        self.cloud: FakeUpstream = cloud.app
        self.proxy = proxy
        self.records = records
        self.sdk = openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0, timeout=10)
        self.http = httpx.Client(base_url=proxy.root_url, timeout=10)

    def health(self, deep: bool = False) -> dict[str, Any]:
        resp = self.http.get("/health", params={"deep": "1"} if deep else None)
        assert resp.status_code == 200  # liveness: always 200 while the router runs
        data: dict[str, Any] = resp.json()
        return data


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    vllm = serve_fake(
        FakeUpstream(
            [
                FakeModel("lightning"),
                FakeModel("leaky-think", brain=leaky_brain("reasoning")),
                FakeModel("leaky-call", brain=leaky_brain("tool_call")),
                FakeModel("lightning-4k", context_window=4096),
            ]
        )
    )
    cloud = serve_fake(FakeUpstream([FakeModel("frontier")]))
    config = {
        "llm_clients": {
            # 2 s: a probe of the local fake must not time out on a busy machine by accident.
            "vllm": client(vllm.port, health_check={"timeout_s": 2.0}),
            "vllm_strict": client(vllm.port, markup_leak="fallback", health_check={"enabled": False}),
            "cloud": client(cloud.port),
        },
        "targets": {
            "efficient": {"client": "vllm", "model": "lightning"},
            "leaky": {"client": "vllm", "model": "leaky-think"},
            "leaky_call": {"client": "vllm", "model": "leaky-call"},
            "strict": {"client": "vllm_strict", "model": "leaky-call"},
            "small": {"client": "vllm", "model": "lightning-4k", "probe_context_window": True},
            "frontier": {"client": "cloud", "model": "frontier", "context_window": 200000},
        },
        "routes": {
            "agent": {"type": "passthrough", "target": "efficient", "fallbacks": ["frontier"]},
            "leaky": {"type": "passthrough", "target": "leaky"},
            "leaky_call": {"type": "passthrough", "target": "leaky_call"},
            "strict": {"type": "passthrough", "target": "strict", "fallbacks": ["frontier"]},
            "long": {"type": "passthrough", "target": "small", "fallbacks": ["frontier"]},
            "long_only": {"type": "passthrough", "target": "small"},
        },
        # These tests probe on every deep check; callers without an admin key are rate-bounded.
        "server": {"deep_health_interval_s": 0},
    }
    records: list[DecisionRecord] = []
    sy = Switchyard.from_config(config)
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as proxy:
            s = Stack(vllm, cloud, proxy, records)
            try:
                yield s
            finally:
                s.sdk.close()
                s.http.close()
    finally:
        sy.close()
        vllm.stop()
        cloud.stop()


@pytest.fixture
def healthy(stack: Stack) -> Iterator[Stack]:
    """Leaves the vLLM fake healthy (and known to be) after the test."""
    try:
        yield stack
    finally:
        stack.vllm.health_status, stack.vllm.health_delay_s = 200, 0.0
        assert stack.health(deep=True)["backends"]["vllm"]["state"] == "up"


# -- item 56: markup in content ------------------------------------------------------------------


def test_leaked_reasoning_is_passed_on_and_flags_the_target(stack: Stack) -> None:
    done = stack.sdk.chat.completions.create(model="leaky", messages=HI)
    assert "</think>" in (done.choices[0].message.content or "")  # the caller asked: answered as is
    assert stack.records[-1].details["markup_leak"] == {"target": "leaky", "marker": "</think>", "action": "flagged"}
    report = stack.health()
    assert report["status"] == "degraded"
    entry = report["targets"]["leaky"]
    assert entry["problems"] == ["markup_leak"] and entry["available"] is True
    assert entry["markup_leaks"]["markers"]["</think>"] >= 1
    stats = stack.http.get("/v1/stats").json()["reliability"]
    assert stats["counters"]["markup_leaks"] >= 1 and stats["targets"]["leaky"]["markup_leaks"]["flagged"]


def test_leaked_tool_call_in_a_stream_is_flagged(stack: Stack) -> None:
    tools: Any = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    chunks = stack.sdk.chat.completions.create(model="leaky_call", messages=HI, tools=tools, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("<tool_call>")
    assert stack.records[-1].details["markup_leak"]["marker"] == "<tool_call>"
    assert "markup_leak" in stack.health()["targets"]["leaky_call"]["problems"]


def test_markup_leak_fallback_mode_answers_from_the_next_candidate(stack: Stack) -> None:
    raw = stack.sdk.chat.completions.with_raw_response.create(model="strict", messages=HI)
    assert raw.headers["x-switchyard-selected-model"] == "frontier"
    assert "<tool_call>" not in (raw.parse().choices[0].message.content or "")
    record = stack.records[-1]
    assert [(a.target, a.error_class) for a in record.attempts] == [("strict", "protocol"), ("frontier", None)]


# -- item 57: GET /health and backend probes --------------------------------------------------------


def test_plain_health_is_liveness_without_probes(stack: Stack) -> None:
    before = list(stack.vllm.gets)
    report = stack.health()
    assert stack.vllm.gets == before  # no upstream was asked
    assert set(report) >= {"status", "routes", "backends", "targets"} and "agent" in report["routes"]
    assert report["backends"]["vllm_strict"]["state"] == "not_probed"
    assert report["backends"]["cloud"]["targets"] == ["frontier"]


def test_deep_health_probes_every_backend(healthy: Stack) -> None:
    report = healthy.health(deep=True)
    vllm, cloud = report["backends"]["vllm"], report["backends"]["cloud"]
    assert (vllm["state"], vllm["status"]) == ("up", 200)
    assert vllm["url"].endswith("/health") and "/v1/" not in vllm["url"]  # vLLM's /health is at the root
    assert cloud["state"] == "up" and vllm["checked_s_ago"] < 5
    assert "/health" in healthy.vllm.gets


def test_a_backend_answering_503_is_taken_out_of_routing(healthy: Stack) -> None:
    healthy.vllm.health_status = 503
    report = healthy.health(deep=True)
    assert report["status"] == "degraded"
    assert report["backends"]["vllm"]["state"] == "down" and report["backends"]["vllm"]["status"] == 503
    assert report["targets"]["efficient"]["available"] is False
    assert "backend_down" in report["targets"]["efficient"]["problems"]
    served_before = healthy.vllm.count("lightning")
    raw = healthy.sdk.chat.completions.with_raw_response.create(model="agent", messages=HI)
    assert raw.headers["x-switchyard-selected-model"] == "frontier"
    assert healthy.vllm.count("lightning") == served_before  # never called
    skipped = healthy.records[-1].skipped
    assert [(s.target, s.reason) for s in skipped] == [("efficient", "unhealthy")] and skipped[0].retry_in_s
    healthy.vllm.health_status = 200
    assert healthy.health(deep=True)["backends"]["vllm"]["state"] == "up"
    raw = healthy.sdk.chat.completions.with_raw_response.create(model="agent", messages=HI)
    assert raw.headers["x-switchyard-selected-model"] == "efficient"  # back in routing


def test_deep_health_is_bounded_by_the_probe_timeout(healthy: Stack) -> None:
    healthy.vllm.health_delay_s = 12.0
    started = time.perf_counter()
    report = healthy.health(deep=True)
    # Bounded by the 2 s probe timeout, not by the 12 s the backend takes (the margin is for a
    # busy machine; the error below says which limit ended it).
    assert time.perf_counter() - started < 10.0
    assert report["backends"]["vllm"]["state"] == "down"
    assert report["backends"]["vllm"]["error"] == "no answer within 2s"


def test_background_probes_start_with_the_server_and_stop_with_it() -> None:
    vllm = serve_fake(FakeUpstream([FakeModel("lightning")]))
    config = {
        "llm_clients": {"vllm": client(vllm.port, health_check={"interval_s": 3, "timeout_s": 2.0})},
        "targets": {"efficient": {"client": "vllm", "model": "lightning"}},
        "routes": {"agent": {"type": "passthrough", "target": "efficient"}},
    }
    sy = Switchyard.from_config(config)
    try:
        with ServerThread(sy) as proxy:
            # Probed at start-up, no request needed: wait (bounded) until the probe is recorded,
            # which is a moment after the fake saw it.
            def probed() -> dict[str, Any] | None:
                report: dict[str, Any] = httpx.get(proxy.root_url + "/health", timeout=5).json()
                return report if report["backends"]["vllm"]["state"] == "up" else None

            report = wait_until(probed, 30, "the start-up probe recorded", every=0.05)
            assert "/health" in vllm.app.gets
            assert report["backends"]["vllm"]["probed"] == "every 3s"
        assert not sy._background_probing()  # the prober stopped with the server
        probes = vllm.app.gets.count("/health")
        time.sleep(3.3)  # longer than interval_s: a prober still running would have probed
        assert vllm.app.gets.count("/health") <= probes + 1  # at most one that was already on its way
    finally:
        sy.close()
        vllm.stop()


# -- item 58: prompts longer than a known window -----------------------------------------------------


def test_a_prompt_longer_than_max_model_len_goes_to_a_larger_target(stack: Stack) -> None:
    before = stack.vllm.count("lightning-4k")
    raw = stack.sdk.chat.completions.with_raw_response.create(model="long", messages=LONG)
    assert raw.headers["x-switchyard-selected-model"] == "frontier"
    assert stack.vllm.count("lightning-4k") == before  # never sent to the small model
    skipped = stack.records[-1].skipped
    assert [(s.target, s.reason, s.window) for s in skipped] == [("small", "context_window", 4096)]
    assert skipped[0].prompt_tokens is not None and skipped[0].prompt_tokens > 4096
    short = stack.sdk.chat.completions.with_raw_response.create(model="long", messages=HI)
    assert short.headers["x-switchyard-selected-model"] == "small"


def test_no_larger_target_is_a_400_context_length_exceeded(stack: Stack) -> None:
    before = stack.vllm.count("lightning-4k")
    with pytest.raises(openai.BadRequestError) as err:
        stack.sdk.chat.completions.create(model="long_only", messages=LONG)
    assert err.value.code == "context_length_exceeded"
    assert "prompt is too long" in err.value.message
    assert err.value.response.headers["x-should-retry"] == "false"
    assert stack.vllm.count("lightning-4k") == before


async def test_library_api_health_and_background_probes() -> None:
    vllm = serve_fake(FakeUpstream([FakeModel("lightning")]))
    config = {
        "llm_clients": {"vllm": client(vllm.port, health_check={"interval_s": 3, "timeout_s": 2.0})},
        "targets": {"efficient": {"client": "vllm", "model": "lightning"}},
        "routes": {"agent": {"type": "passthrough", "target": "efficient"}},
    }
    sy = Switchyard.from_config(config)
    try:
        report = await sy.health()  # first use in this loop: the background prober starts
        assert report["status"] == "ok" and report["routes"] == ["agent"]
        # Wait until the prober has *recorded* a probe (not merely until the fake saw the
        # request: the answer is recorded a moment later), bounded in wall time.
        await eventually(
            lambda: sy.stats()["backends"].get("vllm", {}).get("probes", 0) >= 1, 30, "a recorded background probe"
        )
        assert "/health" in vllm.app.gets
        assert (await sy.health())["backends"]["vllm"]["state"] == "up"
        vllm.app.health_status = 500
        deep = await sy.health(deep=True)
        assert deep["status"] == "degraded" and deep["targets"]["efficient"]["available"] is False
        # The background prober (every 1 s) may have failed a probe of its own meanwhile.
        assert sy.stats()["backends"]["vllm"]["failed_probes"] >= 1
        engine = sy.engine
        await sy.aclose()
        assert not engine.monitor.running
    finally:
        sy.close()
        vllm.stop()
