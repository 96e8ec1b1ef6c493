"""Circuit breakers: closed → open after N failures → half-open probe → closed or open again."""

from __future__ import annotations

from switchyard.engine.health import BreakerPolicy, Health


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


POLICY = BreakerPolicy(failures=3, cooldown_s=10.0, max_cooldown_s=60.0)


def opened(health: Health, target: str = "t", n: int = 3) -> None:
    for _ in range(n):
        assert health.admit(target, POLICY).allowed
        health.failed(target, POLICY)


def test_opens_after_consecutive_failures_only() -> None:
    health = Health(Clock())
    health.failed("t", POLICY)
    health.failed("t", POLICY)
    health.succeeded("t")  # a success resets the count
    health.failed("t", POLICY)
    health.failed("t", POLICY)
    assert health.state("t") == "closed"
    assert health.failed("t", POLICY) is True
    assert health.state("t") == "open"
    skip = health.admit("t", POLICY)
    assert not skip.allowed and skip.retry_in_s == 10.0
    assert health.stats()["counters"]["breaker_opened"] == 1
    assert health.stats()["counters"]["breaker_skips"] == 1


def test_half_open_lets_one_probe_through() -> None:
    clock = Clock()
    health = Health(clock)
    opened(health)
    clock.now += 10.0
    assert health.state("t") == "half_open"
    probe = health.admit("t", POLICY)
    assert probe.allowed and probe.probe
    # While the probe is in flight everyone else is still skipped.
    assert not health.admit("t", POLICY).allowed
    health.succeeded("t")
    assert health.state("t") == "closed"
    assert health.admit("t", POLICY).allowed


def test_failed_probe_reopens_at_once() -> None:
    clock = Clock()
    health = Health(clock)
    opened(health)
    clock.now += 10.0
    assert health.admit("t", POLICY).probe
    health.failed("t", POLICY)  # one failure is enough in half-open
    assert health.state("t") == "open"
    assert health.admit("t", POLICY).retry_in_s == 10.0


def test_cancelled_probe_frees_the_slot() -> None:
    clock = Clock()
    health = Health(clock)
    opened(health)
    clock.now += 10.0
    assert health.admit("t", POLICY).probe
    health.released("t")
    assert health.admit("t", POLICY).probe


def test_lost_probe_stops_blocking_after_a_cooldown() -> None:
    clock = Clock()
    health = Health(clock)
    opened(health)
    clock.now += 10.0
    assert health.admit("t", POLICY).probe
    clock.now += 10.5
    assert health.admit("t", POLICY).probe


def test_long_retry_after_holds_the_target() -> None:
    clock = Clock()
    health = Health(clock)
    assert health.failed("t", POLICY, hold_s=3600.0) is True  # capped at max_cooldown_s
    assert health.admit("t", POLICY).retry_in_s == 60.0
    clock.now += 60.0
    assert health.admit("t", POLICY).probe


def test_disabled_breaker_never_skips() -> None:
    health = Health(Clock())
    off = BreakerPolicy(failures=0)
    for _ in range(20):
        health.failed("t", off, hold_s=100)
    assert health.admit("t", off).allowed
    assert health.stats()["targets"] == {}


def test_windows_are_remembered_for_a_while() -> None:
    clock = Clock()
    health = Health(clock)
    assert health.window("t", 600) == (False, None)
    health.learn_window("t", 4096)
    assert health.window("t", 600) == (True, 4096)
    clock.now += 601
    assert health.window("t", 600) == (False, None)
