"""Sub-agent detection from harness headers (recorded Claude Code and Codex traffic included) and
the ``subagents`` policy of a route."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from switchyard.config.build import build_routes, target_infos
from switchyard.config.load import ConfigError, load_config
from switchyard.engine.core import Engine, Target
from switchyard.engine.session import identify
from switchyard.protocol.call import CallOptions
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.targets import TargetInfo

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "subagents"
REQUEST = ChatRequest(model="r", messages=[Message.of("user", "hi")])
BASE: dict[str, Any] = {
    "llm_clients": {"local": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}},
    "targets": {
        "efficient": {"client": "local", "model": "e"},
        "capable": {"client": "local", "model": "c"},
        "judge": {"client": "local", "model": "j"},
    },
}


def recorded(agent: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / f"{agent}.jsonl").read_text().splitlines() if line.strip()]


def test_recorded_claude_code_task_subagent_is_delegated_and_keyed_by_agent() -> None:
    infos = [identify(e["headers"], REQUEST) for e in recorded("claude")]
    sessions = {i.session_id for i in infos}
    assert len(sessions) == 1  # one Claude Code session: parent and sub-agent share x-claude-code-session-id
    delegated = [i for i in infos if i.delegated]
    assert len(delegated) == 1 and len(infos) == 3
    sub = delegated[0]
    assert sub.delegation == "x-claude-code-agent-id" and sub.agent_id
    assert sub.key == f"{sub.session_id}/{sub.agent_id}"
    assert all(i.key == sub.session_id for i in infos if not i.delegated)  # the parent keeps the session slot


def test_recorded_codex_spawned_subagent_is_delegated_with_its_lineage() -> None:
    entries = recorded("codex")
    infos = [identify(e["headers"], REQUEST) for e in entries]
    root = infos[0]
    assert not root.delegated and root.agent_id == root.session_id  # Codex's root thread id is the session id
    children = [i for i in infos if i.delegated]
    assert children, "the recording holds the sub-agent's call"
    for child in children:
        assert child.delegation == "x-openai-subagent"
        assert child.parent_agent_id == root.agent_id and child.agent_id != root.agent_id
        assert child.agent_kind == "collab_spawn" and child.session_id == root.session_id
        assert child.key == f"{root.session_id}/{child.agent_id}"


@pytest.mark.parametrize(
    ("headers", "delegated", "by"),
    [
        ({"x-switchyard-is-subagent": "true"}, True, "x-switchyard-is-subagent"),
        ({"x-switchyard-is-subagent": "0", "x-claude-code-agent-id": "a"}, False, "x-switchyard-is-subagent"),
        ({"x-nemo-relay-subagent-id": "n1", "x-nemo-relay-session-id": "s"}, True, "x-nemo-relay-subagent-id"),
        ({"x-openai-subagent": "compact", "x-codex-parent-thread-id": "p"}, False, "maintenance:compact"),
        ({"x-openai-subagent": "memory_consolidation"}, False, "maintenance:memory_consolidation"),
        ({"x-openai-subagent": "review"}, True, "x-openai-subagent"),
        ({"x-switchyard-agent-kind": "worker"}, True, "x-switchyard-agent-kind"),
        ({"x-switchyard-parent-agent-id": "p", "x-switchyard-agent-id": "a"}, True, "parent-agent-id"),
        ({"x-switchyard-agent-id": "a"}, False, None),
        (
            {
                "x-codex-turn-metadata": json.dumps(
                    {"thread_source": "subagent", "parent_thread_id": "p", "thread_id": "c"}
                )
            },
            True,
            "x-codex-turn-metadata.thread_source",
        ),
    ],
)
def test_delegation_signals(headers: dict[str, str], delegated: bool, by: str | None) -> None:
    info = identify({"x-switchyard-session-id": "s", **headers}, REQUEST)
    assert (info.delegated, info.delegation) == (delegated, by)


def test_a_delegated_call_without_an_agent_id_gets_one_subagent_slot() -> None:
    info = identify({"x-switchyard-session-id": "s", "x-switchyard-is-subagent": "yes"}, REQUEST)
    assert info.key == "s/subagent"


VERDICT = '{"crux": "x", "primary_rule": "SUP-1", "capability_boundary": "supported", "p_solve": 0.95}'


class JudgeBackend:
    """A backend whose every answer is a confident capability verdict."""

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        return ChatResponse(id="v", content=[TextPart(text=VERDICT)], usage=Usage(input_tokens=5, output_tokens=5))

    async def open_stream(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def _engine(routes: dict[str, Any]) -> Engine:
    loaded = load_config({**BASE, "routes": routes})
    infos = target_infos(loaded)
    return Engine(build_routes(loaded, infos), {n: Target(i, JudgeBackend()) for n, i in infos.items()})


async def test_subagents_policy_decides_delegated_calls_with_state_per_agent() -> None:
    engine = _engine(
        {
            "coding": {
                "type": "passthrough",
                "target": "capable",
                "subagents": {"type": "llm_classifier", "mode": "capability", "classifier_target": "judge",
                              "strong_target": "capable", "weak_target": "efficient", "base_threshold": 0.5,
                              "classify_trigger": "new_session"},
            }
        }
    )  # fmt: skip
    route = engine.routes["coding"]
    assert route.targets == ("capable", "efficient")
    parent = await engine.decide(REQUEST.model_copy(update={"model": "coding"}), {"x-switchyard-session-id": "s"})
    assert parent.source == "passthrough" and parent.selected == "capable"
    assert route.store is not None
    sub = {"x-switchyard-session-id": "s", "x-claude-code-agent-id": "agent-1"}
    first = await engine.decide(REQUEST.model_copy(update={"model": "coding"}), sub)
    assert first.source == "subagents/llm-classifier" and first.selected == "efficient"
    assert first.details["subagent"]["agent_id"] == "agent-1"
    # the sub-agent's affinity is stored under session/agent, never in the parent's slot
    assert await route.store.get("s/agent-1:affinity") is not None
    assert await route.store.get("s:affinity") is None
    again = await engine.decide(REQUEST.model_copy(update={"model": "coding"}), sub)
    assert again.source == "subagents/affinity"


@pytest.mark.parametrize(
    ("sub", "message"),
    [
        ({"type": "passthrough", "target": "ghost"}, "routes.r.subagents.target: unknown target 'ghost'"),
        ({"type": "passthrough", "target": "efficient", "aliases": ["x"]}, "routes.r.subagents.aliases"),
        ({"type": "passthrough", "target": "efficient", "subagents": {}}, "routes.r.subagents.subagents"),
        (
            {"type": "cascade", "stages": ["nope"], "default": "efficient"},
            "routes.r.subagents.stages[0]: unknown route",
        ),
        ({"target": "efficient"}, "routes.r.subagents.type"),
    ],
)
def test_subagents_config_errors(sub: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({**BASE, "routes": {"r": {"type": "passthrough", "target": "capable", "subagents": sub}}})
    assert message in str(err.value)


def test_a_cascade_stage_naming_a_route_with_a_stateful_subagents_policy_keeps_state() -> None:
    # The stage's own router (passthrough) keeps no state, its subagents policy does: the route,
    # and a cascade whose stage names it, must both count as stateful (session ids are derived
    # and state is kept for them).
    sub = {"type": "llm_classifier", "mode": "capability", "classifier_target": "judge",
           "strong_target": "capable", "weak_target": "efficient", "base_threshold": 0.5,
           "classify_trigger": "new_session"}  # fmt: skip
    engine = _engine(
        {
            "coding": {"type": "passthrough", "target": "capable", "subagents": sub},
            "front": {"type": "cascade", "stages": ["coding"], "default": "efficient"},
        }
    )
    assert engine.routes["coding"].stateful is True
    assert engine.routes["front"].stateful is True
