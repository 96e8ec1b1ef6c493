"""The agent matrix: real agents (Claude Code, Codex, Qwen Code, Hermes Agent and the Python
frameworks) complete a write → shell → answer tool loop through ``switchyard serve``.

Routes: ``chat`` (an OpenAI-Chat upstream, as Lightning on vLLM), ``anthropic`` (Anthropic
Messages), ``responses`` (OpenAI Responses), ``staged`` (stage router: the chat target until
the shell output shows a CUDA OOM, then the anthropic target continues the history the chat
model wrote) and ``planned`` (plan_execute: the anthropic target plans the user's request, the
chat target executes the tool turns). Each test asserts the file on disk, the agent's final answer and the decision
records. Agents are installed into ``.agents/`` by ``make agents``; without them these tests
skip, except under ``CI=true``. See docs/agents.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from matrix import TARGET_OF_ROUTE, Outcome, Stack, require, run_agent, scratch, serve_stack

pytestmark = [pytest.mark.integration, pytest.mark.agents, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with serve_stack(scratch()) as running:
        yield running


SENDS_SESSION = {"claude-code": "x-claude-code-session-id", "codex": "session-id"}
"""Agents that send a session header the proxy reads (docs/agents.md)."""

THREADED = ("anthropic-sdk-py", "anthropic-sdk-js")
"""Agents whose turns ride an Anthropic message thread: on a translated route a ``continue`` is
refused with 404 ``thread_not_found`` and the runner replays the conversation (docs/agents.md);
the proxy keeps one session per run either way."""


def _threaded(mine: list[dict[str, Any]], route: str, why: str) -> list[dict[str, Any]]:
    """The records of a threaded run that were served; checks the refused ones and the session."""
    refused = [r for r in mine if r["status"] == 404]
    assert all("thread" in (r.get("error") or "") for r in refused), why
    # Only the Anthropic target continues a thread; every other route refuses a continue.
    assert bool(refused) == (route != "anthropic"), why
    served = [r for r in mine if r["status"] != 404]
    sessions = {r["session_id"] for r in served}
    assert len(sessions) == 1 and None not in sessions, f"one session per run expected: {sessions}\n" + why
    turns = [r["turn_index"] for r in served]
    assert turns == sorted(set(turns)), f"turn index should increase: {turns}\n" + why
    return served


def check(outcome: Outcome, route: str, agent: str = "") -> None:
    """The tool loop completed: the file, the answer, and who answered each turn."""
    why = outcome.explain()
    assert outcome.file.exists(), "the agent did not write the file\n" + why
    content = outcome.file.read_text().strip()
    assert content.startswith("switchyard-matrix"), why
    assert outcome.returncode == 0, why
    assert not outcome.egress, "the agent tried to reach beyond 127.0.0.1\n" + why
    assert "ALL DONE." in outcome.stdout and content in outcome.stdout, "final answer missing\n" + why
    mine = [r for r in outcome.records if r["route"] == route]
    assert mine, why
    if agent in THREADED:
        mine = _threaded(mine, route, why)
    assert all(r["status"] == 200 and not r.get("error") for r in mine), why
    # A thread's `continue` carries no tools (the upstream holds them) but is a tool-loop turn.
    loop = [r for r in outcome.bodies if r.get("tools") or (r.get("thread") or {}).get("type") == "continue"]
    assert len(loop) >= 3, f"expected 3 tool-loop turns, upstream saw {len(loop)}\n" + why
    if agent in SENDS_SESSION:
        sessions = {r["session_id"] for r in mine}
        assert len(sessions) == 1 and None not in sessions, f"one session per run expected: {sessions}\n" + why
    selected = [r["selected"] for r in mine]
    if route == "planned":
        # The user's request is planned by the capable tier; the tool turns are executed by the
        # efficient one, with the plan in the history it continues.
        assert (mine[0]["selected"], mine[0]["source"]) == ("claude", "plan"), why
        executed = [r for r in mine[1:] if r["source"] == "execute"]
        assert executed and all(r["selected"] == "vllm" for r in executed), why
    elif route == "staged":
        # The shell output (the file) shows an OOM: the capable tier writes the final answer,
        # continuing the tool calls and reasoning the efficient tier wrote in another format.
        assert selected[0] == "vllm", why
        assert "claude" in selected, why
        escalated = next(r for r in mine if r["selected"] == "claude")
        assert escalated["source"] == "override", why
    elif route == "learned":
        # The trajectory router decides every turn from its estimate (or a run rule) until it
        # switches; from then on the run stays on the capable tier (the latch holds per session,
        # with or without a session header).
        assert all(r["source"] in ("trajectory", "persistent_errors", "latched") for r in mine), why
        assert all("gain_interval" in (r.get("details") or {}) for r in mine if r["source"] == "trajectory"), why
        switched = next((i for i, r in enumerate(mine) if r["selected"] == "claude"), None)
        if switched is not None:
            assert all((r["selected"], r["source"]) == ("claude", "latched") for r in mine[switched + 1 :]), why
    else:
        assert set(selected) == {TARGET_OF_ROUTE[route]}, why


def _run(stack: Stack, agent: str, route: str, api: str | None = None) -> None:
    require(agent)
    check(run_agent(stack, agent, route, scratch(), api), route, agent)


# -- CLI agents ---------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["anthropic", "chat", "staged", "planned", "learned"])
def test_claude_code(stack: Stack, route: str) -> None:
    _run(stack, "claude-code", route)


@pytest.mark.parametrize("route", ["responses", "chat", "anthropic", "staged", "planned", "learned"])
def test_codex(stack: Stack, route: str) -> None:
    _run(stack, "codex", route)


@pytest.mark.parametrize("route", ["chat", "anthropic", "staged"])
def test_qwen_code(stack: Stack, route: str) -> None:
    _run(stack, "qwen-code", route)


@pytest.mark.parametrize("route", ["chat", "anthropic", "staged", "learned"])
def test_hermes(stack: Stack, route: str) -> None:
    _run(stack, "hermes", route)


# -- Python frameworks --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "route"),
    [("chat", "chat"), ("chat", "anthropic"), ("responses", "responses"), ("responses", "chat"), ("chat", "staged")],
)
def test_openai_agents(stack: Stack, api: str, route: str) -> None:
    _run(stack, "openai-agents", route, api)


@pytest.mark.parametrize(
    ("api", "route"),
    [
        ("chat", "chat"),
        ("chat", "anthropic"),
        ("responses", "responses"),
        ("responses", "anthropic"),
        ("anthropic", "anthropic"),
        ("anthropic", "chat"),
        ("anthropic", "staged"),
    ],
)
def test_langchain(stack: Stack, api: str, route: str) -> None:
    _run(stack, "langchain", route, api)


@pytest.mark.parametrize(("api", "route"), [("chat", "chat"), ("chat", "anthropic"), ("anthropic", "chat")])
def test_litellm(stack: Stack, api: str, route: str) -> None:
    _run(stack, "litellm", route, api)


@pytest.mark.parametrize("route", ["chat", "anthropic"])
def test_smolagents(stack: Stack, route: str) -> None:
    _run(stack, "smolagents", route, "chat")


@pytest.mark.parametrize("route", ["anthropic", "chat", "responses", "staged", "learned"])
@pytest.mark.parametrize("api", ["anthropic", "anthropic-stream"])
def test_anthropic_sdk_py(stack: Stack, api: str, route: str) -> None:
    _run(stack, "anthropic-sdk-py", route, api)


@pytest.mark.parametrize("route", ["anthropic", "chat", "responses", "staged"])
@pytest.mark.parametrize("api", ["anthropic", "anthropic-stream"])
def test_anthropic_sdk_js(stack: Stack, api: str, route: str) -> None:
    _run(stack, "anthropic-sdk-js", route, api)


def test_smolagents_tool_text_is_invisible_to_the_stage_router(stack: Stack) -> None:
    """Known limit: smolagents' ToolCallingAgent sends its tool calls and results as plain text
    ("Calling tools: ...", "Observation: ..."), so the stage router sees no tool activity (no OOM
    in a tool result) and every turn falls open to the efficient tier. The loop itself works."""
    require("smolagents")
    outcome = run_agent(stack, "smolagents", "staged", scratch(), "chat")
    assert "ALL DONE." in outcome.stdout and "CUDA out of memory" in outcome.file.read_text(), outcome.explain()
    sources = {(r["selected"], r["source"]) for r in outcome.records}
    assert sources == {("vllm", "fall_open")}, outcome.explain()


@pytest.mark.parametrize("agent", ["hermes", "qwen-code"])
def test_agents_without_session_headers_still_get_one_session(stack: Stack, agent: str) -> None:
    """Hermes and Qwen Code send no session header or id; the records of one run should still
    carry one session key (derived by the proxy), so stateful routers see one session."""
    require(agent)
    outcome = run_agent(stack, agent, "chat", scratch())
    loop = [r for r in outcome.records if r["route"] == "chat"]
    assert len(loop) >= 3, outcome.explain()
    sessions = {r["session_id"] for r in loop[:3]}
    assert len(sessions) == 1 and None not in sessions, sessions


def test_harness_skips_cleanly_without_agents(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without the prefix the matrix skips, but under CI=true it fails (it must run there)."""
    import launchers

    monkeypatch.setattr(launchers, "PREFIX", tmp_path)
    monkeypatch.setattr(launchers, "NODE_BIN", tmp_path / "node_modules" / ".bin")
    monkeypatch.setattr(launchers, "HERMES_BIN", tmp_path / "hermes" / "bin" / "hermes")
    monkeypatch.setattr(launchers, "PY_AGENTS", tmp_path / "py" / "bin" / "python")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require("codex")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        require("codex")
