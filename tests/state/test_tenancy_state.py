"""Where a tenant's state lands in the store (issue 44): without inbound keys the keys are what
they always were; with keys every session and thread key carries the tenant's namespace, in
memory and in a Redis shared by two replicas."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from _configs import skeleton_config
from _convo import Step, bash, render
from _redis import RedisServer

from switchyard.api import Switchyard
from switchyard.engine.reply import Reply
from switchyard.protocol.access import Caller, current_caller
from switchyard.protocol.session import SessionInfo, tenant_namespace
from switchyard.state.memory import MemoryStore
from switchyard.testing.fake_threads import BETA

QUIET: list[Step] = [("system", "You are a coding agent."), ("user", "Fix the parser so that the tests pass.")]
OOM: list[Step] = [*QUIET, bash("python train.py", "RuntimeError: CUDA out of memory.")]
ALICE, BOB = Caller("alice-laptop", "alice"), Caller("bob", "bob")
THREAD_HEADERS = {"anthropic-beta": BETA, "anthropic-version": "2023-06-01", "content-type": "application/json"}


def _config(port: int, state: dict[str, Any] | None = None) -> dict[str, Any]:
    base = skeleton_config(port)
    return {
        **base,
        "llm_clients": {
            **base["llm_clients"],
            "claude": {"format": "anthropic_messages", "base_url": f"http://127.0.0.1:{port}"},
            "gpt": {"format": "openai_responses", "base_url": f"http://127.0.0.1:{port}/v1"},
        },
        "targets": {
            **base["targets"],
            "opus": {"client": "claude", "model": "fake-claude"},
            "codex": {"client": "gpt", "model": "fake-gpt"},
        },
        "routes": {
            "agent": {"type": "stage_router", "capable": "capable", "efficient": "efficient", "hold_turns": 2},
            "threaded": {"type": "passthrough", "target": "opus"},
            "responses": {"type": "passthrough", "target": "codex"},
        },
        **({"state": state} if state else {}),
    }


@contextmanager
def calling_as(caller: Caller | None) -> Iterator[None]:
    """What the proxy's gate does on admitting a request with an inbound key."""
    token = current_caller.set(caller)
    try:
        yield
    finally:
        current_caller.reset(token)


async def decide(sy: Switchyard, caller: Caller | None, steps: list[Step], session: str) -> dict[str, Any]:
    with calling_as(caller):
        reply = await sy.dispatch(
            "POST", "/v1/decision", orjson.dumps(render(steps)), {"x-switchyard-session-id": session}
        )
    assert reply.status == 200, reply.body
    return dict(orjson.loads(reply.body or b"{}"))


async def thread(sy: Switchyard, caller: Caller | None, content: str, previous: str | None = None) -> Reply:
    kind = {"type": "create"} if previous is None else {"type": "continue", "previous_message_id": previous}
    body = {"model": "threaded", "max_tokens": 64, "messages": [{"role": "user", "content": content}], "thread": kind}
    with calling_as(caller):
        return await sy.dispatch("POST", "/v1/messages", orjson.dumps(body), THREAD_HEADERS)


async def respond(sy: Switchyard, caller: Caller | None, text: str) -> Reply:
    body = {"model": "responses", "input": text}
    with calling_as(caller):
        return await sy.dispatch("POST", "/v1/responses", orjson.dumps(body), {"content-type": "application/json"})


def _id(reply: Reply) -> str:
    assert reply.status == 200, reply.body
    return str(orjson.loads(reply.body or b"{}")["id"])


async def test_without_keys_the_state_keys_are_what_they_were(upstream: Any) -> None:
    sy = Switchyard.from_config(_config(upstream.port))
    store = sy.state_store
    assert isinstance(store, MemoryStore)
    try:
        await decide(sy, None, QUIET, "s-1")
        opened = _id(await thread(sy, None, "hello"))
        _id(await respond(sy, None, "hello"))  # no tenant: no ownership record
        assert sorted(store.keys()) == sorted(["agent:s-1:stage", f"~threads:{opened}"])
        # An id the store does not know is still forwarded: the upstream may hold it.
        seen = len(upstream.app.received)
        forwarded = await thread(sy, None, "more", previous="msg_unknown_to_the_router")
        assert len(upstream.app.received) == seen + 1
        assert forwarded.status == 404  # the fake upstream's own thread_not_found
    finally:
        await sy.aclose()


