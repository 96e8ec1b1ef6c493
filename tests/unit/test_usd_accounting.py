"""Live USD accounting: the pricing of records, the ledger, and ``switchyard stats`` over a log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from _configs import skeleton_config

from switchyard.api import Switchyard
from switchyard.cli import main
from switchyard.engine.accounting import Pricing, RouteTiers, UsdLedger, record_from_log
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.targets import Price


def pricing(**kw: Any) -> Pricing:
    return Pricing(
        tiers={"r": RouteTiers(capable="big", efficient="small")},
        prices={"big": Price(input_per_mtok=10, output_per_mtok=40), "small": Price(input_per_mtok=1)},
        **kw,
    )


def test_pricing_fills_tier_baseline_and_feature_cost() -> None:
    record = DecisionRecord(request_id="1", route="r", router="knn", selected="small", input_tokens=1000)
    record.output_tokens = 500
    record.cost_usd = 0.001
    record.details["feature_ms"] = 200.0
    pricing(feature_usd_per_call=0.001, feature_usd_per_second=0.01)(record)
    assert record.tier == "efficient"
    assert record.feature_cost_usd == pytest.approx(0.001 + 0.002)
    assert record.baseline_cost_usd == pytest.approx((1000 * 10 + 500 * 40) / 1e6)
    assert record.total_cost_usd == pytest.approx(0.001 + 0.003)
    # A cached probe verdict extracted nothing; a failed request has no baseline.
    cached = DecisionRecord(request_id="2", route="r", router="knn", selected="big", status=502)
    pricing(feature_usd_per_call=0.001)(cached)
    assert (cached.tier, cached.feature_cost_usd, cached.baseline_cost_usd) == ("capable", 0.0, None)


def test_ledger_totals_per_route_and_session() -> None:
    ledger = UsdLedger(max_sessions=2)
    for n, (session, selected) in enumerate([("a", "small"), ("a", "big"), ("b", "small"), ("c", "small")]):
        record = DecisionRecord(request_id=str(n), route="r", router="x", session_id=session, selected=selected)
        record.input_tokens, record.cost_usd = 1_000_000, 1.0 if selected == "small" else 10.0
        pricing()(record)
        ledger(record)
    snap = ledger.snapshot()
    total = snap["total"]
    assert total["requests"] == 4 and total["capable_share"] == 0.25
    assert total["always_capable_usd"] == 40.0 and total["total_usd"] == 13.0 and total["saved_usd"] == 27.0
    assert list(snap["sessions"]) == ["r:c", "r:b"]  # most recent first, bounded to 2
    assert snap["routes"]["r"] == total


def test_record_from_log_names_a_bad_field() -> None:
    with pytest.raises(ValueError, match="'cost_usd'"):
        record_from_log({"route": "r", "cost_usd": "a lot"})


def test_stats_command_matches_the_live_ledger(
    tmp_path: Path, upstream: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = skeleton_config(upstream.port)
    config["accounting"] = {"baseline": {"mix": "capable"}}
    log = tmp_path / "decisions.jsonl"
    sy = Switchyard.from_config(config, decision_log=str(log))
    for n in range(6):
        body = orjson.dumps({"model": "mix", "messages": [{"role": "user", "content": f"question {n}"}]})
        reply = sy.run_sync(sy.dispatch("POST", "/v1/chat/completions", body, {"x-switchyard-session-id": f"s{n % 2}"}))
        assert reply.status == 200
    live = sy.ledger.snapshot(sessions=10)
    sy.close()
    with log.open("a") as fh:
        fh.write("not json\n")
    capsys.readouterr()
    assert main(["stats", str(log), "--json", "--sessions", "10"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out[out.index("{") :])
    assert data["skipped_lines"] == 1
    assert data["total"] == live["total"] and data["sessions"] == live["sessions"]
    assert data["routes"]["mix"]["saved_usd"] > 0 and 0 < data["total"]["capable_share"] < 1
    # Re-priced from the config: the same figures.
    assert main(["stats", str(log), "-c", _write(tmp_path, config), "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{") :])["total"] == live["total"]
    # The table.
    assert main(["stats", str(log), "--sessions", "2"]) == 0
    table = capsys.readouterr().out
    assert "route mix" in table and "session mix:s1" in table and "always-cap $" in table


def _write(tmp_path: Path, config: dict[str, Any]) -> str:
    import yaml

    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_stats_json_stays_parseable_with_bad_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A skipped line is reported on stderr: stdout with --json must stay one JSON object.
    log = tmp_path / "decisions.jsonl"
    log.write_text("not json\n[1, 2]\n")
    assert main(["stats", str(log), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["skipped_lines"] == 2
    assert f"{log}:1: skipped" in captured.err


def test_stage_router_declares_its_tiers_for_pricing_and_eval() -> None:
    # The stage router names its tiers itself (RouterSpec.tiers), so accounting and
    # `switchyard eval` read them from the route, not from prices or attribute names.
    from switchyard.config.build import build_pricing
    from switchyard.config.load import load_config
    from switchyard.eval.evaluate import resolve_tiers

    config = skeleton_config(1)
    config["routes"]["staged"] = {"type": "stage_router", "capable": "capable", "efficient": "efficient"}
    loaded = load_config(config)
    tiers = build_pricing(loaded).tiers["staged"]
    assert (tiers.capable, tiers.efficient) == ("capable", "efficient")
    choice = resolve_tiers(loaded, "staged")
    assert choice is not None and (choice.capable, choice.efficient, choice.origin) == ("capable", "efficient", "route")
