"""Judge routers in ``eval``, ``calibrate`` (dataset and proxy decision log) and ``replay``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from eval_helpers import config_text, write_jsonl

from switchyard.api import Switchyard
from switchyard.cli import main
from switchyard.server.runner import ServerThread

JUDGE_ROUTE = "  judged: {type: test_judge, capable: capable, efficient: efficient, judge: judge}\n"


def judge_config(tmp_path: Path, *, judge_client: str, extra_clients: str = "", base_url: str) -> Path:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(
        config_text(
            JUDGE_ROUTE,
            base_url=base_url,
            extra_clients=extra_clients,
            extra_targets=(
                f"  judge: {{client: {judge_client}, model: judge-m, "
                "price: {input_per_mtok: 1, output_per_mtok: 1}}\n"
            ),
        )
    )
    return cfg


def judge_data(tmp_path: Path) -> Path:
    prompts = ["a hard proof", "say hi", "another hard one", "thanks"]
    return write_jsonl(
        tmp_path / "d.jsonl",
        [
            {
                "id": f"j{i}",
                "prompt": p,
                "models": {"strong-m": {"correct": True}, "weak-m": {"correct": "hard" not in p}},
            }
            for i, p in enumerate(prompts)
        ],
    )


def test_judge_unusable_items_are_skipped_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SWITCHYARD_TEST_UNSET_KEY", raising=False)
    remote = (
        "  remote: {format: openai_chat, base_url: http://127.0.0.1:9/v1, api_key_env: SWITCHYARD_TEST_UNSET_KEY}\n"
    )
    cfg = judge_config(tmp_path, judge_client="remote", extra_clients=remote, base_url="http://127.0.0.1:9/v1")
    data = judge_data(tmp_path)
    argv = ["eval", "-c", str(cfg), "--route", "judged", "--dataset", str(data), "--no-progress"]
    assert main(argv) == 1  # nothing could be decided
    err = capsys.readouterr().err
    assert "decided none of the 4 item(s)" in err
    assert "environment variable SWITCHYARD_TEST_UNSET_KEY is not set" in err


def test_judge_reachable_is_called_and_booked(
    tmp_path: Path, upstream: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = judge_config(tmp_path, judge_client="local", base_url=f"http://127.0.0.1:{upstream.port}/v1")
    data = judge_data(tmp_path)
    argv = ["eval", "-c", str(cfg), "--route", "judged", "--dataset", str(data), "--no-progress", "--json"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    # The fake judge echoes the prompt: "hard" prompts go to capable, the rest to efficient.
    assert res["capable_share"] == 0.5 and res["quality"] == 1.0
    assert res["router_cost_usd"] > 0
    assert len(upstream.app.bodies("judge-m")) == 4
    assert not upstream.app.bodies("strong-m") and not upstream.app.bodies("weak-m")  # no answer calls


def test_items_the_router_cannot_decide_are_listed(
    tmp_path: Path, upstream: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = judge_config(tmp_path, judge_client="local", base_url=f"http://127.0.0.1:{upstream.port}/v1")
    rows = [json.loads(line) for line in judge_data(tmp_path).read_text().splitlines()]
    rows[1]["prompt"] = "please refuse this"  # the echoing judge refuses: the router cannot decide
    data = write_jsonl(tmp_path / "d2.jsonl", rows)
    argv = ["eval", "-c", str(cfg), "--route", "judged", "--dataset", str(data), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "3 item(s) decided, 1 skipped" in out
    assert "1 x RouterError: the judge gave no verdict (e.g. j1)" in out
    assert main([*argv, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["skipped_items"] == [{"id": "j1", "reason": "RouterError: the judge gave no verdict"}]
    assert res["n"] == 3


# -- calibrate ---------------------------------------------------------------------------------

SCORED = """\
  scored:
    type: test_score   # scores from the prompt
    capable: capable
    efficient: efficient
    threshold: 0.5     # default
  mix: {type: random, targets: [efficient, capable]}
