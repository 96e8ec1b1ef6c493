"""Completion caps above what a target can produce are clamped before the request leaves."""

from __future__ import annotations

from switchyard.clients.limits import MIN_OUTPUT, clamp_output, may_clamp
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.wire import diagnostics


def _request(text: str = "hi") -> ChatRequest:
    return ChatRequest(model="r", messages=[Message.of("user", text)])


def test_no_known_limit_leaves_the_cap_alone() -> None:
    body = {"max_tokens": 128000}
    clamp_output(body, _request(), TargetInfo(name="t", model="m"))
    assert body == {"max_tokens": 128000}


def test_configured_output_limit_clamps_every_cap_field() -> None:
    diagnostics.reset()
    target = TargetInfo(name="t", model="m", max_output_tokens=8192)
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        body = {key: 65536}
        clamp_output(body, _request(), target)
        assert body == {key: 8192}
    assert diagnostics.counts()["output_limit.clamped"] == 3
    small = {"max_tokens": 100}
    clamp_output(small, _request(), target)
    assert small == {"max_tokens": 100}


def test_window_leaves_room_for_the_prompt() -> None:
    target = TargetInfo(name="t", model="m", context_window=32768)
    body = {"max_completion_tokens": 65536}
    clamp_output(body, _request("word " * 4000), target)  # ~5,000 prompt tokens
    assert 20000 < body["max_completion_tokens"] < 32768 - 5000
    # A prompt that overflows the window by itself is left to the context-window fallback.
    huge = {"max_tokens": 30000}
    clamp_output(huge, _request("word " * 40000), target)
    assert huge == {"max_tokens": 30000}


def test_thinking_budget_follows_the_clamped_cap() -> None:
    target = TargetInfo(name="t", model="m", max_output_tokens=8000)
    body = {"max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 16000}}
    clamp_output(body, _request(), target)
    assert body == {"max_tokens": 8000, "thinking": {"type": "enabled", "budget_tokens": 7999}}
    tiny = TargetInfo(name="t", model="m", max_output_tokens=1000)
    body = {"max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 16000}}
    clamp_output(body, _request(), tiny)
    assert body == {"max_tokens": 1000}


def test_never_below_the_responses_minimum() -> None:
    body = {"max_output_tokens": 64}
    clamp_output(body, _request(), TargetInfo(name="t", model="m", max_output_tokens=1))
    assert body == {"max_output_tokens": MIN_OUTPUT}


def test_body_size_bound_skips_the_estimate_when_the_cap_fits() -> None:
    target = TargetInfo(name="t", model="m", context_window=32768)
    request = _request("word " * 4000)  # ~5,000 prompt tokens by the estimate
    # A body of 20 kB bounds the prompt at ~6,250 tokens: 20,000 + that fits, no estimate needed.
    fits = {"max_tokens": 20000}
    assert clamp_output(fits, request, target, body_bytes=20_000) is False
    assert fits == {"max_tokens": 20000}
    # 30,000 does not fit beside the bound: the estimate decides, and clamps.
    tight = {"max_tokens": 30000}
    assert clamp_output(tight, request, target, body_bytes=20_000) is True
    assert tight["max_tokens"] < 32768 - 5000


def test_may_clamp_is_false_for_ordinary_caps() -> None:
    target = TargetInfo(name="t", model="m", context_window=131072, max_output_tokens=32768)
    assert not may_clamp({"max_tokens": 4096}, target)
    assert may_clamp({"max_tokens": 65536}, target)
    assert not may_clamp({"max_tokens": 65536}, TargetInfo(name="t", model="m"))
