"""Live threshold control: the controller's maths on score streams with abrupt shifts, budget
mode, warm start, bounds, and sharing one threshold between replicas through the state store."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _redis import RedisServer

from switchyard.protocol.session import Updater
from switchyard.routers.learned.control import Observation, ThresholdControl, ThresholdController, warm_start
from switchyard.routers.learned.sync import KEY, SharedControl
from switchyard.state.memory import MemoryStore
from switchyard.state.redis_store import RedisStore

# Score distributions of five "benchmarks" (mean, spread): far apart, as a probe's scores are
# when the prompt format changes (one benchmark all low, another all high, one narrow).
BENCHMARKS = {"a": (0.2, 0.05), "b": (0.5, 0.1), "c": (0.8, 0.03), "d": (0.45, 0.2), "e": (0.65, 0.02)}


def stream(order: Sequence[str], seed: int, n: int = 800) -> list[float]:
    """Scores of ``n`` prompts per benchmark, benchmark by benchmark in ``order``."""
    rng = random.Random(seed)
    out: list[float] = []
    for name in order:
        mu, sd = BENCHMARKS[name]
        out += [min(1.0, max(0.0, rng.gauss(mu, sd))) for _ in range(n)]
    return out


def replay(
    controller: ThresholdController, scores: Sequence[float], costs: Sequence[tuple[float, float]] = ()
) -> list[bool]:
    """Decides every score in order (one a second) and returns whether each went capable."""
    decided = []
    for i, score in enumerate(scores):
        capable = score >= controller.threshold()
        eff, cap = costs[i] if costs else (0.0, 0.0)
        controller.observe(Observation(float(i), score, capable, eff, cap))
        decided.append(capable)
    return decided


def worst_window(decided: Sequence[bool], target: float, window: int = 500, skip: int = 200) -> float:
    """The largest |share - target| over every window of ``window`` decisions after ``skip``."""
    prefix = [0]
    for d in decided:
        prefix.append(prefix[-1] + d)
    return max(abs((prefix[s + window] - prefix[s]) / window - target) for s in range(skip, len(decided) - window + 1))


def share_control(**keys: Any) -> ThresholdController:
    return ThresholdController(ThresholdControl(target_capable_share=0.3, **keys), 0.5)


@pytest.mark.parametrize("orders", [list(itertools.permutations("abcde"))[::6]])
def test_share_holds_within_five_points_in_every_window_on_every_ordering(orders: list[tuple[str, ...]]) -> None:
    assert len(orders) == 20
    worst = {order: worst_window(replay(share_control(), stream(order, seed=n)), 0.3) for n, order in enumerate(orders)}
    assert max(worst.values()) <= 0.05, worst
    # a fixed threshold calibrated on the whole mix misses badly on the same streams
    fixed = max(worst_window([s >= 0.55 for s in stream(order, seed=n)], 0.3) for n, order in enumerate(orders))
    assert fixed > 0.2


def test_the_quantile_alone_or_a_long_window_is_too_slow_after_a_shift() -> None:
    orders = list(itertools.permutations("abcde"))[::30]
    slow = max(worst_window(replay(share_control(window=512), stream(o, seed=n)), 0.3) for n, o in enumerate(orders))
    assert slow > 0.05


def test_budget_mode_holds_the_spend_per_simulated_hour() -> None:
    # 3,600 prompts an hour (one a second), costs vary per prompt; the budget buys ~30 % capable
    rng = random.Random(7)
    scores = stream("cadbe", seed=3, n=3600)
    costs = [(0.001 * (0.5 + rng.random()), 0.02 * (0.5 + rng.random())) for _ in scores]
    budget = 3600 * (0.001 + 0.3 * 0.019)
    controller = ThresholdController(ThresholdControl(budget_usd_per_hour=budget), 0.5)
    decided = replay(controller, scores, costs)
    spent = [cap if d else eff for d, (eff, cap) in zip(decided, costs, strict=True)]
    hours = [sum(spent[h * 3600 : (h + 1) * 3600]) for h in range(len(spent) // 3600)]
    assert len(hours) == 5
    assert all(abs(h / budget - 1) <= 0.05 for h in hours), [round(h / budget, 3) for h in hours]


def test_warm_start_is_the_configured_or_the_calibrated_threshold() -> None:
    points = [{"target_share": 0.2, "threshold": 0.61}, {"target_share": 0.3, "threshold": 0.58}]
    assert warm_start(ThresholdControl(target_capable_share=0.3, start=0.7), points) == 0.7
    assert warm_start(ThresholdControl(target_capable_share=0.25), points) in (0.61, 0.58)
    assert warm_start(ThresholdControl(target_capable_share=0.3), points) == 0.58
    assert warm_start(ThresholdControl(target_capable_share=0.3), None) == 0.5
    assert warm_start(ThresholdControl(target_capable_share=0.3, min=0.6), points) == 0.6
    controller = ThresholdController(ThresholdControl(target_capable_share=0.3, warmup=10), 0.58)
    for i in range(9):  # before the warm-up is over the threshold stays where it started
        controller.observe(Observation(float(i), 0.9, True))
        assert controller.threshold() == 0.58
    controller.observe(Observation(9.0, 0.9, True))
    assert controller.threshold() != 0.58


def test_threshold_moves_at_most_max_step_and_stays_in_bounds() -> None:
    controller = ThresholdController(
        ThresholdControl(target_capable_share=0.3, max_step=0.01, min=0.3, max=0.7, warmup=1), 0.5
    )
    previous = controller.threshold()
    for i, score in enumerate([0.99] * 100 + [0.01] * 200):
        controller.observe(Observation(float(i), score, score >= previous))
        now = controller.threshold()
        assert abs(now - previous) <= 0.01 + 1e-12 and 0.3 <= now <= 0.7
        previous = now
    assert previous == pytest.approx(0.3)  # driven to the floor by the low scores, no further


class CountingStore:
    """A store that counts the round trips routers make."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.updates = 0

    async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        self.updates += 1
        return await self.inner.update(key, fn, ttl_s=ttl_s)

    async def get(self, key: str) -> dict[str, Any] | None:
        return await self.inner.get(key)