"""


def score_data(tmp_path: Path, n: int = 20) -> Path:
    return write_jsonl(
        tmp_path / "s.jsonl",
        [
            {
                "id": f"s{i}",
                "prompt": f"score={i / n:.3f}",
                "models": {"strong-m": {"correct": True}, "weak-m": {"correct": i % 2 == 0}},
            }
            for i in range(n)
        ],
    )


def test_calibrate_share_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(SCORED))
    data = score_data(tmp_path)
    out = tmp_path / "tuned.yaml"
    argv = ["calibrate", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--no-progress"]
    assert main([*argv, "--capable-share", "0.3", "--write", str(out)]) == 0
    text = capsys.readouterr().out
    # Scores .000 .. .950: the top six (.70 .. .95) make 30%; the threshold lies in (.65, .70], near .675.
    assert "set routes.scored.threshold: 0.68" in text
    assert "capable share on s.jsonl: 30.0% (requested 30.0%)" in text
    written = out.read_text()
    assert written == cfg.read_text().replace("threshold: 0.5", "threshold: 0.68")
    assert "# scores from the prompt" in written and "# default" in written
    assert yaml.safe_load(written)["routes"]["scored"]["threshold"] == 0.68
    # The written config gives that share in eval.
    assert main(["eval", "-c", str(out), "--route", "scored", "--dataset", str(data), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["capable_share"] == pytest.approx(0.3)


def test_calibrate_converts_to_the_route_scale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text("  solve: {type: test_solve, capable: capable, efficient: efficient}\n"))
    data = score_data(tmp_path)
    out = tmp_path / "tuned.yaml"
    argv = ["calibrate", "-c", str(cfg), "--route", "solve", "--dataset", str(data), "--no-progress", "--json"]
    assert main([*argv, "--capable-share", "0.3", "--write", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    # Capable iff score >= .68  <=>  efficient iff p_solve = 1 - score >= .32
    assert res["score_threshold"] == 0.68 and res["threshold"] == 0.32
    assert "{type: test_solve, capable: capable, efficient: efficient, min_p_solve: 0.32}" in out.read_text()
    assert main(["eval", "-c", str(out), "--route", "solve", "--dataset", str(data), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["capable_share"] == pytest.approx(0.3)


def test_calibrate_budget_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(SCORED))
    data = score_data(tmp_path)
    argv = ["calibrate", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--no-progress", "--json"]
    costs = ["--cost-per-call", "capable=1.0", "--cost-per-call", "efficient=0.1"]
    assert main([*argv, "--budget-usd", "5", *costs]) == 0
    res = json.loads(capsys.readouterr().out)
    # 20 x $0.10 = $2 base; each capable call adds $0.90: three fit in $5 ($4.70).
    assert res["capable_share"] == pytest.approx(0.15) and res["cost_usd"] == pytest.approx(4.7)
    assert 0.8 < res["threshold"] <= 0.85
    assert main([*argv, "--budget-usd", "5"]) == 1
    assert "no cost for target" in capsys.readouterr().err


def test_calibrate_budget_reads_gappy_logs_like_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The first row lacks the efficient model and a later one has no outcome for it: the mapping
    # is checked against the models of the first rows together, and the gaps are skipped and
    # counted (before: "has no outcomes" from the first row, or a stop at the gap).
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(SCORED))
    data = score_data(tmp_path)
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    del rows[0]["models"]["weak-m"]
    rows[7]["models"]["weak-m"] = {"cost_usd": 0.001}
    write_jsonl(data, rows)
    argv = ["calibrate", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--no-progress", "--json"]
    costs = ["--cost-per-call", "capable=1.0", "--cost-per-call", "efficient=0.1"]
    assert main([*argv, "--budget-usd", "5", *costs]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["skipped"] == 2 and res["n"] == 18


def test_calibrate_refuses_routes_without_threshold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(SCORED))
    argv = [
        "calibrate",
        "-c",
        str(cfg),
        "--route",
        "mix",
        "--dataset",
        str(score_data(tmp_path)),
        "--capable-share",
        "0.3",
    ]
    assert main(argv) == 1
    assert "route type 'random' has no threshold to calibrate" in capsys.readouterr().err
    argv = ["calibrate", "-c", str(cfg), "--route", "scored", "--decision-log", "x.jsonl", "--capable-share", "0.3"]
    assert main([*argv, "--write", str(cfg)]) == 1
    assert "--write must name a new file" in capsys.readouterr().err


def test_calibrate_from_the_proxy_decision_log(
    tmp_path: Path, upstream: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(SCORED, base_url=f"http://127.0.0.1:{upstream.port}/v1"))
    log = tmp_path / "decisions.jsonl"
    sy = Switchyard.from_config(str(cfg), decision_log=str(log))
    with ServerThread(sy) as server, openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client:
        for i in range(10):
            client.chat.completions.create(model="scored", messages=[{"role": "user", "content": f"score={i / 10}"}])
        client.chat.completions.create(model="mix", messages=[{"role": "user", "content": "other route"}])
    sy.close()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 11 and records[0]["score"] == 0.0
    argv = ["calibrate", "-c", str(cfg), "--route", "scored", "--decision-log", str(log)]
    assert main([*argv, "--capable-share", "0.2", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == 10 and res["capable_share"] == pytest.approx(0.2)
    assert 0.7 < res["threshold"] <= 0.8
    # Budget from the logged token counts at the targets' prices.
    assert main([*argv, "--budget-usd", "1000", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["capable_share"] == 1.0 and res["cost_usd"] > 0
    assert main([*argv, "--budget-usd", "0"]) == 1
    assert "below the cheapest threshold" in capsys.readouterr().err


# -- replay ------------------------------------------------------------------------------------


def trajectories(tmp_path: Path) -> Path:
    def conv(n_turns: int) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = [{"role": "system", "content": "policy"}, {"role": "user", "content": "help"}]
        for t in range(n_turns):
            call = {"id": f"c{t}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
            msgs.append({"role": "tool", "tool_call_id": f"c{t}", "name": "lookup", "content": "ok"})
        msgs.append({"role": "assistant", "content": "done"})
        return msgs

    return write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"id": "traj-a", "messages": conv(3), "reward": 1.0, "success": True},
            {"id": "traj-b", "messages": conv(1), "reward": 0.0, "success": False},
        ],
    )


def test_replay_writes_per_turn_decisions_with_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text("  agent: {type: test_session, capable: capable, efficient: efficient}\n"))
    out = tmp_path / "turns.jsonl"
    argv = ["replay", "-c", str(cfg), "--route", "agent", "--trajectories", str(trajectories(tmp_path))]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    summary = capsys.readouterr().out
    assert "2 trajectories, 6 assistant turns, 6 decided, 0 skipped" in summary
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    a = [t for t in lines if t["trajectory"] == "traj-a"]
    b = [t for t in lines if t["trajectory"] == "traj-b"]
    # The router's per-session counter runs 1, 2, 3, 4 in traj-a and restarts in traj-b.
    assert [t["reason"] for t in a] == [f"request {n} of session traj-a" for n in (1, 2, 3, 4)]
    assert [t["reason"] for t in b] == [f"request {n} of session traj-b" for n in (1, 2)]
    assert [t["selected"] for t in a] == ["efficient", "efficient", "capable", "capable"]
    assert [t["turn"] for t in a] == [0, 1, 2, 3] and [t["message_index"] for t in a] == [2, 4, 6, 8]
    assert a[0]["recorded"] == {"tool_calls": ["lookup"], "text_chars": 0}
    assert a[-1]["recorded"] == {"tool_calls": [], "text_chars": 4}
    assert a[0]["score"] == pytest.approx(0.1) and a[0]["source"] == "test-session"
    assert a[0]["success"] is True and b[0]["reward"] == 0.0
    assert main([*argv, "--out", str(out), "--json", "--no-progress"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["shares"] == {"efficient": pytest.approx(4 / 6), "capable": pytest.approx(2 / 6)}
    assert res["capable_share_by_success"] == {"success": 0.5, "failure": 0.0}
    assert res["scores"]["n"] == 6


def test_replay_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text("  agent: {type: passthrough, target: efficient}\n"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "messages": "nope"}\n')
    argv = [
        "replay",
        "-c",
        str(cfg),
        "--route",
        "agent",
        "--trajectories",
        str(bad),
        "--out",
        str(tmp_path / "o.jsonl"),
    ]
    assert main(argv) == 1
    assert "bad.jsonl:1: 'messages' must be a list" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "--dataset", "{d}"],
        ["calibrate", "--dataset", "{d}", "--capable-share", "0.3"],
        ["replay", "--trajectories", "{d}"],
    ],
)
def test_an_unknown_route_is_refused_naming_the_routes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text("  scored: {type: test_score, capable: capable, efficient: efficient}\n"))
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "prompt": "hi", "models": {}}])
    args = [a.format(d=data) for a in argv]
    assert main([args[0], "-c", str(cfg), "--route", "ghost", *args[1:], "--no-progress"]) == 1
    assert "error: config has no route 'ghost'; routes: scored\n" in capsys.readouterr().err
