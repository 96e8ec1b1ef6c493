"""A stage router's logged turns replayed under other settings (``tune --decision-log``, issue 48)
decide exactly what the router itself decides with those settings.

Histories of a terminal agent (failures of several classes, timeouts, missing commands, reads,
writes, passing tests) are routed turn by turn by the router with the shipped settings of
``examples/coding-agent.yaml`` (``confidence_threshold: 1.0``, ``persistent_errors.repeats: 2``);
each decision's details go through JSON as a decision-log line does. Then, for each other value
of each replayable key, a router built with that value routes the same turns, and the replay of
the logged details must give its tier on every turn.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from _convo import Step, bash, decode, tool

from switchyard.cli import main
from switchyard.eval.log_stage import stage_decider
from switchyard.eval.log_tune import LogTuneError, Turn
from switchyard.protocol.session import SessionInfo
from switchyard.routers.base import RouteContext
from switchyard.routers.stage import StageRouter
from switchyard.routers.stage.spec import StageRouterSpec
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

SHIPPED: dict[str, Any] = {
    "type": "stage_router",
    "capable": "capable",
    "efficient": "efficient",
    "picker": "efficient_first",
    "confidence_threshold": 1.0,
    "persistent_errors": {"repeats": 2, "ignore": ["timeout", "command_not_found"]},
}
RESULTS = [
    "<returncode>0</returncode>\n<output>\ndone\n</output>",
    "<returncode>1</returncode>\n<output>\nsetup failed\n</output>",
    "<returncode>2</returncode>\n<output>\nbuild failed again\n</output>",
    'Traceback (most recent call last):\n  File "/app/m.py", line 3, in main\nImportError: no module named torch',
    "The command timed out after 30 seconds. Interactive programs (vim, less) are not supported.",
    "<returncode>127</returncode>\n<output>\nbash: rg: command not found\n</output>",
    "<returncode>0</returncode>\n<output>\n===== 9 passed in 0.31s =====\n</output>",
    "<returncode>1</returncode>\n<output>\n===== 2 failed, 7 passed in 0.5s =====\n</output>",
]


def history(seed: int, turns: int = 14) -> list[Step]:
    rng = random.Random(seed)
    steps: list[Step] = [("user", "Set up the environment and make the tests pass.")]
    for i in range(turns):
        kind = rng.random()
        if kind < 0.2:
            steps.append(tool("Write", "ok", file_path=f"/app/f{i}.py", content="x = 1"))
        elif kind < 0.35:
            steps.append(tool("Read", "x = 1", file_path=f"/app/f{i}.py"))
        else:
            steps.append(bash(f"step {i}", rng.choice(RESULTS)))
    return steps


def router(route: dict[str, Any]) -> StageRouter:
    return StageRouter(StageRouterSpec.model_validate(route).config())


async def tiers(route: dict[str, Any], steps: list[Step], session: str) -> list[tuple[bool, dict[str, Any]]]:
    """Per assistant turn: (capable?, the decision's details as a log line carries them)."""
    r, store, out = router(route), MemoryStore(), []
    for n in range(1, len(steps)):
        ctx = RouteContext(
            route="agent", session=SessionInfo(session_id=session, turn_index=n), targets={}, store=store
        )
        d = await r.route(decode(steps[:n]), ctx, ScriptedCall({}))
        out.append((d.candidates[0] == "capable", json.loads(json.dumps(d.details))))
    return out


def with_value(base: dict[str, Any], key: str, value: float) -> dict[str, Any]:
    route = json.loads(json.dumps(base))
    if key == "persistent_errors.repeats":
        route["persistent_errors"]["repeats"] = int(value)
    elif key == "turn_budget":
        route["turn_budget"] = int(value)
    else:
        route[key] = value
    return route


@pytest.mark.parametrize("picker", ["efficient_first", "capable_first"])
@pytest.mark.parametrize(
    ("key", "values"),
    [
        ("confidence_threshold", [0.0, 0.2, 0.3, 0.45, 0.5, 0.7, 1.0]),
        ("persistent_errors.repeats", [2, 3, 4, 6]),
    ],
)
async def test_the_replay_decides_what_the_router_decides(key: str, values: list[float], picker: str) -> None:
    shipped = {**SHIPPED, "picker": picker, "confidence_threshold": 1.0 if picker == "efficient_first" else 0.5}
    decide = stage_decider(shipped, key)
    checked = differ = 0
    for seed in range(12):
        steps = history(seed)
        logged = await tiers(shipped, steps, f"s{seed}")
        for value in values:
            truth = await tiers(with_value(shipped, key, value), steps, f"s{seed}")
            for (was, details), (now, _) in zip(logged, truth, strict=True):
                turn = Turn(None, was, False, 0.0, 0.0, 0.0, details)
                assert decide(turn, value) == now, (key, value, seed, details)
                checked += 1
                differ += was != now
    # the settings really change decisions, so the check has something to catch
    assert checked > 300 and differ > 10


async def test_turn_budget_replays_from_the_logged_run_counts() -> None:
    shipped = with_value(SHIPPED, "turn_budget", 50)
    decide = stage_decider(shipped, "turn_budget")
    steps = history(3)
    logged = await tiers(shipped, steps, "s")
    truth = await tiers({**shipped, "turn_budget": 5}, steps, "s")
    got = [decide(Turn(None, was, False, 0.0, 0.0, 0.0, details), 5) for was, details in logged]
    assert got == [now for now, _ in truth] and any(got)


def test_what_a_log_cannot_replay_is_refused_with_the_reason() -> None:
    with pytest.raises(LogTuneError, match="classifier"):
        stage_decider({**SHIPPED, "classifier": {"target": "judge"}}, "confidence_threshold")
    with pytest.raises(LogTuneError, match="hold_turns"):
        stage_decider({**SHIPPED, "hold_turns": 2}, "confidence_threshold")
    without = {k: v for k, v in SHIPPED.items() if k != "persistent_errors"}
    with pytest.raises(LogTuneError, match="persistent_errors is off"):
        stage_decider(without, "persistent_errors.repeats")
    with pytest.raises(LogTuneError, match="replays confidence_threshold"):
        stage_decider(SHIPPED, "recent_turn_window")
    old_log = Turn(None, False, False, 0.0, 0.0, 0.0, {"signals": {"severity": 0.7, "errors": ["nonzero_exit"]}})
    with pytest.raises(LogTuneError, match="run_tally"):
        stage_decider(SHIPPED, "persistent_errors.repeats")(old_log, 3)


async def test_the_cli_tunes_a_stage_route_and_writes_an_integer_setting(tmp_path: Path, capsys: Any) -> None:
    # Shipped: repeats 4. Half the sessions hit the same error class twice and the efficient model
    # failed them; repeats 2 switches them at that turn, where the capable model resolves.
    shipped = with_value(SHIPPED, "persistent_errors.repeats", 4)
    ok, fail = RESULTS[0], RESULTS[1]
    lines: list[dict[str, Any]] = []
    for n in range(40):
        hard = n % 2 == 0
        results = [ok, fail, ok, fail, ok, ok] if hard else [ok] * 6
        steps: list[Step] = [("user", "Fix the build."), *(bash(f"make {i}", r) for i, r in enumerate(results))]
        for i, (capable, details) in enumerate(await tiers(shipped, steps, f"s{n}")):
            assert not capable
            rec = {"route": "agent", "session_id": f"s{n}", "request_id": f"s{n}-{i}", "source": "fall_open"}
            rec |= {"selected": "efficient", "cost_usd": 0.01, "baseline_cost_usd": 0.1, "details": details}
            lines.append(rec)
        lines.append({"object": "switchyard.feedback", "session_id": f"s{n}", "resolved": not hard, "ts": 1.0})
    for n in range(12):
        rec = {"route": "agent", "session_id": f"c{n}", "request_id": f"c{n}", "source": "control"}
        lines.append(rec | {"selected": "capable", "cost_usd": 0.6, "details": {"arm": "control"}})
        lines.append({"object": "switchyard.feedback", "session_id": f"c{n}", "resolved": True, "ts": 1.0})
    log = tmp_path / "decisions.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    cfg = tmp_path / "router.yaml"
    cfg.write_text(CONFIG.replace("REPEATS", "4"))
    out = tmp_path / "tuned.yaml"
    argv = ["tune", "-c", str(cfg), "--route", "agent", "--decision-log", str(log), "--bootstrap", "200"]
    assert main([*argv, "--grid", "persistent_errors.repeats=2,3", "--write", str(out)]) == 0
    text = capsys.readouterr().out
    assert (
        "- routes.agent.persistent_errors.repeats: 4" in text and "+ routes.agent.persistent_errors.repeats: 2" in text
    )
    assert "repeats: 2  # shipped" in out.read_text()
    # a classifier route is refused with the reason
    cfg.write_text(CONFIG.replace("REPEATS", "4") + "    classifier: {target: capable}\n")
    assert main([*argv, "--grid", "confidence_threshold=0.3"]) == 1
    assert "classifier" in capsys.readouterr().err


CONFIG = """\
llm_clients:
  up: {format: openai_chat, base_url: http://127.0.0.1:9/v1}
targets:
  efficient: {client: up, model: small, price: {input_per_mtok: 0.1, output_per_mtok: 0.4}}
  capable: {client: up, model: big, price: {input_per_mtok: 3, output_per_mtok: 15}}
routes:
  agent:
    type: stage_router
    capable: capable
    efficient: efficient
    confidence_threshold: 1.0
    persistent_errors:
      repeats: REPEATS  # shipped
"""
