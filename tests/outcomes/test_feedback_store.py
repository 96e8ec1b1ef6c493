"""Where feedback is kept (issue 48, item 1): a bounded map on the memory backend that never
evicts router state, and a real Redis shared by two routers (replicas, or ``--workers``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from switchyard import Switchyard
from switchyard.engine.feedback import FeedbackStore, parse_feedback
from switchyard.state.memory import MemoryStore

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def config(config: dict[str, Any]) -> dict[str, Any]:
    """The skeleton config with feedback on (off without a ``feedback:`` section)."""
    return {**config, "feedback": {}}


async def test_the_memory_store_keeps_at_most_max_entries_reports_and_leaves_state_alone() -> None:
    state = MemoryStore(max_entries=10)
    await state.set("route:s:slot", {"tier": "capable"})
    store = FeedbackStore(state, ttl_s=60, max_entries=50, index_entries=50)
    for i in range(500):
        await store.report(parse_feedback({"session_id": f"s{i}", "resolved": i % 2 == 0}), None)
    assert isinstance(store.reports, MemoryStore) and len(store.reports) == 50
    assert await store.outcome(None, session_id="s499") is not None  # the latest are kept
    assert await store.outcome(None, session_id="s0") is None  # the oldest were evicted
    assert await state.get("route:s:slot") == {"tier": "capable"}  # router state untouched
    assert len(state) == 1


async def test_a_report_is_kept_under_its_tenant_only() -> None:
    store = FeedbackStore(MemoryStore(), ttl_s=60, max_entries=50, index_entries=50)
    await store.report(parse_feedback({"session_id": "s", "score": 0.5}), "alice")
    assert (await store.outcome("alice", session_id="s") or {}).get("score") == 0.5
    assert await store.outcome("bob", session_id="s") is None
    assert await store.outcome(None, session_id="s") is None


async def test_library_feedback_is_matched_and_written_to_the_decision_log(
    config: dict[str, Any], tmp_path: Path
) -> None:
    log = tmp_path / "decisions.jsonl"
    async with Switchyard.from_config({**config, "decision_log": str(log)}) as sy:
        done = await sy.complete(model="mix", messages=HELLO, session_id="lib-1")
        by_session = await sy.feedback(session_id="lib-1", resolved=True)
        by_request = await sy.feedback(request_id=done.record.request_id, reward=3.0, labels=["a"])
        unknown = await sy.feedback(session_id="lib-unknown", score=0.0)
    sy.close()  # the decision log's file
    assert (by_session["matched"], by_request["matched"], unknown["matched"]) == (True, True, False)
    lines = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    reports = [x for x in lines if x.get("object") == "switchyard.feedback"]
    assert [r["id"] for r in reports] == [by_session["id"], by_request["id"], unknown["id"]]
    assert reports[1]["reward"] == 3.0 and reports[1]["request_id"] == done.record.request_id


async def test_a_session_id_longer_than_the_records_keep_is_matched(config: dict[str, Any], tmp_path: Path) -> None:
    # Terminal-Bench trial names run to ~170 characters; records keep ids over 128 as a hash.
    long_id = "terminal-bench-core/" + "x" * 180
    log = tmp_path / "decisions.jsonl"
    async with Switchyard.from_config({**config, "decision_log": str(log)}) as sy:
        done = await sy.complete(model="mix", messages=HELLO, session_id=long_id)
        answer = await sy.feedback(session_id=long_id, resolved=True)
    sy.close()
    assert answer["matched"] is True
    lines = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    (report,) = [x for x in lines if x.get("object") == "switchyard.feedback"]
    assert report["session_id"] == done.record.session_id != long_id


async def test_two_routers_on_one_redis_share_reports_and_known_decisions(
    config: dict[str, Any], tmp_path: Path
) -> None:
    from _redis import RedisServer

    server = RedisServer(tmp_path).start()
    try:
        shared = {**config, "state": {"backend": "redis", "url": server.url, "timeout_s": 5.0}}
        async with Switchyard.from_config(shared) as a, Switchyard.from_config(shared) as b:
            done = await a.complete(model="mix", messages=HELLO, session_id="replicated")
            await a.feedback_store.settle()  # the index entry is written off the request path
            first = await b.feedback(session_id="replicated", resolved=False)
            by_request = await b.feedback(request_id=done.record.request_id, score=1.0)
            again = await a.feedback(session_id="replicated", resolved=True)
            kept = await b.feedback_store.outcome(None, session_id="replicated")
        assert first["matched"] and first["route"] == "mix" and by_request["matched"]
        assert (first["replaced"], again["replaced"]) == (False, True)
        assert kept is not None and kept["resolved"] is True  # the latest report, seen by the other
    finally:
        server.stop()


def test_the_drop_in_clients_report_feedback(config: dict[str, Any]) -> None:
    import switchyard

    client = switchyard.OpenAI(config)
    try:
        headers = {"x-switchyard-session-id": "dropin-1"}
        client.chat.completions.create(model="mix", messages=HELLO, extra_headers=headers)  # type: ignore[arg-type]
        answer = client.switchyard_feedback(session_id="dropin-1", resolved=True)
        assert answer["matched"] is True and answer["route"] == "mix"
    finally:
        client.switchyard.close()


async def test_the_async_drop_in_client_reports_feedback(config: dict[str, Any]) -> None:
    import switchyard

    client = switchyard.AsyncAnthropic(config)
    headers = {"x-switchyard-session-id": "dropin-2"}
    await client.messages.create(model="mix", max_tokens=16, messages=HELLO, extra_headers=headers)
    answer = await client.switchyard_feedback(session_id="dropin-2", score=0.75)
    assert answer["matched"] is True
    await client.switchyard.aclose()


async def test_the_index_of_known_decisions_is_bounded_and_an_evicted_one_answers_unmatched() -> None:
    from switchyard.engine.records import DecisionRecord

    store = FeedbackStore(MemoryStore(), ttl_s=60, max_entries=50, index_entries=4)
    for i in range(3):  # each record indexes its request id and its session id
        store.seen(DecisionRecord(request_id=f"req-{i}", route="agent", router="random", session_id=f"s{i}"))
    late = await store.report(parse_feedback({"session_id": "s0", "resolved": True}), None)
    recent = await store.report(parse_feedback({"request_id": "req-2", "resolved": True}), None)
    assert (late.matched, recent.matched, recent.route) == (False, True, "agent")
    assert await store.outcome(None, session_id="s0") is not None  # the late report is kept all the same
