"""Caller-chosen ids are bounded before anything keeps them (issue 23): a 32 KiB session id is
kept as a short stable hash in the ledger, ``/v1/stats``, decision records and state keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _proxy import recording_proxy

from switchyard.engine.records import DecisionRecord
from switchyard.engine.session import MAX_ID_CHARS, bounded_id, identify
from switchyard.protocol.request import ChatRequest
from switchyard.server.runner import ServerThread

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def proxy(module_config: dict[str, Any]) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    with recording_proxy(module_config) as served:
        yield served


def test_long_ids_from_the_body_are_kept_as_hashes(proxy: tuple[ServerThread, list[DecisionRecord]]) -> None:
    server, records = proxy
    ids = [f"{i:04d}" + "s" * 32 * 1024 for i in range(20)]
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        for sid in ids:
            assert (
                http.post("/chat/completions", json={"model": "fast", "messages": HI, "user": sid}).status_code == 200
            )
        # The same long id again: the same key (the hash is stable), so a session stays one session.
        assert http.post("/chat/completions", json={"model": "fast", "messages": HI, "user": ids[0]}).status_code == 200
        stats = http.get("/stats")
    assert stats.status_code == 200
    assert len(stats.content) < 20_000  # was 20 x 32 KiB of ids
    sessions = stats.json()["usd"]["sessions"]
    assert len(sessions) == 20 and all(k.startswith("fast:long:") and len(k) <= 64 for k in sessions)
    assert records[-1].session_id == records[-21].session_id == bounded_id(ids[0])
    assert all(len(r.session_id or "") <= MAX_ID_CHARS for r in records)


def test_ids_up_to_the_cap_are_kept_as_sent() -> None:
    exact = "a" * MAX_ID_CHARS
    assert bounded_id(exact) is exact and bounded_id(None) is None
    hashed = bounded_id(exact + "b")
    assert hashed is not None and hashed.startswith("long:") and len(hashed) == 5 + 32
    assert bounded_id(exact + "b") == hashed and bounded_id(exact + "c") != hashed


def test_state_keys_are_bounded_too() -> None:
    request = ChatRequest(model="fast", messages=[])
    big = "x" * 32 * 1024
    headers = {
        "x-switchyard-session-id": big,
        "x-switchyard-agent-id": big + "a",
        "x-switchyard-parent-agent-id": big + "p",
        "x-switchyard-agent-kind": big,
    }
    info = identify(headers, request)
    assert info.key is not None and len(info.key) <= 2 * MAX_ID_CHARS + 1
    assert info.key == f"{bounded_id(big)}/{bounded_id(big + 'a')}"
    assert len(info.parent_agent_id or "") <= MAX_ID_CHARS and len(info.agent_kind or "") <= MAX_ID_CHARS
