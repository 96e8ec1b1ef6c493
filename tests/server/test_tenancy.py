"""Tenancy as a rule of the state model (issue 44, item 2): with inbound keys, session state,
derived sessions, thread continuation, ``/v1/decision`` state changes and the dashboard's
session views belong to the tenant of the request's key.

Each test is an attack by key B (tenant ``bob``) on key A's (tenant ``alice``) state that
worked before tenants existed; ``alice-ci`` is grouped with ``alice`` by ``server.tenants`` and
shows that keys of one tenant do share.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from _convo import Step, bash, render
from _proxy import recording_proxy

from switchyard.engine.records import DecisionRecord
from switchyard.server.auth import hash_key
from switchyard.testing.fake_threads import BETA

KEY_A, KEY_A_CI, KEY_B, KEY_OPS = "sy-test-alice", "sy-test-alice-ci", "sy-test-bob", "sy-test-ops"
QUIET: list[Step] = [("system", "You are a coding agent."), ("user", "Fix the parser so that the tests pass.")]
OOM: list[Step] = [*QUIET, bash("python train.py", "RuntimeError: CUDA out of memory.")]
SECRET = "alice's launch code is 7-7-4"


@pytest.fixture(scope="module")
def proxy(module_config: dict[str, Any], module_upstream: Any) -> Iterator[tuple[str, list[DecisionRecord], Any]]:
    port = module_upstream.port
    config = {
        **module_config,
        "llm_clients": {
            **module_config["llm_clients"],
            "claude": {"format": "anthropic_messages", "base_url": f"http://127.0.0.1:{port}"},
            "gpt": {"format": "openai_responses", "base_url": f"http://127.0.0.1:{port}/v1"},
        },
        "targets": {
            **module_config["targets"],
            "opus": {"client": "claude", "model": "fake-claude"},
            "codex": {"client": "gpt", "model": "fake-gpt"},
        },
        "routes": {
            **module_config["routes"],
            "agent": {"type": "stage_router", "capable": "capable", "efficient": "efficient", "hold_turns": 2},
            "threaded": {"type": "passthrough", "target": "opus"},
            "responses": {"type": "passthrough", "target": "codex"},
        },
        "server": {
            "api_keys": [
                {"name": "alice", "hash": hash_key(KEY_A)},
                {"name": "alice-ci", "hash": hash_key(KEY_A_CI)},
                {"name": "bob", "hash": hash_key(KEY_B)},
                {"name": "ops", "hash": hash_key(KEY_OPS), "admin": True},
            ],
            "tenants": {"alice": {"keys": ["alice", "alice-ci"]}},
            "dashboard": {"enabled": True},
        },
    }
    with recording_proxy(config) as (server, records):
        yield server.root_url, records, module_upstream.app


def decide(root: str, key: str, steps: list[Step], **headers: str) -> dict[str, Any]:
    hdrs = {"authorization": f"Bearer {key}", **headers}
    resp = httpx.post(f"{root}/v1/decision", json=render(steps), headers=hdrs, timeout=10)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def test_key_b_sending_a_session_id_neither_reads_nor_rewrites_its_state(proxy: Any) -> None:
    root, records, _ = proxy
    session = {"x-switchyard-session-id": "shared-id"}
    assert decide(root, KEY_A, QUIET, **session)["target"] == "efficient"
    escalated = decide(root, KEY_A, OOM, **session)  # a switch: held for two turns
    assert escalated["target"] == "capable"
    # Bob names Alice's session: he sees no state of hers and starts his own.
    bob = decide(root, KEY_B, QUIET, **session)
    assert bob["session"]["id"] == "shared-id"
    (change,) = bob["session"]["state_changes"]
    assert change["before"] is None and change["after"]["tier"] == "efficient"
    assert (bob["target"], bob["source"]) != ("capable", "hold")
    # Alice's state is still hers (Bob's write went to his own): her calm turn is held, and so is
    # one from her other key, which shares her tenant.
    held = decide(root, KEY_A, QUIET, **session)
    assert (held["target"], held["source"]) == ("capable", "hold")
    assert held["session"]["state_changes"][0]["before"]["tier"] == "capable"
    again = decide(root, KEY_A_CI, QUIET, **session)  # the same turn again, from her CI key
    assert (again["target"], again["source"]) == ("capable", "hold")
    mine = [r for r in records if r.session_id == "shared-id"]
    assert [r.tenant for r in mine] == ["alice", "alice", "bob", "alice", "alice"]
    assert [r.details["api_key"] for r in mine] == ["alice", "alice", "bob", "alice", "alice-ci"]


def test_key_b_opening_the_same_way_without_a_header_gets_its_own_derived_session(proxy: Any) -> None:
    root, records, _ = proxy
    opening: list[Step] = [("system", "You are a derived agent."), ("user", "Port the build to meson.")]
    assert decide(root, KEY_A, opening)["target"] == "efficient"
    alice = decide(root, KEY_A, [*opening, bash("meson test", "RuntimeError: CUDA out of memory.")])
    assert alice["session"]["source"] == "derived" and alice["target"] == "capable"
    bob = decide(root, KEY_B, opening)
    # The same opening derives the same id, but in Bob's tenant: none of Alice's state.
    assert bob["session"]["id"] == alice["session"]["id"]
    assert bob["session"]["state_changes"][0]["before"] is None
    assert (bob["target"], bob["source"]) != ("capable", "hold")
    assert records[-1].tenant == "bob" and records[-2].tenant == "alice"
    # Alice's own next calm turn is still held: Bob's turn did not rewrite her state.
    held = decide(root, KEY_A, opening)
    assert (held["target"], held["source"]) == ("capable", "hold")


def _message(content: str, thread: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "threaded",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": content}],
        "thread": thread,
    }


def _post(root: str, key: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01", "anthropic-beta": BETA}
    return httpx.post(f"{root}/v1/messages", json=body, headers=headers, timeout=10)


def test_key_b_cannot_continue_a_thread_of_key_a(proxy: Any) -> None:
    root, records, upstream = proxy
    opened = _post(root, KEY_A, _message(SECRET, {"type": "create"}))
    assert opened.status_code == 200, opened.text
    message_id = opened.json()["id"]
    alice_session = records[-1].session_id
    before = len(upstream.received)
    # Bob continues Alice's thread: refused before anything reaches the upstream, which holds
    # every tenant's threads under the proxy's own credential.
    stolen = _post(
        root, KEY_B, _message("repeat everything so far", {"type": "continue", "previous_message_id": message_id})
    )
    assert stolen.status_code == 404, stolen.text
    assert stolen.json()["error"]["details"]["error_code"] == "thread_not_found"
    assert len(upstream.received) == before
    assert (records[-1].tenant, records[-1].status) == ("bob", 404)
    assert records[-1].session_id != alice_session
    # Alice's other key (same tenant) continues it, in her session.
    cont = {"type": "continue", "previous_message_id": message_id}
    own = _post(root, KEY_A_CI, _message("and then?", cont))
    assert own.status_code == 200, own.text
    assert (records[-1].session_id, records[-1].tenant, records[-1].turn_index) == (alice_session, "alice", 1)


def _respond(root: str, key: str, text: str, previous: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"model": "responses", "input": text}
    if previous is not None:
        body["previous_response_id"] = previous
    return httpx.post(f"{root}/v1/responses", json=body, headers={"authorization": f"Bearer {key}"}, timeout=10)


def test_key_b_cannot_continue_a_stored_response_of_key_a(proxy: Any) -> None:
    """The same class as threads: OpenAI keeps a stored response under the proxy's credential."""
    root, records, upstream = proxy
    stored = _respond(root, KEY_A, SECRET)
    assert stored.status_code == 200, stored.text
    response_id = stored.json()["id"]
    before = len(upstream.received)
    stolen = _respond(root, KEY_B, "repeat everything so far", previous=response_id)
    assert stolen.status_code == 400, stolen.text
    error = stolen.json()["error"]
    assert (error["code"], error["param"]) == ("previous_response_not_found", "previous_response_id")
    assert error["message"] == f"Previous response with id '{response_id}' not found."  # as OpenAI words it
    assert len(upstream.received) == before
    assert (records[-1].tenant, records[-1].status) == ("bob", 400)
    # Alice's CI key is her tenant: its continuation goes through.
    assert _respond(root, KEY_A_CI, "and then?", previous=response_id).status_code == 200
    assert upstream.received[-1].body["previous_response_id"] == response_id


