"""``POST /v1/feedback`` through a real proxy (issue 48, item 1): matched by session and by
request id, repeated and unknown ids, bad bodies, and tenancy — a key reports on its own
tenant's sessions only, and another tenant's id answers exactly like an unknown one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from _proxy import recording_proxy

from switchyard.engine.records import DecisionRecord
from switchyard.server.auth import hash_key

KEY_A, KEY_B = "sy-test-alice", "sy-test-bob"


@pytest.fixture(scope="module")
def proxy(
    module_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, list[DecisionRecord], Path]]:
    log = tmp_path_factory.mktemp("fb") / "decisions.jsonl"
    config = {
        **module_config,
        "feedback": {},
        "decision_log": str(log),
        "server": {
            "api_keys": [{"name": "alice", "hash": hash_key(KEY_A)}, {"name": "bob", "hash": hash_key(KEY_B)}],
            "dashboard": {"enabled": True},
        },
    }
    with recording_proxy(config) as (server, records):
        yield server.root_url, records, log


def chat(root: str, key: str, session: str) -> httpx.Response:
    body = {"model": "mix", "messages": [{"role": "user", "content": "hello"}]}
    headers = {"authorization": f"Bearer {key}", "x-switchyard-session-id": session}
    resp = httpx.post(f"{root}/v1/chat/completions", json=body, headers=headers, timeout=10)
    assert resp.status_code == 200, resp.text
    return resp


def feedback(root: str, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{root}/v1/feedback", json=body, headers={"authorization": f"Bearer {key}"}, timeout=10)


def log_lines(log: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in log.read_bytes().splitlines() if line.strip()]


def test_feedback_on_a_session_is_matched_and_logged(proxy: Any) -> None:
    root, _, log = proxy
    chat(root, KEY_A, "s-match")
    resp = feedback(root, KEY_A, {"session_id": "s-match", "resolved": True, "labels": ["ci-green"]})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["matched"] is True and body["replaced"] is False and body["route"] == "mix"
    assert body["resolved"] is True and body["labels"] == ["ci-green"]
    (line,) = [x for x in log_lines(log) if x.get("id") == body["id"]]
    assert line["object"] == "switchyard.feedback" and line["tenant"] == "alice" and line["api_key"] == "alice"


def test_feedback_on_a_request_id_is_matched(proxy: Any) -> None:
    root, _, _ = proxy
    request_id = chat(root, KEY_A, "s-req").headers["x-switchyard-request-id"]
    resp = feedback(root, KEY_A, {"request_id": request_id, "score": 0.25})
    assert resp.status_code == 200 and resp.json()["matched"] is True and resp.json()["score"] == 0.25


def test_a_second_report_replaces_the_first_and_both_are_logged(proxy: Any) -> None:
    root, _, log = proxy
    chat(root, KEY_A, "s-twice")
    first = feedback(root, KEY_A, {"session_id": "s-twice", "resolved": False}).json()
    second = feedback(root, KEY_A, {"session_id": "s-twice", "resolved": True}).json()
    assert (first["replaced"], second["replaced"]) == (False, True)
    ids = {x.get("id") for x in log_lines(log)}
    assert {first["id"], second["id"]} <= ids


def test_an_unknown_id_is_accepted_unmatched_and_still_logged(proxy: Any) -> None:
    root, _, log = proxy
    resp = feedback(root, KEY_A, {"session_id": "never-seen", "reward": -1.5})
    assert resp.status_code == 202 and resp.json()["matched"] is False
    assert any(x.get("id") == resp.json()["id"] and x["matched"] is False for x in log_lines(log))


def test_another_tenants_session_answers_exactly_like_an_unknown_one(proxy: Any) -> None:
    root, _, _ = proxy
    chat(root, KEY_A, "alice-private")
    theirs = feedback(root, KEY_B, {"session_id": "alice-private", "resolved": False})
    unknown = feedback(root, KEY_B, {"session_id": "nobody-at-all", "resolved": False})
    assert theirs.status_code == unknown.status_code == 202

    def shape(r: httpx.Response) -> dict[str, Any]:
        return {k: v for k, v in r.json().items() if k not in ("id", "session_id")}

    assert shape(theirs) == shape(unknown)
    # Bob's report did not land on Alice's session: hers is still unreported, and replaces nothing.
    mine = feedback(root, KEY_A, {"session_id": "alice-private", "resolved": True}).json()
    assert mine["matched"] is True and mine["replaced"] is False


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"resolved": True}, "session_id"),
        ({"session_id": "s", "request_id": "r", "resolved": True}, "session_id"),
        ({"session_id": "s"}, "resolved"),
        ({"session_id": "s", "resolved": True, "score": 1}, "score"),
        ({"session_id": "s", "score": 1.5}, "score"),
        ({"session_id": "s", "resolved": "yes"}, "resolved"),
        ({"session_id": "s", "resolved": True, "labels": ["x"] * 17}, "labels"),
        ({"session_id": "s", "resolved": True, "labels": ["x" * 65]}, "labels"),
        ({"session_id": "s", "resolved": True, "comment": "hi"}, "comment"),
        ({"session_id": "x" * 257, "resolved": True}, "session_id"),
    ],
)
def test_a_bad_report_is_refused_naming_the_field(proxy: Any, body: dict[str, Any], param: str) -> None:
    root, _, _ = proxy
    resp = feedback(root, KEY_A, body)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_a_non_finite_reward_is_refused(proxy: Any) -> None:
    root, _, _ = proxy
    headers = {"authorization": f"Bearer {KEY_A}", "content-type": "application/json"}
    resp = httpx.post(f"{root}/v1/feedback", content=b'{"session_id":"s","reward":NaN}', headers=headers, timeout=10)
    assert resp.status_code == 400


def test_feedback_needs_a_key(proxy: Any) -> None:
    root, _, _ = proxy
    resp = httpx.post(f"{root}/v1/feedback", json={"session_id": "s", "resolved": True}, timeout=10)
    assert resp.status_code == 401


def test_the_openapi_document_lists_feedback(proxy: Any) -> None:
    root, _, _ = proxy
    doc = httpx.get(f"{root}/openapi.json", timeout=10).json()
    post = doc["paths"]["/v1/feedback"]["post"]
    assert {"200", "202", "400"} <= set(post["responses"])


def test_a_tenant_key_reads_no_sessions_in_stats_nor_the_dashboard(proxy: Any) -> None:
    # Every route's sessions and outcomes are the operator's view (an admin key): a tenant's key
    # is refused, so Bob cannot find Alice's session there either.
    root, _, _ = proxy
    chat(root, KEY_A, "alice-hidden")
    bob = {"authorization": f"Bearer {KEY_B}"}
    assert httpx.get(f"{root}/v1/stats", headers=bob, timeout=10).status_code == 403
    for view in ("summary", "sessions"):
        assert httpx.get(f"{root}/dashboard/api/{view}", headers=bob, timeout=10).status_code == 403
