"""Requests that only keep a session alive refresh its TTL with ``touch``, not a read-modify-write.

Affinity reuse and latched escalation turns read the state once and change nothing; a locked
``update`` there cost a Redis transaction per request. The state and its expiry must behave as
before: an active session keeps its assignment or latch past the TTL, an idle one loses it.
"""

from __future__ import annotations

from typing import Any

from _routing_helpers import assistant_call, capability, context, escalate, request, tool_result, user

from switchyard.protocol.errors import UpstreamConnectionError
from switchyard.protocol.session import Updater
from switchyard.routers.base import BuildContext, Router
from switchyard.routers.llm_classifier import LlmClassifierSpec
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingStore(MemoryStore):
    """A memory store on a fake clock that counts its writes by kind."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.updates = 0
        self.touches = 0

    async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        self.updates += 1
        return await super().update(key, fn, ttl_s=ttl_s)

    async def touch(self, key: str, *, ttl_s: float | None = None) -> bool:
        self.touches += 1
        return await super().touch(key, ttl_s=ttl_s)


def build(**keys: Any) -> Router:
    block = {
        "type": "llm_classifier",
        "classifier_target": "judge",
        "strong_target": "strong",
        "weak_target": "weak",
        **keys,
    }
    return LlmClassifierSpec.model_validate(block).build(BuildContext(route="r", targets={}))


def continuation(i: int) -> Any:
    msgs = [user("Make the build green")]
    for k in range(i):
        msgs += [assistant_call(f"c{k}"), tool_result(f"c{k}", f"result {k}")]
    return request(*msgs)


async def test_affinity_reuse_refreshes_without_update_and_keeps_the_ttl_rules() -> None:
    clock = Clock()
    store = CountingStore(clock)
    router = build(classify_trigger="new_session", base_threshold=0.5, threshold_step=0.2, state_ttl_s=100)
    call = ScriptedCall({"judge": [capability(0.9), capability(0.1, "LIM-1", "unsupported")]})
    first = await router.route(continuation(0), context(store), call)
    assert (first.candidates, first.source) == (("weak",), "llm-classifier")
    # Each kept turn comes 90 s after the last: past the first write's TTL by the third, alive
    # only because every reuse restarted the idle clock.
    for i in range(1, 4):
        clock.now += 90
        kept = await router.route(continuation(i), context(store), call)
        assert (kept.candidates, kept.source) == (("weak",), "affinity")
    assert (store.updates, store.touches) == (0, 3)
    assert len(call.calls) == 1
    clock.now += 101  # idle past the TTL: the assignment is gone, the judge is asked again
    again = await router.route(continuation(4), context(store), call)
    assert (again.candidates, again.source) == (("strong",), "llm-classifier")


async def test_latched_turns_refresh_without_update_and_keep_the_latch_alive() -> None:
    clock = Clock()
    store = CountingStore(clock)
    router = build(mode="escalation", confirmations=1, state_ttl_s=100)
    call = ScriptedCall({"weak": ["efficient answer"], "judge": [escalate(True)]})
    latching = await router.route(continuation(0), context(store, turn=0), call)
    assert latching.candidates[0] == "strong" and latching.details["escalation"]["latched"] is True
    assert store.updates == 1  # the verdict itself: a real read-modify-write
    stored = await store.get("escalation")
    for i in range(1, 4):
        clock.now += 90
        latched = await router.route(continuation(i), context(store, turn=i), call)
        assert (latched.source, latched.candidates[0]) == ("latched", "strong")
    assert (store.updates, store.touches) == (1, 3)
    assert await store.get("escalation") == stored  # refreshed, not rewritten
    assert call.targets_called() == ["weak", "judge"]
    clock.now += 101  # idle past the TTL: the latch is forgotten, the efficient flow resumes
    fresh = await router.route(continuation(4), context(store, turn=4), call)
    assert fresh.source == "escalation"


async def test_efficient_failure_refreshes_without_update_and_stores_nothing_new() -> None:
    clock = Clock()
    store = CountingStore(clock)
    router = build(mode="escalation", confirmations=2, state_ttl_s=100)
    call = ScriptedCall({"weak": ["efficient answer", UpstreamConnectionError("down")], "judge": [escalate(True)]})
    await router.route(continuation(0), context(store, turn=0), call)  # streak 1 of 2
    assert store.updates == 1
    clock.now += 90
    failed = await router.route(continuation(1), context(store, turn=1), call)
    assert failed.candidates == ("strong", "weak") and failed.details["escalation"]["streak"] == 1
    assert (store.updates, store.touches) == (1, 1)
    clock.now += 90  # 180 s after the write, 90 after the refresh: the streak is still there
    assert (await store.get("escalation") or {}).get("streak") == 1
