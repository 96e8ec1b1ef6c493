"""The stage router's run-level rules: persistent errors and a turn budget (off by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _convo import WIRE_FORMATS, Step, bash, decode
from _stage_yaml import load

from switchyard.protocol.session import SessionInfo
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.stage import StageConfig, StageRouter
from switchyard.routers.stage.runrules import RunRules, check, tally_from
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

TASK: Step = ("user", "Set up the environment and make the tests pass.")
EXIT1 = "<returncode>1</returncode>\n<output>\nsetup failed\n</output>"
EXIT2 = "<returncode>2</returncode>\n<output>\nbuild failed again\n</output>"
OK = "<returncode>0</returncode>\n<output>\ndone\n</output>"
TIMEOUT = "The command timed out after 30 seconds. Interactive programs (vim, less) are not supported."
MISSING = "<returncode>127</returncode>\n<output>\nbash: rg: command not found\n</output>"
TB = 'Traceback (most recent call last):\n  File "/app/m.py", line {n}, in main\nImportError: no module named torch{n}'

RULES = RunRules(repeats=2)


def steps_of(*results: str) -> list[Step]:
    return [TASK, *(bash(f"step {i}", r) for i, r in enumerate(results))]


def fired(results: list[str], rules: RunRules = RULES, fmt: str = "openai_chat") -> str | None:
    request = decode(steps_of(*results), fmt)
    hit = check(tally_from(request.messages, None, rules), rules)
    return None if hit is None else hit.source


@pytest.mark.parametrize("fmt", WIRE_FORMATS)
def test_the_same_error_class_coming_back_fires(fmt: str) -> None:
    # two different non-zero exits, several turns apart: the class comes back
    assert fired([EXIT1, OK, OK, OK, EXIT2], fmt=fmt) == "persistent_errors"


def test_a_first_failure_is_exploration() -> None:
    assert fired([EXIT1, OK, OK]) is None
    assert fired([EXIT1, TB.format(n=1), OK]) is None  # two failures, two different classes


def test_timeouts_and_missing_commands_never_count_by_default() -> None:
    assert fired([TIMEOUT, TIMEOUT, TIMEOUT, MISSING, MISSING]) is None
    # ... unless the route counts them
    assert fired([TIMEOUT, TIMEOUT], RunRules(repeats=2, ignore=frozenset())) == "persistent_errors"
    # a missing command exits 127: its nonzero_exit is not counted on top of the ignored class
    assert fired([MISSING, EXIT1]) is None


def test_repeats_is_the_number_of_results() -> None:
    three = RunRules(repeats=3)
    assert fired([EXIT1, EXIT2], three) is None
    assert fired([EXIT1, EXIT2, EXIT1], three) == "persistent_errors"


def test_tracebacks_count_once_per_result_across_the_whole_run() -> None:
    # the windowed override sees only the last 3 results; the run rule sees them all
    results = [TB.format(n=1), OK, OK, OK, OK, TB.format(n=2)]
    assert fired(results) == "persistent_errors"


def test_tool_flagged_errors_count_as_their_own_class() -> None:
    rules = RunRules(repeats=2)
    request = decode([TASK, bash("a", "nope"), bash("b", "no way")], "anthropic_messages")
    flagged = [m.model_copy(deep=True) for m in request.messages]
    for msg in flagged:
        for part in msg.content:
            if hasattr(part, "is_error"):
                object.__setattr__(part, "is_error", True)
    hit = check(tally_from(flagged, None, rules), rules)
    assert hit is not None and "tool_error_flag" in hit.reason


def test_turn_budget_counts_assistant_turns() -> None:
    rules = RunRules(turn_budget=3)
    assert fired([OK, OK], rules) is None
    assert fired([OK, OK, OK], rules) == "turn_budget"


def test_the_tally_continues_from_a_prefix() -> None:
    messages = decode(steps_of(EXIT1, OK, OK, EXIT2)).messages
    whole = tally_from(messages, None, RULES)
    part = tally_from(messages[:4], None, RULES)
    assert tally_from(messages, part, RULES) == whole


# -- through the router -------------------------------------------------------------------------


def router(**kw: Any) -> StageRouter:
    return StageRouter(StageConfig(capable="frontier", efficient="lightning", **kw))


async def route(r: StageRouter, steps: list[Step], session: str | None = None, turn: int = 0) -> Decision:
    c = RouteContext(
        route="agent", session=SessionInfo(session_id=session, turn_index=turn), targets={}, store=MemoryStore()
    )
    return await r.route(decode(steps), c, ScriptedCall({}))


async def test_the_router_escalates_on_persistent_errors_and_stays() -> None:
    r = router(threshold=1.0, run_rules=RULES)
    early = await route(r, steps_of(EXIT1, OK), session="s")
    assert (early.candidates[0], early.source) == ("lightning", "fall_open")
    d = await route(r, steps_of(EXIT1, OK, OK, EXIT2), session="s")
    assert (d.candidates[0], d.source, d.score, d.confidence) == ("frontier", "persistent_errors", 1.0, 1.0)
    assert "nonzero_exit" in d.reason
    # passing tests later do not hand the run back: the rule keeps firing (the run latches)
    passed = "<returncode>0</returncode>\n<output>\n===== 9 passed in 0.31s =====\n</output>"
    after = await route(r, [*steps_of(EXIT1, OK, OK, EXIT2), bash("vim a.py", "ok"), bash("pytest", passed)], "s")
    assert (after.candidates[0], after.source) == ("frontier", "persistent_errors")


async def test_without_run_rules_the_same_history_is_not_escalated() -> None:
    d = await route(router(threshold=1.0), steps_of(EXIT1, OK, OK, EXIT2))
    assert d.candidates[0] == "lightning"
    default = await route(router(), steps_of(EXIT1, OK, OK, EXIT2))
    assert default.source != "persistent_errors"


async def test_the_session_cache_gives_the_same_decision_as_a_full_walk() -> None:
    r, fresh = router(run_rules=RULES), router(run_rules=RULES)
    history = steps_of(EXIT1, OK, OK, EXIT2, OK)
    for n in range(2, len(history) + 1):
        cached = await route(r, history[:n], session="s", turn=n)
        walked = await route(fresh, history[:n])
        assert (cached.candidates, cached.source) == (walked.candidates, walked.source)


async def test_the_windowed_override_still_comes_first() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory"
    d = await route(router(run_rules=RULES), steps_of(EXIT1, EXIT2, oom))
    assert d.source == "override"


def test_the_shipped_profile_loads_and_turns_the_rule_on() -> None:
    from switchyard.config.load import load_config

    example = Path(__file__).resolve().parents[3] / "examples" / "coding-agent.yaml"
    loaded = load_config(example, env={"ANTHROPIC_API_KEY": "x"})
    first = next(iter(loaded.routes))
    config = loaded.routes[first].config()
    assert (first, config.capable, config.efficient, config.threshold) == ("agent", "capable", "efficient", 1.0)
    assert config.run_rules == RunRules(repeats=2, ignore=frozenset({"timeout", "command_not_found"}))


async def test_the_shipped_profile_routes_a_stuck_run_to_capable() -> None:
    from switchyard.config.load import load_config

    example = Path(__file__).resolve().parents[3] / "examples" / "coding-agent.yaml"
    r = StageRouter(load_config(example, env={"ANTHROPIC_API_KEY": "x"}).routes["agent"].config())
    explore = await route(r, steps_of(TIMEOUT, MISSING, EXIT1, OK), session="p")
    assert explore.candidates[0] == "efficient"
    stuck = await route(r, steps_of(TIMEOUT, MISSING, EXIT1, OK, EXIT2), session="p")
    assert (stuck.candidates[0], stuck.source) == ("capable", "persistent_errors")


# -- the YAML keys --------------------------------------------------------------------------------


def test_keys_are_off_by_default(tmp_path: Path) -> None:
    assert load(tmp_path, "").routes["agent"].config().run_rules is None


def test_keys_build_the_rules(tmp_path: Path) -> None:
    config = load(tmp_path, "persistent_errors: {}\nturn_budget: 40").routes["agent"].config()
    assert config.run_rules == RunRules(repeats=2, ignore=frozenset({"timeout", "command_not_found"}), turn_budget=40)
    only = load(tmp_path, "persistent_errors: {repeats: 3, ignore: []}").routes["agent"].config()
    assert only.run_rules == RunRules(repeats=3, ignore=frozenset())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("persistent_errors: {repeats: 1}", "routes.agent.persistent_errors.repeats"),
        ("persistent_errors: {ignore: [timeouts]}", "unknown error class 'timeouts'"),
        ("persistent_errors: {every: 2}", "routes.agent.persistent_errors.every"),
        ("turn_budget: 0", "routes.agent.turn_budget"),
        ("compat: nvidia\nturn_budget: 30", "not part of compat: nvidia"),
    ],
)
def test_bad_keys_are_named(tmp_path: Path, extra: str, message: str) -> None:
    from switchyard.config.load import ConfigError

    with pytest.raises(ConfigError) as err:
        load(tmp_path, extra)
    assert message in str(err.value)


def test_the_json_schema_knows_the_keys() -> None:
    from switchyard.config.json_schema import config_json_schema

    defs = config_json_schema()["$defs"]
    stage = defs["StageRouterSpec"]["properties"]
    assert {"persistent_errors", "turn_budget"} <= set(stage)
    errors = defs["PersistentErrorsSpec"]["properties"]
    assert errors["repeats"]["minimum"] == 2 and errors["ignore"]["default"] == ["timeout", "command_not_found"]
    assert "import_error" in errors["ignore"]["items"]["enum"]


async def test_the_escalation_note_goes_with_a_run_rule_switch() -> None:
    from switchyard.routers.stage import HandoffNotes

    r = router(threshold=1.0, run_rules=RULES, notes=HandoffNotes("[router] re-check first."))
    store = MemoryStore()

    async def at(turn: int, steps: list[Step]) -> Decision:
        c = RouteContext(route="agent", session=SessionInfo(session_id="n", turn_index=turn), targets={}, store=store)
        return await r.route(decode(steps), c, ScriptedCall({}))

    first = await at(1, steps_of(EXIT1, OK))
    assert first.request is None
    switch = await at(2, steps_of(EXIT1, OK, EXIT2))
    assert switch.source == "persistent_errors" and switch.request is not None
    last = switch.request.messages[-1]
    assert last.role == "user" and "[router] re-check first." in last.content[-1].text  # type: ignore[union-attr]
    stay = await at(3, steps_of(EXIT1, OK, EXIT2, OK))
    assert (stay.source, stay.request) == ("persistent_errors", None)  # no note once it stays
