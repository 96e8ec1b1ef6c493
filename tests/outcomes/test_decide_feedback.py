"""The library's decide-only call books its decision as ``POST /v1/decision`` does (issue 48
review): a decision-log line per call and a feedback index entry, so a later report on its
session or request matches; the experiment arm and the session state are the endpoint's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml

from switchyard import Switchyard
from switchyard.cli import main
from switchyard.routers.experiment import control_draw

HELLO = [{"role": "user", "content": "hello"}]


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_decide_is_logged_once_per_call_and_feedback_on_it_matches(config: dict[str, Any], tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    sy = Switchyard.from_config({**config, "feedback": {}, "decision_log": str(log)})
    try:
        first = sy.decide_sync(model="mix", messages=HELLO, session_id="lib-1")
        second = sy.decide_sync(model="mix", messages=HELLO, session_id="lib-1")
        by_session = sy.feedback_sync(session_id="lib-1", resolved=True)
        by_request = sy.feedback_sync(request_id=second.request_id, score=0.5)
    finally:
        sy.close()
    assert by_session["matched"] and by_session["route"] == "mix"
    assert by_request["matched"]
    records = [line for line in lines(log) if "object" not in line]
    assert [r["request_id"] for r in records] == [first.request_id, second.request_id]
    for record in records:
        assert record["details"]["decision_only"] is True
        assert record["path"] is None  # in-process, as every library call
        assert record["cost_usd"] == 0.0 and record["selected"] == first.selected
    reports = [line for line in lines(log) if line.get("object") == "switchyard.feedback"]
    assert [r["matched"] for r in reports] == [True, True]


async def test_decide_and_the_endpoint_put_a_session_in_the_same_arm(config: dict[str, Any]) -> None:
    spec = {
        "type": "random",
        "targets": ["efficient", "capable"],
        "weights": [1, 0],  # the router always picks efficient; control sessions get capable
        "experiment": {"control_share": 0.5, "baseline": "capable"},
    }
    sessions = [f"arm-{i}" for i in range(8)]
    expected = {s: ("control" if control_draw(None, s) < 0.5 else "routed") for s in sessions}
    assert set(expected.values()) == {"control", "routed"}
    async with Switchyard.from_config({**config, "routes": {**config["routes"], "exp": spec}}) as sy:
        for session in sessions:
            record = await sy.decide(model="exp", messages=HELLO, session_id=session)
            body = orjson.dumps({"model": "exp", "messages": HELLO})
            reply = await sy.dispatch("POST", "/v1/decision", body, {"x-switchyard-session-id": session})
            answer = orjson.loads(reply.body)
            assert record.details["arm"] == expected[session]
            assert record.selected == answer["target"] == ("capable" if expected[session] == "control" else "efficient")
        assert sy.experiments is not None
        arms = sy.experiments.view()["exp"]["arms"]
    # Both calls of each session reached the experiment figures, one session per id and arm.
    for arm in ("control", "routed"):
        count = sum(a == arm for a in expected.values())
        assert (arms[arm]["sessions"], arms[arm]["requests"]) == (count, 2 * count)


def test_the_route_command_books_nothing(config: dict[str, Any], tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    cfg = tmp_path / "router.yaml"
    cfg.write_text(yaml.safe_dump({**config, "decision_log": str(log)}))
    assert main(["route", "-c", str(cfg), "-m", "mix", "--message", "hello", "--session", "cli-1"]) == 0
    assert not log.exists() or log.read_bytes() == b""
