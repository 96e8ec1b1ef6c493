"""The engine's retry/fallback loop over scripted backends (no HTTP, no real sleeping)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchyard.clients.errors import status_error
from switchyard.clients.retry import RetryPolicy
from switchyard.engine import fallback as fallback_mod
from switchyard.engine.core import Target
from switchyard.engine.fallback import DeadlineExceededError, Fallback, NoCandidateError, Reliability
from switchyard.engine.health import BreakerPolicy, Health
from switchyard.engine.timeouts import Budget
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamConnectionError, UpstreamError, UpstreamStatusError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import StreamEvent
from switchyard.protocol.targets import TargetInfo
from switchyard.wire import codec
from switchyard.wire.base import WireFormat

CHAT = codec(WireFormat.OPENAI_CHAT)
REQUEST = CHAT.decode_request({"model": "r", "messages": [{"role": "user", "content": "hi"}]})


def answer(name: str) -> ChatResponse:
    return CHAT.decode_response(
        {
            "id": "x",
            "model": name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": name}, "finish_reason": "stop"}],
        }
    )


def http(code: int, message: str = "boom", headers: dict[str, str] | None = None) -> UpstreamStatusError:
    body = f'{{"error": {{"message": "{message}"}}}}'.encode()
    return status_error(CHAT, code, body, headers or {}, target=None)


class Scripted:
    """A backend that plays outcomes in order (the last one repeats)."""

    def __init__(self, *outcomes: Any, window: int | None = None, window_delay: float = 0.0) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[CallOptions] = []
        self.window = window
        self.window_delay = window_delay
        self.lookups = 0

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        self.calls.append(options)
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if outcome == "hang":
            await asyncio.sleep(3600)
        if isinstance(outcome, BaseException):
            raise outcome
        return answer(target.name)

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


class Discovering(Scripted):
    async def context_window(self, target: TargetInfo, timeout_s: float) -> int | None:
        self.lookups += 1
        await asyncio.sleep(self.window_delay)
        return self.window


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def target(name: str, backend: Any, *, retries: int = 2, window: int | None = None, breaker: int = 0) -> Target:
    return Target(
        TargetInfo(name=name, model=name, context_window=window),
        backend,
        Reliability(
            retry=RetryPolicy(max_retries=retries, initial_delay_s=0.25, jitter=0.0, max_retry_after_s=5.0),
            breaker=BreakerPolicy(failures=breaker, cooldown_s=30.0),
        ),
    )


async def run(targets: list[Target], **kwargs: Any) -> tuple[Fallback, Any]:
    sleeps = Sleeps()
    runner = Fallback({t.info.name: t for t in targets}, kwargs.pop("health", Health()), sleep=sleeps, **kwargs)
    runner.sleeps = sleeps  # type: ignore[attr-defined]
    try:
        served, response = await runner.run(
            [t.info.name for t in targets], lambda t, o: t.backend.complete(REQUEST, t.info, o), CallOptions()
        )
    except UpstreamError as exc:
        return runner, exc
    return runner, (served.info.name, response)


async def test_retries_with_backoff_then_succeeds() -> None:
    runner, result = await run([target("a", Scripted(http(503), http(502), "ok"))])
    assert result[0] == "a"
    assert [(a.ok, a.retry, a.status, a.error_class) for a in runner.attempts] == [
        (False, 0, 503, "server_error"),
        (False, 1, 502, "server_error"),
        (True, 2, None, None),
    ]
    assert runner.sleeps == [0.25, 0.5]  # type: ignore[attr-defined]
    assert runner.attempts[2].waited_ms == 500


async def test_budget_per_target_then_fallback() -> None:
    health = Health()
    runner, result = await run(
        [
            target("a", Scripted(http(500))),
            target("b", Scripted(UpstreamConnectionError("reset"))),
            target("c", Scripted("ok")),
        ],
        health=health,
    )
    assert result[0] == "c"
    assert [a.target for a in runner.attempts] == ["a"] * 3 + ["b"] * 3 + ["c"]
    counters = health.stats()["counters"]
    assert counters["attempts"] == 7 and counters["retries"] == 4 and counters["fallbacks"] == 1


async def test_retry_after_is_honoured() -> None:
    runner, result = await run([target("a", Scripted(http(429, headers={"retry-after": "3"}), "ok"))])
    assert result[0] == "a"
    assert runner.sleeps == [3.0]  # type: ignore[attr-defined]


async def test_long_retry_after_falls_back_without_sleeping_and_holds_the_target() -> None:
    health = Health()
    slow = target("a", Scripted(http(429, headers={"retry-after": "3600"})), breaker=5)
    runner, result = await run([slow, target("b", Scripted("ok"))], health=health)
    assert result[0] == "b"
    assert runner.sleeps == []  # type: ignore[attr-defined]
    assert [a.target for a in runner.attempts] == ["a", "b"]
    assert health.state("a") == "open"  # do not knock again before the hour is up


@pytest.mark.parametrize("code", [400, 404, 422])
async def test_other_4xx_stop_everything(code: int) -> None:
    backup = Scripted("ok")
    runner, result = await run([target("a", Scripted(http(code))), target("b", backup)])
    assert isinstance(result, UpstreamStatusError) and result.upstream_status == code
    assert len(runner.attempts) == 1 and backup.calls == []


@pytest.mark.parametrize("code", [401, 403])
async def test_auth_errors_fail_unless_the_route_allows(code: int) -> None:
    runner, result = await run([target("a", Scripted(http(code, "invalid api key"))), target("b", Scripted("ok"))])
    assert isinstance(result, UpstreamStatusError) and result.message == "invalid api key"
    assert len(runner.attempts) == 1
    runner, result = await run([target("a", Scripted(http(code))), target("b", Scripted("ok"))], auth_fallback=True)
    assert result[0] == "b"


OVERFLOW = "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens."


async def test_overflow_skips_targets_that_are_not_larger() -> None:
    same = Scripted("ok")
    runner, result = await run(
        [
            target("small", Scripted(http(400, OVERFLOW)), window=4096),
            target("same", same, window=4096),
            target("smaller", Scripted("ok"), window=2048),
            target("big", Scripted("ok"), window=131072),
        ]
    )
    assert result[0] == "big"
    assert same.calls == []
    assert [(s.target, s.reason) for s in runner.skipped] == [("same", "context_window"), ("smaller", "context_window")]
    assert [a.target for a in runner.attempts] == ["small", "big"]  # never retried


async def test_overflow_learns_the_window_from_the_message() -> None:
    health = Health()
    runner, result = await run(
        [
            target("small", Scripted(http(400, OVERFLOW))),
            target("same", Scripted("ok"), window=4096),
            target("big", Scripted("ok")),
        ],
        health=health,
    )
    assert result[0] == "big"  # unknown window: may be larger, so it is tried
    assert [s.target for s in runner.skipped] == ["same"]
    assert health.window("small", 600) == (True, 4096)


async def test_overflow_reads_unknown_windows_from_the_upstream_once() -> None:
    health = Health()
    vllm = Discovering("ok", window=4096)
    for _ in range(2):
        runner, result = await run(
            [
                target("small", Scripted(http(400, OVERFLOW)), window=4096),
                target("vllm", vllm),
                target("big", Scripted("ok")),
            ],
            health=health,
        )
        assert result[0] == "big" and [s.target for s in runner.skipped] == ["vllm"]
    assert vllm.lookups == 1 and vllm.calls == []


async def test_window_lookup_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fallback_mod, "WINDOW_LOOKUP_TIMEOUT_S", 0.05)
    hanging = Discovering("ok", window=1024, window_delay=30)
    started = time.perf_counter()
    _, result = await run([target("small", Scripted(http(400, OVERFLOW)), window=4096), target("slow", hanging)])
    assert time.perf_counter() - started < 10.0  # the 0.05 s lookup limit, not the 30 s lookup
    assert result[0] == "slow"  # unknown after the lookup gave up: tried


async def test_every_candidate_overflows() -> None:
    runner, result = await run(
        [
            target("a", Scripted(http(400, OVERFLOW)), window=4096),
            target("b", Scripted(http(400, OVERFLOW)), window=8192),
        ]
    )
    assert result.code == "context_length_exceeded" and result.status == 400
    assert len(runner.attempts) == 2


async def test_deadline_stops_attempts_and_waits() -> None:
    deadline = Budget(deadline=time.monotonic() + 0.2, total_s=0.2)
    runner, result = await run([target("a", Scripted(http(503))), target("b", Scripted("ok"))], budget=deadline)
    # The 0.25 s backoff would outlive the 0.2 s deadline: no sleep, straight to b.
    assert result[0] == "b" and runner.sleeps == []  # type: ignore[attr-defined]
    assert runner.attempts[1].target == "b"
    assert all(call.deadline == deadline.deadline for call in runner.targets["b"].backend.calls)
    past = Budget(deadline=time.monotonic() - 0.01, total_s=1.0)
    runner, result = await run([target("a", Scripted("ok"))], budget=past)
    assert isinstance(result, DeadlineExceededError) and result.status == 504
    assert runner.attempts == []


async def test_open_breaker_skips_and_nothing_left_is_503() -> None:
    health = Health()
    flaky = Scripted(http(500))
    await run([target("a", flaky, retries=1, breaker=2)], health=health)
    assert health.state("a") == "open" and len(flaky.calls) == 2
    runner, result = await run([target("a", flaky, retries=1, breaker=2)], health=health)
    assert isinstance(result, NoCandidateError) and result.status == 503
    assert result.headers["retry-after"] == "30"
    assert [(s.target, s.reason) for s in runner.skipped] == [("a", "circuit_open")]
    # Only the actual reason: Hermes Agent reads "context window" in a 503 as an overflow.
    assert (
        result.message
        == "no target could be tried: a: circuit breaker open after repeated upstream failures; retry in 30s"
    )
    assert "context" not in result.message
    assert len(flaky.calls) == 2
    runner, result = await run([target("a", flaky, retries=1, breaker=2), target("b", Scripted("ok"))], health=health)
    assert result[0] == "b" and [s.target for s in runner.skipped] == ["a"]


async def test_breaker_opening_mid_request_stops_the_retries() -> None:
    health = Health()
    failing = Scripted(http(503))
    runner, result = await run([target("a", failing, retries=5, breaker=2), target("b", Scripted("ok"))], health=health)
    assert result[0] == "b"
    assert [a.target for a in runner.attempts] == ["a", "a", "b"]


async def test_cancellation_is_recorded_and_releases_the_probe() -> None:
    health = Health()
    runner = Fallback({"a": target("a", Scripted("hang"))}, health)
    task = asyncio.ensure_future(runner.run(["a"], lambda t, o: t.backend.complete(REQUEST, t.info, o), CallOptions()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (attempt,) = runner.attempts
    assert attempt.error_class == "cancelled" and attempt.status == 499


def test_skip_reasons_name_only_their_cause() -> None:
    from switchyard.engine.fallback import skip_reason
    from switchyard.engine.records import Skipped

    unhealthy = skip_reason(Skipped("vllm", "unhealthy", 4.2))
    assert unhealthy == "vllm: backend unhealthy (its health check failed); retry in 5s"
    window = skip_reason(Skipped("small", "context_window", window=8192, prompt_tokens=20000))
    assert window == "small: prompt does not fit its context window of 8192 tokens (prompt ~20000 tokens)"
    assert "context" not in unhealthy and "breaker" not in window


def test_limited_options_are_what_replace_makes() -> None:
    # ``limited`` builds CallOptions field by field: a field added later must not be dropped.
    from dataclasses import fields, replace

    from switchyard.engine.fallback import limited
    from switchyard.protocol.call import CallOptions

    values = {"raw_body": {"a": 1}, "raw_format": "openai_chat", "headers": {"anthropic-beta": "x"}}
    options = CallOptions(**values, timeout={"read": 1.0}, deadline=5.0)
    assert {f.name for f in fields(CallOptions)} == {*values, "timeout", "deadline"}
    assert limited(options, 9.0, {"total": 2.0}) == replace(options, deadline=9.0, timeout={"total": 2.0})
