"""Item 58: a prompt that clearly does not fit a target's known window skips it before any call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from switchyard.engine.fallback import Fallback, NoCandidateError
from switchyard.engine.health import BreakerPolicy, Health
from switchyard.engine.windows import FIT_MARGIN, PromptSize
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import ContextWindowExceededError, UpstreamError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.tools import ToolDefinition
from switchyard.wire.tokens import estimate_input_tokens

Rig = Any


def prompt(chars: int, tools: list[ToolDefinition] | None = None) -> ChatRequest:
    return ChatRequest(model="solo", messages=[Message.of("user", "x" * chars)], tools=tools or [])


class Counting(PromptSize):
    """Counts how often the full estimate runs."""

    estimates = 0

    def tokens(self) -> int:
        if self._tokens is None:
            Counting.estimates += 1
        return super().tokens()


def test_small_prompts_never_pay_for_the_estimate() -> None:
    Counting.estimates = 0
    size = Counting(prompt(1000))
    assert not size.exceeds(4096) and not size.exceeds(600)  # 250 tokens <= half of either
    assert Counting.estimates == 0


def test_the_margin_forgives_estimation_error() -> None:
    request = prompt(40_000)
    estimate = estimate_input_tokens(request)
    size = PromptSize(request)
    assert not size.exceeds(estimate)  # about the window: tried (the overflow path has the final word)
    assert not size.exceeds(int(estimate * (1 - FIT_MARGIN)) + 1)
    assert size.exceeds(int(estimate * (1 - FIT_MARGIN)) - 1)


def test_tool_definitions_count() -> None:
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "description": "d" * 200} for i in range(40)},
    }
    tools = [ToolDefinition(name=f"tool{i}", description="t" * 500, parameters=schema) for i in range(10)]
    size = PromptSize(prompt(100, tools))
    assert size.chars() > 90_000 and size.exceeds(8192)


def test_estimate_is_computed_once_per_request() -> None:
    Counting.estimates = 0
    size = Counting(prompt(80_000))
    assert size.exceeds(4096) and size.exceeds(8192) and not size.exceeds(131072)
    assert Counting.estimates == 1


# -- in the fallback loop ------------------------------------------------------------------------


def answer() -> ChatResponse:
    return ChatResponse(id="r", model="m", content=[], usage=Usage())


def config(**windows: int | None) -> dict[str, Any]:
    client = {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}
    targets: dict[str, Any] = {
        name: {"client": "up", "model": f"m-{name}", **({"context_window": w} if w else {})}
        for name, w in windows.items()
    }
    names = list(windows)
    return {
        "llm_clients": {"up": client},
        "targets": targets,
        "routes": {"solo": {"type": "passthrough", "target": names[0], "fallbacks": names[1:]}},
    }


async def test_too_long_for_the_first_target_goes_to_a_larger_one(rig: Callable[..., Rig]) -> None:
    r = rig({"small": [answer()], "big": [answer()]}, **config(small=4096, big=131072))
    done = await r.engine.complete(prompt(40_000))  # ~10k tokens
    assert done.target == "big"
    assert r.backend.targets_called() == ["big"]  # the small one was never called
    record = r.records[-1]
    skipped = record.skipped[0]
    assert (skipped.target, skipped.reason, skipped.window) == ("small", "context_window", 4096)
    assert skipped.prompt_tokens == estimate_input_tokens(prompt(40_000))
    assert r.engine.stats()["counters"]["context_window_skips"] == 1


async def test_fitting_prompts_and_unknown_windows_are_tried(rig: Callable[..., Rig]) -> None:
    r = rig({"small": [answer()], "unknown": [answer()]}, **config(small=4096, unknown=None))
    assert (await r.engine.complete(prompt(2000))).target == "small"
    r2 = rig({"unknown": [answer()], "small": [answer()]}, **config(unknown=None, small=4096))
    assert (await r2.engine.complete(prompt(400_000))).target == "unknown"  # may be larger: tried


async def test_nothing_fits_is_a_400_context_length_exceeded(rig: Callable[..., Rig]) -> None:
    r = rig({"a": [answer()], "b": [answer()]}, **config(a=4096, b=8192))
    with pytest.raises(ContextWindowExceededError) as err:
        await r.engine.complete(prompt(200_000))
    assert err.value.status == 400 and err.value.code == "context_length_exceeded"
    assert "prompt is too long" in err.value.message and "8192 maximum context length" in err.value.message
    assert r.backend.calls == []
    assert r.records[-1].status == 400
    assert [(s.target, s.reason) for s in r.records[-1].skipped] == [("a", "context_window"), ("b", "context_window")]


async def test_learned_windows_count_too(rig: Callable[..., Rig]) -> None:
    r = rig({"vllm": [answer()], "big": [answer()]}, **config(vllm=None, big=131072))
    r.engine.health.learn_window("vllm", 2048)  # e.g. read from /v1/models after an overflow
    assert (await r.engine.complete(prompt(40_000))).target == "big"
    assert r.backend.targets_called() == ["big"]


async def test_mixed_skips_are_a_503_not_a_400() -> None:
    """A candidate skipped for its breaker might have fitted: the caller should retry later."""
    from switchyard.engine.core import Target
    from switchyard.engine.fallback import Reliability
    from switchyard.protocol.targets import TargetInfo

    class Never:
        async def complete(self, *_: Any) -> ChatResponse:
            raise AssertionError("not called")

    policy = BreakerPolicy(failures=1, cooldown_s=30)
    health = Health()
    health.failed("big", policy)
    targets = {
        "small": Target(TargetInfo(name="small", model="s", context_window=1000), Never(), Reliability()),  # type: ignore[arg-type]
        "big": Target(TargetInfo(name="big", model="b"), Never(), Reliability(breaker=policy)),  # type: ignore[arg-type]
    }
    runner = Fallback(targets, health, prompt=PromptSize(prompt(100_000)))
    with pytest.raises(UpstreamError) as err:
        await runner.run(["small", "big"], lambda t, o: t.backend.complete(), CallOptions())  # type: ignore[attr-defined]
    assert isinstance(err.value, NoCandidateError) and err.value.status == 503


def test_the_callers_body_size_answers_first() -> None:
    class NoCounting(PromptSize):
        def chars(self) -> int:
            raise AssertionError("the body size was enough")

    assert not NoCounting(prompt(1000), body_bytes=1100).exceeds(4096)
    assert PromptSize(prompt(40_000), body_bytes=40_100).exceeds(4096)  # too big to decide: counted
