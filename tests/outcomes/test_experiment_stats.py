"""``switchyard stats --experiment`` on a hand-built decision log (issue 48): arms per session,
Welch intervals worked out by hand, feedback joined by session and by request id within its own
tenant only, the latest report winning, and shadow mode's predicted saving."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from switchyard.cli import main
from switchyard.engine.experiment_stats import experiment_stats
from switchyard.protocol.intervals import Z95


def decision(
    route: str, arm: str, session: str | None, cost: float, *, tenant: str | None = "a", **extra: Any
) -> dict[str, Any]:
    request_id = extra.pop("request_id", f"req-{session}-{cost}-{arm}")
    details = {"arm": arm, **extra}
    return {
        "request_id": request_id,
        "route": route,
        "session_id": session,
        "tenant": tenant,
        "cost_usd": cost,
        "router_cost": {"cost_usd": 0.0},
        "feature_cost_usd": 0.0,
        "status": 200,
        "details": details,
    }


def report(
    session: str | None = None, request: str | None = None, *, tenant: str | None = "a", ts: float = 1.0, **outcome: Any
) -> dict[str, Any]:
    return {
        "object": "switchyard.feedback",
        "session_id": session,
        "request_id": request,
        "tenant": tenant,
        "ts": ts,
        **outcome,
    }


LOG: list[dict[str, Any]] = [
    # control: three sessions costing 1, 2, 3 (session c1 in two requests of 0.5)
    decision("agent", "control", "c1", 0.5),
    decision("agent", "control", "c1", 0.5, request_id="c1-second"),
    decision("agent", "control", "c2", 2.0),
    decision("agent", "control", "c3", 3.0),
    # routed: four sessions
    decision("agent", "routed", "r1", 0.5),
    decision("agent", "routed", "r2", 0.5),
    decision("agent", "routed", "r3", 1.0, request_id="r3-only"),
    decision("agent", "routed", "r4", 1.0),
    # a failed request counts for nothing
    {**decision("agent", "routed", "r5", 9.0), "status": 502},
    # shadow on another route: served 2.0 each, would have cost 0.5 and 1.0
    decision("other", "shadow", "s1", 2.0, would_select="efficient", would_cost_usd=0.5),
    decision("other", "shadow", "s2", 2.0, would_select="efficient", would_cost_usd=1.0),
    # outcomes
    report("c1", resolved=True),
    report("c2", resolved=False),
    report("c3", resolved=True),
    report("r1", resolved=False, ts=1.0),
    report("r1", resolved=True, ts=2.0),  # the latest counts
    report(request="r3-only", resolved=False),  # joined through its request
    report("r2", resolved=False, tenant="b"),  # another tenant's same id: joins nothing
    report("r4", resolved=True),
]


def test_costs_outcomes_and_intervals_per_arm() -> None:
    stats = experiment_stats(LOG)
    agent = stats["agent"]
    control, routed = agent["arms"]["control"], agent["arms"]["routed"]
    assert (control["sessions"], control["requests"], routed["sessions"]) == (3, 4, 4)
    # control costs 1, 2, 3: mean 2, sample variance 1
    cost = control["cost_per_session"]
    assert cost["mean"] == pytest.approx(2.0)
    assert cost["high"] - cost["mean"] == pytest.approx(Z95 * math.sqrt(1 / 3))
    # routed costs 0.5, 0.5, 1, 1: mean 0.75, variance 1/12
    diff = agent["routed_vs_control"]["cost_per_session"]
    assert diff["diff"] == pytest.approx(-1.25)
    assert diff["high"] - diff["diff"] == pytest.approx(Z95 * math.sqrt(1 / 3 + (1 / 12) / 4))
    # resolved: control 1, 0, 1; routed r1 → 1 (latest), r3 → 0 (by request), r4 → 1; r2's only report is b's
    assert control["resolved"]["mean"] == pytest.approx(2 / 3)
    assert (routed["with_feedback"], routed["resolved"]["mean"]) == (3, pytest.approx(2 / 3))
    assert agent["routed_vs_control"]["resolved"]["diff"] == pytest.approx(0.0)


def test_shadow_predicted_saving() -> None:
    shadow = experiment_stats(LOG)["other"]["shadow"]
    saving = shadow["predicted_saving_per_session"]
    assert saving["mean"] == pytest.approx(1.25) and saving["n"] == 2
    assert shadow["predicted_saved_share"] == pytest.approx(2.5 / 4.0)


def test_one_tenant_sees_only_its_own_sessions() -> None:
    assert experiment_stats(LOG, tenant="b") == {}
    mine = experiment_stats(LOG, tenant="a")["agent"]["arms"]["routed"]
    assert mine["sessions"] == 4


def test_the_cli_prints_and_dumps_the_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "decisions.jsonl"
    log.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in LOG))
    assert main(["stats", str(log), "--experiment"]) == 0
    text = capsys.readouterr().out
    assert "route agent" in text and "routed - control: $/session -1.250000" in text and "shadow: predicted" in text
    assert main(["stats", str(log), "--experiment", "--json", "--route", "other"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["experiment"]) == ["other"]
    # The plain totals read past the feedback lines without a warning.
    assert main(["stats", str(log), "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and json.loads(captured.out)["skipped_lines"] == 0


def test_a_rate_interval_stays_within_its_bounds_on_few_sessions() -> None:
    log = [decision("tiny", "control", f"c{i}", 1.0) for i in range(2)]
    log += [decision("tiny", "routed", f"r{i}", 1.0) for i in range(2)]
    log += [report(f"c{i}", resolved=i == 0) for i in range(2)] + [report(f"r{i}", resolved=i == 0) for i in range(2)]
    view = experiment_stats(log)["tiny"]
    rate = view["arms"]["control"]["resolved"]
    assert (rate["low"], rate["high"]) == (0.0, 1.0)
    diff = view["routed_vs_control"]["resolved"]
    assert (diff["low"], diff["high"]) == (-1.0, 1.0)


def mirrored(session: str, cost: float, would: float, mirror: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    """A shadow record served by ``capable`` whose router chose ``efficient`` (``would``: priced)."""
    line = decision("sh", "shadow", session, cost, would_select="efficient", would_cost_usd=would, **extra)
    line["selected"] = "capable"
    if mirror is not None:
        line["details"]["mirror"] = mirror
        line["experiment_cost_usd"] = mirror.get("cost_usd", 0.0)
    return line


MIRROR_LOG: list[dict[str, Any]] = [
    # m1: one request routed elsewhere (priced 0.1, its mirror really cost 0.3), one the baseline
    # would have served itself (exact: 2.0)
    mirrored("m1", 1.0, 0.1, {"target": "efficient", "cost_usd": 0.3}),
    {**decision("sh", "shadow", "m1", 2.0, would_select="capable", would_cost_usd=2.0), "selected": "capable"},
    mirrored("m2", 1.0, 0.1, {"target": "efficient", "cost_usd": 0.1}),
    mirrored("u1", 4.0, 0.4, None),  # not mirrored
    mirrored("u2", 1.0, 0.1, {"target": "efficient", "skipped": "busy"}),
]


def test_mirrors_correct_shadows_prediction_by_the_measured_cost_ratio() -> None:
    shadow = experiment_stats(MIRROR_LOG)["sh"]["shadow"]
    # R = (0.3 + 0.1) / (0.1 + 0.1) = 2. Per session, baseline answers (mirrors left out) minus
    # exact part minus R x priced part: m1 3.0 - 2.0 - 0.2 = 0.8; m2 1.0 - 0.2 = 0.8;
    # u1 4.0 - 0.8 = 3.2; u2 1.0 - 0.2 = 0.8. Σ 5.6 of 9.0.
    assert shadow["basis"] == "mirrors"
    assert shadow["cost_ratio"]["mean"] == pytest.approx(2.0)
    assert shadow["predicted_saving_per_session"]["mean"] == pytest.approx(5.6 / 4)
    assert shadow["predicted_saved_share"] == pytest.approx(5.6 / 9.0)
    # Equal verbosity: 0.9 + 0.9 + 3.6 + 0.9 = 6.3 of 9.0.
    assert shadow["equal_verbosity"]["predicted_saved_share"] == pytest.approx(0.7)
    assert (shadow["mirrored_sessions"], shadow["mirrored_requests"], shadow["mirror_skipped"]) == (2, 2, 1)
    assert shadow["mirror_cost_usd"] == pytest.approx(0.4)
    # The session-bootstrap ratio can only be a mix of m1's 3.0 and m2's 1.0.
    ratio = shadow["cost_ratio"]
    assert 1.0 - 1e-9 <= ratio["low"] < ratio["high"] <= 3.0 + 1e-9
    bounds = shadow["predicted_saved_share_interval"]
    assert bounds["low"] <= shadow["predicted_saved_share"] <= bounds["high"]
    # The arm's own cost includes the mirrors: visible as experiment spend. (3.3 + 1.1 + 4 + 1) / 4
    arm = experiment_stats(MIRROR_LOG)["sh"]["arms"]["shadow"]
    assert arm["cost_per_session"]["mean"] == pytest.approx(9.4 / 4)


def test_the_cli_says_what_the_prediction_rests_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "decisions.jsonl"
    log.write_bytes(b"\n".join(orjson.dumps(line) for line in MIRROR_LOG) + b"\n")
    assert main(["stats", str(log), "--experiment"]) == 0
    text = capsys.readouterr().out
    assert "corrected by 2 mirrored sessions (2 requests)" in text and "62.2%" in text
    assert "at equal verbosity (uncorrected)" in text and "share 70.0%" in text
    log.write_bytes(b"\n".join(orjson.dumps(line) for line in LOG) + b"\n")
    assert main(["stats", str(log), "--experiment", "--route", "other"]) == 0
    assert "assumes the chosen targets write as much as the baseline" in capsys.readouterr().out


def test_one_mirrored_session_gives_its_own_ratio_and_no_spread_from_it() -> None:
    log = [mirrored("m1", 1.0, 0.1, {"target": "efficient", "cost_usd": 0.3}), mirrored("u1", 4.0, 0.4, None)]
    shadow = experiment_stats(log)["sh"]["shadow"]
    # R = 3 from the one pair; every resample draws that same session, so R's interval is [3, 3].
    assert shadow["cost_ratio"] == {"mean": pytest.approx(3.0), "low": pytest.approx(3.0), "high": pytest.approx(3.0)}
    # m1: 1.0 - 3 x 0.1 = 0.7; u1: 4.0 - 3 x 0.4 = 2.8; of 5.0.
    assert shadow["predicted_saved_share"] == pytest.approx(3.5 / 5.0)
    assert shadow["mirrored_sessions"] == 1 and shadow["resamples"] == 1000


def test_sessions_only_decided_are_left_out_of_the_cost_but_not_of_the_outcomes() -> None:
    # A gateway that asks /v1/decision buys its answers elsewhere: those sessions cost nothing
    # this log can see, and counting them as free would halve the routed arm's cost here.
    log = [
        decision("agent", "routed", "served", 2.0),
        decision("agent", "routed", "asked", 0.0, decision_only=True),
        decision("agent", "routed", "mixed", 0.0, decision_only=True),
        decision("agent", "routed", "mixed", 1.0, request_id="mixed-served"),
        decision("agent", "control", "c", 4.0),
        report("asked", resolved=True),
    ]
    view = experiment_stats(log)["agent"]
    routed = view["arms"]["routed"]
    assert routed["sessions"] == 3 and routed["decided_only_sessions"] == 1
    assert routed["cost_per_session"]["n"] == 2 and routed["cost_per_session"]["mean"] == pytest.approx(1.5)
    assert routed["resolved"]["n"] == 1
    assert view["routed_vs_control"]["cost_per_session"]["diff"] == pytest.approx(1.5 - 4.0)
