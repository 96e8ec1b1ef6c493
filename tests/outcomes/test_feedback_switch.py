"""Feedback is on only where it can be used (issue 48 review): without a ``feedback:`` section or
an ``experiment:`` block no decision is indexed and a report is refused with a clear answer; with
either, a report after the answer (a late one included) is matched as before."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from switchyard import Switchyard
from switchyard.engine.feedback import FeedbackOffError

HELLO = [{"role": "user", "content": "hello"}]


def _indexes(sy: Switchyard) -> bool:
    """Whether the engine hands its decision records to the feedback index."""
    return any(getattr(sink, "__self__", None) is sy.feedback_store for sink in sy.engine.sinks)


async def test_without_feedback_config_nothing_is_indexed_and_a_report_is_refused(config: dict[str, Any]) -> None:
    async with Switchyard.from_config(config) as sy:
        await sy.complete(model="mix", messages=HELLO, session_id="off-1")
        assert not _indexes(sy)
        with pytest.raises(FeedbackOffError) as caught:
            await sy.feedback(session_id="off-1", resolved=True)
        assert caught.value.status == 404 and caught.value.param == "feedback.enabled"
        reply = await sy.dispatch("POST", "/v1/feedback", b'{"session_id": "off-1", "resolved": true}', {})
        assert reply.status == 404
        error = orjson.loads(reply.body)["error"]
        assert error["code"] == "feedback_off" and "feedback: {enabled: true}" in error["message"]


@pytest.mark.parametrize(
    "extra",
    [
        {"feedback": {}},
        {"feedback": {"enabled": True}},
        {"routes_experiment": {"mode": "shadow", "baseline": "capable"}},
    ],
    ids=["section", "enabled", "experiment"],
)
async def test_a_feedback_section_or_an_experiment_turns_it_on_and_a_late_report_matches(
    config: dict[str, Any], extra: dict[str, Any]
) -> None:
    cfg = {**config, **{k: v for k, v in extra.items() if k == "feedback"}}
    if "routes_experiment" in extra:
        cfg["routes"] = {
            **config["routes"],
            "mix": {**config["routes"]["mix"], "experiment": extra["routes_experiment"]},
        }
    async with Switchyard.from_config(cfg) as sy:
        done = await sy.complete(model="mix", messages=HELLO, session_id="on-1")
        for i in range(5):  # other sessions in between: the report comes late
            await sy.complete(model="mix", messages=HELLO, session_id=f"other-{i}")
        assert _indexes(sy)
        by_session = await sy.feedback(session_id="on-1", resolved=True)
        by_request = await sy.feedback(request_id=done.record.request_id, score=0.5)
    assert by_session["matched"] and by_session["route"] == "mix" and by_request["matched"]


async def test_enabled_false_wins_over_an_experiment(config: dict[str, Any]) -> None:
    routes = {
        **config["routes"],
        "mix": {**config["routes"]["mix"], "experiment": {"control_share": 0.5, "baseline": "capable"}},
    }
    async with Switchyard.from_config({**config, "routes": routes, "feedback": {"enabled": False}}) as sy:
        await sy.complete(model="mix", messages=HELLO, session_id="forced-off")
        assert not _indexes(sy)
        with pytest.raises(FeedbackOffError):
            await sy.feedback(session_id="forced-off", resolved=False)