def test_dashboard_is_the_operators_and_keeps_tenants_sessions_apart(proxy: Any) -> None:
    root, _, _ = proxy
    session = {"x-switchyard-session-id": "dash-id"}
    decide(root, KEY_A, OOM, **session)
    decide(root, KEY_B, QUIET, **session)
    decide(root, KEY_B, QUIET, **session)
    # A tenant's key is not the operator: the dashboard's data is refused to it.
    for key in (KEY_A, KEY_B):
        refused = httpx.get(f"{root}/dashboard/api/sessions", headers={"authorization": f"Bearer {key}"}, timeout=10)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_admin"
    ops = {"authorization": f"Bearer {KEY_OPS}"}
    listed = httpx.get(f"{root}/dashboard/api/sessions?route=agent", headers=ops, timeout=10).json()["sessions"]
    rows = {r["tenant"]: r for r in listed if r["session_id"] == "dash-id"}
    assert set(rows) == {"alice", "bob"}
    assert (rows["alice"]["turns"], rows["bob"]["turns"]) == (1, 2)
    assert rows["alice"]["key"] != rows["bob"]["key"]
    for tenant, turns in (("alice", 1), ("bob", 2)):
        key = quote(rows[tenant]["key"], safe="")
        timeline = httpx.get(f"{root}/dashboard/api/session?key={key}", headers=ops, timeout=10).json()
        assert timeline["session"]["tenant"] == tenant and len(timeline["turns"]) == turns
    only_bob = httpx.get(f"{root}/dashboard/api/sessions?tenant=bob", headers=ops, timeout=10).json()["sessions"]
    assert only_bob and {r["tenant"] for r in only_bob} == {"bob"}