async def test_with_keys_every_key_carries_the_tenants_namespace(upstream: Any) -> None:
    sy = Switchyard.from_config(_config(upstream.port))
    store = sy.state_store
    assert isinstance(store, MemoryStore)
    odd = Caller("k", "team:a/%")
    try:
        await decide(sy, ALICE, QUIET, "s-1")
        await decide(sy, odd, QUIET, "s-1")
        opened = _id(await thread(sy, ALICE, "hello"))
        stored = _id(await respond(sy, ALICE, "hello"))
        assert sorted(store.keys()) == sorted(
            [
                "agent:~t:alice:s-1:stage",
                "agent:~t:team%3Aa%2F%25:s-1:stage",
                f"~threads:~t:alice:{opened}",
                f"~responses:{stored}",
            ]
        )
        assert await store.get(f"~responses:{stored}") == {"tenant": "alice"}
        # A tenant's `continue` of an id it does not hold never reaches the upstream.
        seen = len(upstream.app.received)
        refused = await thread(sy, BOB, "more", previous=opened)
        assert refused.status == 404 and len(upstream.app.received) == seen
    finally:
        await sy.aclose()


def test_sub_agent_and_derived_session_keys_carry_the_tenant_too() -> None:
    delegated = SessionInfo(session_id="h:0123", agent_id="helper", delegated=True)
    spawned = SessionInfo(session_id="d:abcd", agent_id="child", parent_agent_id="root")
    assert (delegated.key, spawned.key) == ("h:0123/helper", "d:abcd/child")  # as before tenants
    assert replace(delegated, tenant="alice").key == "~t:alice:h:0123/helper"
    assert replace(spawned, tenant="bob").key == "~t:bob:d:abcd/child"


@pytest.mark.parametrize(
    ("one", "two"),
    [("a", "a:b"), ("a", "ab"), ("a:", "a"), ("a%3Ab", "a:b"), ("x", "x/y"), ("", " "), ("~t:a:", "a")],
)
def test_no_tenants_namespace_is_a_prefix_of_anothers(one: str, two: str) -> None:
    first, second = tenant_namespace(one), tenant_namespace(two)
    assert first != second
    assert not first.startswith(second) and not second.startswith(first)


async def test_two_replicas_on_one_redis_keep_tenants_apart_and_share_each_tenants_state(
    upstream: Any, tmp_path: Path
) -> None:
    server = RedisServer(tmp_path).start()
    # timeout_s: no degraded (per-process) fallback when a busy machine is slow to answer.
    config = _config(upstream.port, {"backend": "redis", "url": server.url, "timeout_s": 5.0})
    one, two = Switchyard.from_config(config), Switchyard.from_config(config)
    try:
        assert (await decide(one, ALICE, QUIET, "shared"))["target"] == "efficient"
        assert (await decide(one, ALICE, OOM, "shared"))["target"] == "capable"
        bob = await decide(two, BOB, QUIET, "shared")
        assert bob["session"]["state_changes"][0]["before"] is None
        assert (bob["target"], bob["source"]) != ("capable", "hold")
        alice = await decide(two, ALICE, QUIET, "shared")  # her state, read on the other replica
        assert (alice["target"], alice["source"]) == ("capable", "hold")
        opened = _id(await thread(one, ALICE, "alice's private notes"))
        assert (await thread(two, BOB, "what did she say?", previous=opened)).status == 404
        assert (await thread(two, ALICE, "go on", previous=opened)).status == 200
        raw = redis.Redis.from_url(server.url)
        try:
            keys = {k.decode() for k in raw.keys("switchyard:*")}
        finally:
            raw.close()
        assert {"switchyard:agent:~t:alice:shared:stage", "switchyard:agent:~t:bob:shared:stage"} <= keys
        assert f"switchyard:~threads:~t:alice:{opened}" in keys
        assert not any(k.startswith(("switchyard:agent:shared", "switchyard:~threads:msg")) for k in keys)
    finally:
        await one.aclose()
        await two.aclose()
        server.stop()
