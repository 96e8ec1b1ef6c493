"""Anthropic message threads through the proxy (issue 23): the real ``anthropic`` SDK's tool
runner threads its turns (beta ``message-threads-2026-08-12``); on a same-format route the
thread passes through and keys the session, on a translated route a ``continue`` is answered
``thread_not_found`` and the runner replays the whole conversation.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest
from anthropic import beta_tool

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel
from switchyard.testing.agent_loop import ToolLoop
from switchyard.testing.fake_threads import BETA
from switchyard.testing.judges import escalation_brain

pytestmark = pytest.mark.integration


def _config(port: int) -> dict[str, Any]:
    return {
        "llm_clients": {
            "vllm": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"},
            "claude": {"format": "anthropic_messages", "base_url": f"http://127.0.0.1:{port}"},
            "gpt": {"format": "openai_responses", "base_url": f"http://127.0.0.1:{port}/v1"},
        },
        "targets": {
            "lightning": {"client": "vllm", "model": "thread-vllm"},
            "opus": {"client": "claude", "model": "thread-claude"},
            "codex": {"client": "gpt", "model": "thread-gpt"},
            "opus-weak": {"client": "claude", "model": "thread-claude-weak"},
            "judge": {"client": "vllm", "model": "thread-judge"},
        },
        "routes": {
            "anthropic": {"type": "passthrough", "target": "opus"},
            "chat": {"type": "passthrough", "target": "lightning"},
            "responses": {"type": "passthrough", "target": "codex"},
            "claude-then-chat": {"type": "passthrough", "target": "opus", "fallbacks": ["lightning"]},
            "picks-chat": {"type": "random", "targets": ["lightning", "opus"], "weights": [1, 0]},
            "reviewed": {
                "type": "llm_classifier",
                "mode": "escalation",
                "classifier_target": "judge",
                "strong_target": "opus",
                "weak_target": "opus-weak",
            },
        },
    }


class _Stack:
    def __init__(self, server: ServerThread, records: list[DecisionRecord], fake: Any) -> None:
        self.server, self.records, self.fake = server, records, fake
        self.loop = ToolLoop(path="/nonexistent", content="unset")


@pytest.fixture(scope="module")
def stack(module_upstream: Any) -> Iterator[_Stack]:
    holder: list[_Stack] = []

    def brain(body: dict[str, Any], model: FakeModel) -> Any:
        return holder[0].loop.turn(body, model)

    fake = module_upstream.app
    fake.models["thread-judge"] = FakeModel("thread-judge", brain=escalation_brain(lambda view: False))
    for name in ("thread-vllm", "thread-claude", "thread-gpt"):
        fake.models[name] = FakeModel(name, brain=brain, reasoning=f"{name} considers the next step.")
    sy = Switchyard.from_config(_config(module_upstream.port))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    with ServerThread(sy) as server:
        holder.append(_Stack(server, records, fake))
        yield holder[0]


@beta_tool
def write_file(path: str, content: str) -> str:
    """Write content to the file at path.

    Args:
        path: Absolute path of the file.
        content: The text to write.
    """
    Path(path).write_text(content)
    return f"wrote {len(content)} bytes"


@beta_tool
def shell(command: str) -> str:
    """Run a shell command and return what it printed.

    Args:
        command: The command line.
    """
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30)
    return (done.stdout + done.stderr).strip()


def _run(stack: _Stack, route: str, *, stream: bool) -> tuple[str, list[DecisionRecord], list[dict[str, Any]]]:
    tmp = Path(tempfile.mkdtemp(prefix="sy-thread-"))
    content = f"threaded {route} {'stream' if stream else 'json'}"
    stack.loop = ToolLoop(path=str(tmp / "proof.txt"), content=content)
    seen_records, seen_bodies = len(stack.records), len(stack.fake.received)
    root = stack.server.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key="test", max_retries=0) as client:
        runner = client.beta.messages.tool_runner(
            model=route,
            max_tokens=1024,
            messages=[{"role": "user", "content": f"Write {tmp / 'proof.txt'}, cat it, report."}],
            tools=[write_file, shell],
            stream=stream,
        )
        if stream:
            final = ""
            for message_stream in runner:
                final = "".join(b.text for b in message_stream.get_final_message().content if b.type == "text")
        else:
            reply = runner.until_done()
            final = "".join(b.text for b in reply.content if b.type == "text")
    assert (tmp / "proof.txt").read_text().strip() == content
    assert "ALL DONE." in final and content in final, final
    bodies = [r.body for r in stack.fake.received[seen_bodies:]]
    return final, [r for r in stack.records[seen_records:] if r.route == route], bodies


@pytest.mark.parametrize("stream", [False, True])
def test_same_format_route_passes_the_thread_and_keeps_one_session(stack: _Stack, stream: bool) -> None:
    _, records, bodies = _run(stack, "anthropic", stream=stream)
    assert [r.status for r in records] == [200, 200, 200]
    # The upstream held the thread: later turns sent only the new tool result.
    assert bodies[0]["thread"] == {"type": "create"}
    assert [b["thread"]["type"] for b in bodies[1:]] == ["continue", "continue"]
    assert all(len(b["messages"]) == 1 for b in bodies[1:])
    sessions = {r.session_id for r in records}
    assert len(sessions) == 1 and None not in sessions, [(r.session_id, r.session_source) for r in records]
    assert [r.turn_index for r in records] == [0, 1, 2]
    assert [r.session_source for r in records][1:] == ["thread", "thread"]


@pytest.mark.parametrize("route", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_translated_route_answers_thread_not_found_and_the_runner_replays(
    stack: _Stack, route: str, stream: bool
) -> None:
    _, records, bodies = _run(stack, route, stream=stream)
    refused = [r for r in records if r.status == 404]
    served = [r for r in records if r.status == 200]
    # create → continue (404) → create again with everything → continue (404) → unthreaded.
    assert len(refused) == 2 and all("thread" in (r.error or "") for r in refused), [r.error for r in records]
    assert len(served) == 3
    assert all(r.selected for r in served)
    sessions = {r.session_id for r in served}
    assert len(sessions) == 1 and None not in sessions
    assert [r.turn_index for r in served] == [0, 1, 2]
    # The upstream never saw a lone tool result (the fakes would have refused it).
    assert len(bodies) == 3


def test_thread_not_found_in_anthropic_error_shape(stack: _Stack) -> None:
    root = stack.server.base_url.removesuffix("/v1")
    body = {
        "model": "chat",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}],
        "thread": {"type": "continue", "previous_message_id": "msg_abc"},
    }
    seen = len(stack.records)
    reply = httpx.post(root + "/v1/messages", json=body, headers={"anthropic-beta": BETA}, timeout=10)
    assert reply.status_code == 404
    # Refused before routing (no target of the route can continue a thread), and recorded.
    (record,) = stack.records[seen:]
    assert (record.status, record.source, record.candidates) == (404, "", [])
    error = reply.json()["error"]
    assert error["type"] == "not_found_error" and error["details"] == {"error_code": "thread_not_found"}
    with anthropic.Anthropic(base_url=root, api_key="test", max_retries=0) as client:
        with pytest.raises(anthropic.NotFoundError) as caught:
            client.beta.messages.create(**body, betas=[BETA])
    assert caught.value.error_code == "thread_not_found"


def test_a_continue_leaves_out_fallbacks_that_cannot_continue_it(stack: _Stack) -> None:
    """A fallback of another format would answer without the conversation: a continue is
    served by the Anthropic candidates only; the create before it keeps every fallback."""
    root = stack.server.base_url.removesuffix("/v1")
    first = {
        "model": "claude-then-chat",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hello there"}],
        "thread": {"type": "create"},
    }
    seen = len(stack.records)
    reply = httpx.post(root + "/v1/messages", json=first, headers={"anthropic-beta": BETA}, timeout=10)
    assert reply.status_code == 200, reply.text
    cont = {
        "model": "claude-then-chat",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "and again"}],
        "thread": {"type": "continue", "previous_message_id": reply.json()["id"]},
    }
    again = httpx.post(root + "/v1/messages", json=cont, headers={"anthropic-beta": BETA}, timeout=10)
    assert again.status_code == 200, again.text
    records = stack.records[seen:]
    assert records[0].candidates == ["opus", "lightning"]
    assert records[1].candidates == ["opus"]
    assert records[1].session_id == records[0].session_id and records[1].turn_index == 1


async def test_a_thread_keeps_its_session_across_replicas_sharing_redis(module_upstream: Any, tmp_path: Path) -> None:
    """Turn 1 on one replica, its `continue` on another: the thread record is in Redis."""
    from _redis import RedisServer

    server = RedisServer(tmp_path).start()
    try:
        # timeout_s: no degraded (per-process) fallback when a busy machine is slow to answer.
        config = {**_config(module_upstream.port), "state": {"backend": "redis", "url": server.url, "timeout_s": 5.0}}
        one, two = Switchyard.from_config(config), Switchyard.from_config(config)
        records: list[DecisionRecord] = []
        one.on_decision(records.append)
        two.on_decision(records.append)
        headers = {"anthropic-beta": BETA, "content-type": "application/json"}
        first = {
            "model": "anthropic",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "replica question"}],
            "thread": {"type": "create"},
        }
        reply = await one.engine.handle("anthropic_messages", orjson.dumps(first), headers)
        assert reply.status == 200, reply.body
        cont = {
            "model": "anthropic",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "replica follow-up"}],
            "thread": {"type": "continue", "previous_message_id": orjson.loads(reply.body or b"{}")["id"]},
        }
        again = await two.engine.handle("anthropic_messages", orjson.dumps(cont), headers)
        assert again.status == 200, again.body
        assert records[0].session_id is not None
        assert (records[1].session_id, records[1].turn_index) == (records[0].session_id, 1)
        await one.aclose()
        await two.aclose()
    finally:
        server.stop()


def test_a_router_choosing_another_format_for_a_continue_gets_thread_not_found(stack: _Stack) -> None:
    root = stack.server.base_url.removesuffix("/v1")
    body = {
        "model": "picks-chat",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "more"}],
        "thread": {"type": "continue", "previous_message_id": "msg_elsewhere"},
    }
    seen = len(stack.records)
    reply = httpx.post(root + "/v1/messages", json=body, headers={"anthropic-beta": BETA}, timeout=10)
    assert reply.status_code == 404 and reply.json()["error"]["details"]["error_code"] == "thread_not_found"
    (record,) = stack.records[seen:]
    assert record.source and record.status == 404 and "lightning" in (record.error or "")


def test_a_routers_own_answer_can_be_continued_in_the_same_session(stack: _Stack) -> None:
    """The escalation route answers with the efficient model itself (decision.response): that
    reply is recorded for its thread as well, so the continue keeps the session."""
    root = stack.server.base_url.removesuffix("/v1")
    first = {
        "model": "reviewed",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "a reviewed question"}],
        "thread": {"type": "create"},
    }
    seen = len(stack.records)
    reply = httpx.post(root + "/v1/messages", json=first, headers={"anthropic-beta": BETA}, timeout=20)
    assert reply.status_code == 200, reply.text
    cont = {
        "model": "reviewed",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "and a follow-up"}],
        "thread": {"type": "continue", "previous_message_id": reply.json()["id"]},
    }
    again = httpx.post(root + "/v1/messages", json=cont, headers={"anthropic-beta": BETA}, timeout=20)
    assert again.status_code == 200, again.text
    one, two = stack.records[seen:]
    assert one.selected == "opus-weak" and one.session_id is not None, (one.source, one.reason)
    assert (two.session_id, two.session_source, two.turn_index) == (one.session_id, "thread", 1)
