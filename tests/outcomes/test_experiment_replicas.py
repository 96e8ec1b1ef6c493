"""Issue 48's "done when" for replicas: two routers on one real Redis (two replicas) draw the
same experiment arm for a session, decide shadow mode's would-be choices exactly as one process
does (the stateful stage router's state is shared), match a report on one replica to decisions
served by the other, and keep one tenant's sessions out of another's reports. Shadow mode's
mirror draw holds too: a session is mirrored on both replicas or on neither, and each replica's
``/v1/stats`` view corrects its prediction with its mirrors (``tests/outcomes/test_mirror_workers.py``
checks the same draw across ``serve --workers`` processes, whose ``hash`` salts differ)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _convo import Step, bash, render, tool
from _redis import RedisServer
from _waits import eventually

from switchyard import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.access import Caller, current_caller
from switchyard.routers.experiment import control_draw, mirror_draw

HELLO = [{"role": "user", "content": "hello"}]
QUIET: list[Step] = [("system", "You are a coding agent."), ("user", "Fix the parser so that the tests pass.")]
OOM: list[Step] = [*QUIET, bash("python train.py", "RuntimeError: CUDA out of memory.")]
CALM: list[Step] = [*OOM, tool("Write", "ok", path="a.py"), tool("Edit", "ok"), tool("Edit", "ok")]
RUN = (QUIET, OOM, CALM)  # efficient, escalated by the OOM, then held one calm turn: session state


def router_config(base: dict[str, Any]) -> dict[str, Any]:
    config = {**base, "routes": dict(base["routes"])}
    config["routes"]["agent"] = {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "hold_turns": {"capable": 1},
        "experiment": {"mode": "shadow"},  # decides as usual (would_select), the capable target serves
    }
    config["routes"]["trial"] = {
        "type": "random",
        "targets": ["efficient", "capable"],
        "weights": [1, 0],
        "experiment": {"control_share": 0.5, "baseline": "capable"},
    }
    return config


async def answer(sy: Switchyard, model: str, messages: list[dict[str, Any]], session: str) -> Any:
    """The decision record of one answered request (its record reaches the sinks: the log, the
    feedback index)."""
    return (await sy.complete(model=model, messages=messages, session_id=session)).record


async def test_arms_shadow_choices_and_reports_hold_across_two_replicas_on_redis(
    config: dict[str, Any], tmp_path: Path
) -> None:
    async with Switchyard.from_config(router_config(config)) as one:  # the reference: one process
        reference = [await answer(one, "agent", render(steps)["messages"], "fix") for steps in RUN]
    alone = [r.details["would_select"] for r in reference]
    assert alone == ["efficient", "capable", "capable"]  # the last only by the hold the OOM turn left

    server = RedisServer(tmp_path).start()
    try:
        shared = {**router_config(config), "state": {"backend": "redis", "url": server.url, "timeout_s": 5.0}}
        async with Switchyard.from_config(shared) as a, Switchyard.from_config(shared) as b:
            replicas = (a, b)
            served = []
            for n, steps in enumerate(RUN):  # the turns alternate between the replicas
                record = await answer(replicas[n % 2], "agent", render(steps)["messages"], "fix")
                assert (record.details["arm"], record.selected) == ("shadow", "capable")
                served.append(record.details["would_select"])
            assert served == alone

            sessions = [f"arm-{i}" for i in range(8)]
            expected = {s: "control" if control_draw(None, s) < 0.5 else "routed" for s in sessions}
            assert set(expected.values()) == {"control", "routed"}
            for session in sessions:
                arms = [(await answer(r, "trial", HELLO, session)).details["arm"] for r in replicas]
                assert arms == [expected[session]] * 2

            await a.feedback_store.settle()  # a decision's index entry is written off the request path
            report = await b.feedback(session_id="arm-0", resolved=True)  # decided on both, reported on b
            assert (report["matched"], report["route"]) == (True, "trial")

            token = current_caller.set(Caller(key="alice", tenant="alice"))
            try:
                await answer(a, "trial", HELLO, "alice-only")
            finally:
                current_caller.reset(token)
            await a.feedback_store.settle()
            theirs = await b.feedback(session_id="alice-only", resolved=False, tenant="bob")
            mine = await b.feedback(session_id="alice-only", resolved=True, tenant="alice")
            assert (theirs["matched"], mine["matched"], mine["replaced"]) == (False, True, False)
    finally:
        server.stop()


async def test_the_mirror_draw_holds_across_two_replicas_and_each_corrects_its_prediction(
    config: dict[str, Any], tmp_path: Path
) -> None:
    sessions = [f"mirror-{i}" for i in range(8)]
    expected = {s: mirror_draw(None, s) < 0.5 for s in sessions}
    assert set(expected.values()) == {True, False}  # both kinds among these ids
    shadow: dict[str, Any] = {"type": "stage_router", "capable": "capable", "efficient": "efficient"}
    shadow["experiment"] = {"mode": "shadow", "mirror_share": 0.5}
    server = RedisServer(tmp_path).start()
    try:
        shared = {
            **config,
            "routes": {**config["routes"], "exp": shadow},
            "state": {"backend": "redis", "url": server.url, "timeout_s": 5.0},
        }
        emitted: list[list[DecisionRecord]] = [[], []]
        async with Switchyard.from_config(shared) as a, Switchyard.from_config(shared) as b:
            replicas = (a, b)
            for sy, records in zip(replicas, emitted, strict=True):
                sy.on_decision(records.append)
            for session in sessions:  # every session is served by both replicas
                for sy in replicas:
                    await sy.complete(model="exp", messages=HELLO, session_id=session)
            await eventually(lambda: [len(r) for r in emitted] == [len(sessions)] * 2, what="every record")
            for records in emitted:
                assert {r.session_id: "mirror" in r.details for r in records} == expected
                for record in (r for r in records if "mirror" in r.details):
                    assert record.details["mirror"]["cost_usd"] > 0
                    assert record.experiment_cost_usd == record.details["mirror"]["cost_usd"]
            for sy in replicas:  # GET /v1/stats → experiment, on each replica
                assert sy.experiments is not None
                view = sy.experiments.view()["exp"]["shadow"]
                assert (view["basis"], view["mirrored_sessions"]) == ("mirrors", sum(expected.values()))
    finally:
        server.stop()
