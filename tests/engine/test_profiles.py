"""``type: profiles``: the session's profile is chosen at its first turn and after a compaction,
kept in the session state, and named in every record."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from switchyard.config.load import ConfigError, load_config
from switchyard.protocol.errors import UpstreamStatusError
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse

Rig = Any

TARGETS = {
    "efficient": {"client": "up", "model": "m-efficient"},
    "capable": {"client": "up", "model": "m-capable"},
    "judge": {"client": "up", "model": "m-judge"},
}
ROUTES: dict[str, Any] = {
    "agent": {
        "type": "profiles",
        "choose": {
            "type": "llm_classifier",
            "mode": "capability",
            "classifier_target": "judge",
            "strong_target": "capable",
            "weak_target": "efficient",
            "base_threshold": 0.5,
        },
        "profiles": {"efficient": "efficient_first", "capable": "capable_first"},
        "default": "efficient_first",
    },
    "efficient_first": {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "picker": "efficient_first",
        "confidence_threshold": 0.5,
    },
    "capable_first": {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "picker": "capable_first",
        "confidence_threshold": 0.5,
    },
}


def verdict(p_solve: float) -> ChatResponse:
    body = {"crux": "c", "primary_rule": "SUP-1", "capability_boundary": "supported", "p_solve": p_solve}
    return ChatResponse(id="j", content=[TextPart(text=json.dumps(body))])


def answer(name: str) -> ChatResponse:
    return ChatResponse(id=name, content=[TextPart(text=f"[{name}]")])


def make(rig: Callable[..., Rig], judge: list[Any]) -> Rig:
    script = {"efficient": [answer("efficient")], "capable": [answer("capable")], "judge": judge}
    return rig(script, targets=TARGETS, routes=ROUTES)


def turn(*texts: str) -> ChatRequest:
    messages = []
    for i, text in enumerate(texts):
        messages.append(Message.of("user" if i % 2 == 0 else "assistant", text))
    return ChatRequest(model="agent", messages=messages)


def judge_calls(r: Rig) -> int:
    return r.backend.targets_called().count("judge")


async def test_chosen_once_per_session_and_recorded_every_turn(rig: Callable[..., Rig]) -> None:
    r = make(rig, [verdict(0.9), verdict(0.1)])
    session = {"x-switchyard-session-id": "s1"}
    first = await r.engine.complete(turn("rename a variable"), session)
    assert first.record.source == "profile:efficient_first/fall_open" and first.target == "efficient"
    profile = first.record.details["profile"]
    assert profile["name"] == "efficient_first" and profile["why"] == "first_turn"
    assert profile["chooser_pick"] == "efficient" and profile["chooser_source"] == "llm-classifier"
    later = await r.engine.complete(turn("rename a variable", "done", "and another one"), session)
    assert later.record.details["profile"]["why"] == "stored"
    assert later.record.source.startswith("profile:efficient_first/")
    assert judge_calls(r) == 1  # the chooser is not asked again in the same session
    other = await r.engine.complete(turn("design a distributed lock"), {"x-switchyard-session-id": "s2"})
    assert other.record.details["profile"]["name"] == "capable_first" and other.target == "capable"
    assert judge_calls(r) == 2


async def test_a_compaction_chooses_again(rig: Callable[..., Rig]) -> None:
    r = make(rig, [verdict(0.9), verdict(0.1)])
    session = {"x-switchyard-session-id": "s3"}
    await r.engine.complete(turn("tidy up the imports"), session)
    summary = "This session is being continued from a previous conversation that ran out of context."
    after = await r.engine.complete(turn(summary), session)
    assert after.record.details["profile"] == {
        "name": "capable_first",
        "why": "compacted",
        "chooser_source": "llm-classifier",
        "chooser_pick": "capable",
        "chooser_score": pytest.approx(0.9),
    }
    then = await r.engine.complete(turn(summary, "ok", "continue"), session)
    assert (
        then.record.details["profile"]["name"] == "capable_first" and then.record.details["profile"]["why"] == "stored"
    )
    assert judge_calls(r) == 2


async def test_a_failing_chooser_falls_back_to_the_default_profile(rig: Callable[..., Rig]) -> None:
    r = make(rig, [UpstreamStatusError("HTTP 503", upstream_status=503)])
    done = await r.engine.complete(turn("anything"), {"x-switchyard-session-id": "s4"})
    assert done.record.details["profile"]["name"] == "efficient_first"


async def test_the_state_is_in_the_routes_session_slot(rig: Callable[..., Rig]) -> None:
    r = make(rig, [verdict(0.1)])
    await r.engine.complete(turn("hard task"), {"x-switchyard-session-id": "s5"})
    stored = await r.engine.store.get("agent:s5:profile")
    assert stored is not None and stored["profile"] == "capable_first"


BASE = {"llm_clients": {"up": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}}, "targets": TARGETS}


def test_config_errors_name_their_path() -> None:
    bad_default = {**ROUTES, "agent": {**ROUTES["agent"], "default": "nope"}}
    with pytest.raises(ConfigError, match=r"routes\.agent.*must be one of the profiles"):
        load_config({**BASE, "routes": bad_default})
    unknown = {
        **ROUTES,
        "agent": {
            **ROUTES["agent"],
            "profiles": {"efficient": "missing", "capable": "capable_first"},
            "default": "missing",
        },
    }
    with pytest.raises(ConfigError, match=r"routes\.agent\.profiles\.efficient.*unknown route 'missing'"):
        load_config({**BASE, "routes": unknown})


async def test_replicas_share_the_choice_through_redis(rig: Callable[..., Rig], tmp_path: Any) -> None:
    from _redis import RedisServer

    server = RedisServer(tmp_path).start()
    try:
        state = {"backend": "redis", "url": server.url, "timeout_s": 5.0}  # no degraded fallback on a busy machine
        script_a = {"efficient": [answer("efficient")], "capable": [answer("capable")], "judge": [verdict(0.1)]}
        script_b = {"efficient": [answer("efficient")], "capable": [answer("capable")], "judge": [verdict(0.9)]}
        a = rig(script_a, targets=TARGETS, routes=ROUTES, state=state)
        b = rig(script_b, targets=TARGETS, routes=ROUTES, state=state)
        session = {"x-switchyard-session-id": f"r-{tmp_path.name}"}
        first = await a.engine.complete(turn("design a lock service"), session)
        assert first.record.details["profile"]["name"] == "capable_first"
        second = await b.engine.complete(turn("design a lock service", "ok", "go on"), session)
        assert second.record.details["profile"]["name"] == "capable_first"
        assert second.record.details["profile"]["why"] == "stored"
        assert judge_calls(b) == 0  # the other replica's choice stands; its judge is not asked
        for replica in (a, b):
            await replica.engine.aclose()
            await replica.engine.store.aclose()  # type: ignore[attr-defined]
    finally:
        server.stop()