async def two_replicas_share(store: Any) -> tuple[SharedControl, SharedControl, CountingStore]:
    counting = CountingStore(store)
    spec = ThresholdControl(target_capable_share=0.3, sync_every=10, sync_s=1e6, warmup=8)
    a, b = SharedControl(ThresholdController(spec, 0.5)), SharedControl(ThresholdController(spec, 0.5))
    # Replica A sees only low scores, B only high ones: alone each would settle on its own
    # threshold; shared, both read the same merged window.
    rng = random.Random(5)
    for i in range(100):
        for replica, score in ((a, rng.uniform(0.1, 0.2)), (b, rng.uniform(0.8, 0.9))):
            replica.book(Observation(float(i), score, score >= replica.controller.threshold()))
            if replica.due(float(i)):
                await replica.sync(counting, float(i))  # type: ignore[arg-type]
    return a, b, counting


async def test_replicas_share_one_window_with_batched_writes() -> None:
    a, b, counting = await two_replicas_share(MemoryStore())
    assert counting.updates == 20  # 200 decisions, one write per 10: never one per request
    value = await counting.get(KEY)
    assert value is not None and value["seen"] == 200 and len(value["obs"]) == 100
    # each counts every replica's decisions as of its own last write (A wrote before B's last batch)
    assert (a.controller.seen, b.controller.seen) == (190, 200)
    # both thresholds sit between the two replicas' score ranges, close to each other
    assert 0.3 < a.controller.threshold() < 0.9 and 0.3 < b.controller.threshold() < 0.9
    assert abs(a.controller.threshold() - b.controller.threshold()) < 0.1
    alone = ThresholdController(ThresholdControl(target_capable_share=0.3, warmup=8), 0.5)
    rng = random.Random(5)
    replay(alone, [rng.uniform(0.1, 0.2) for _ in range(100)])
    assert alone.threshold() < 0.25  # A on its own would have stayed among its low scores


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


async def test_replicas_share_one_window_through_redis(redis_server: RedisServer) -> None:
    store, reader = RedisStore(redis_server.url, timeout_s=5), RedisStore(redis_server.url, timeout_s=5)
    try:
        a, b, counting = await two_replicas_share(store)
        value = await reader.get(KEY)
    finally:
        await store.aclose()
        await reader.aclose()
    assert counting.updates == 20
    assert value is not None and value["seen"] == 200
    assert abs(a.controller.threshold() - b.controller.threshold()) < 0.1 and a.controller.threshold() > 0.3


async def test_a_failing_store_keeps_deciding_locally() -> None:
    class Down:
        async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
            raise ConnectionError("redis down")

    shared = SharedControl(ThresholdController(ThresholdControl(target_capable_share=0.3, sync_every=4), 0.5))
    for i in range(6):
        shared.book(Observation(float(i), 0.5, False))
    assert shared.due(6.0)
    assert await shared.sync(Down(), 6.0) is False  # type: ignore[arg-type]
    assert shared.sync_failures == 1 and shared.state()["pending"] == 6
    ok = MemoryStore()
    assert await shared.sync(ok, 7.0)
    assert shared.state()["pending"] == 0 and (await ok.get(KEY))["seen"] == 6  # type: ignore[index]


def test_the_block_is_validated() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        ThresholdControl()
    with pytest.raises(ValueError, match="exactly one of"):
        ThresholdControl(target_capable_share=0.3, budget_usd_per_hour=1.0)
    with pytest.raises(ValueError, match="must not exceed"):
        ThresholdControl(target_capable_share=0.3, min=0.8, max=0.2)
    with pytest.raises(ValueError, match="budget mode"):
        ThresholdControl(target_capable_share=0.3, cost_per_call={"capable": 1.0, "efficient": 0.1})
    with pytest.raises(ValueError, match="capable must cost more"):
        ThresholdControl(budget_usd_per_hour=1.0, cost_per_call={"capable": 0.1, "efficient": 0.1})
