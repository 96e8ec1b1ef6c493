"""The checks of ``verify:`` one by one, and the gate's modes over scripted backends."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from switchyard.config.load import ConfigError, load_config
from switchyard.protocol.errors import UpstreamStatusError
from switchyard.protocol.messages import Message, TextPart, ToolCallPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.tools import ToolDefinition
from switchyard.routers.verify import check_regex, check_response_schema, check_tool_arguments
from switchyard.server.runner import AppThread

Rig = Any

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
TOOL = ToolDefinition(name="read_file", parameters=SCHEMA)


def call(name: str, arguments: str) -> ChatResponse:
    part = ToolCallPart(id="c1", name=name, arguments=arguments)
    return ChatResponse(id="r", content=[part], stop_reason="tool_use")


def text(value: str) -> ChatResponse:
    return ChatResponse(id="r", content=[TextPart(text=value)], usage=Usage(output_tokens=2))


def req(**extra: Any) -> ChatRequest:
    return ChatRequest(model="gated", messages=[Message.of("user", "go")], **extra)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"path": "a.py"}', None),
        ("{}", "/: missing required property 'path'"),
        ('{"path": 3}', "expected string"),
        ('{"path": "a.py"', "arguments are not JSON"),
        ('["a.py"]', "not a JSON object"),
    ],
)
def test_tool_arguments(arguments: str, problem: str | None) -> None:
    found = check_tool_arguments(req(tools=[TOOL]), call("read_file", arguments))
    assert found is None if problem is None else problem in (found or "")


def test_a_call_to_a_tool_the_request_never_offered_fails() -> None:
    assert "no such tool" in (check_tool_arguments(req(tools=[TOOL]), call("rm_rf", "{}")) or "")


def test_response_schema() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
    assert check_response_schema(req(response_format=fmt), text('{"path": "a"}')) is None
    assert "missing required property" in (check_response_schema(req(response_format=fmt), text("{}")) or "")
    assert "not JSON" in (check_response_schema(req(response_format=fmt), text("sure! {")) or "")
    assert (
        check_response_schema(req(response_format={"type": "json_object"}), text("[1]"))
        == "answer is not a JSON object"
    )
    assert check_response_schema(req(), text("free text")) is None  # nothing structured was asked for


def test_regex() -> None:
    import re

    pattern = re.compile(r"^\[.*\]")
    assert check_regex(pattern, "match", text("[ok] done")) is None
    assert check_regex(pattern, "match", text("done")) is not None
    assert check_regex(pattern, "no_match", text("[ok] done")) is not None
    assert check_regex(pattern, "match", call("read_file", "{}")) is None  # no text: not checked


TARGETS = {
    "cheap": {"client": "up", "model": "m-cheap", "price": {"output_per_mtok": 1}},
    "pricey": {"client": "up", "model": "m-pricey", "price": {"output_per_mtok": 30}},
}


def routes(verify: dict[str, Any]) -> dict[str, Any]:
    return {
        "gated": {
            "type": "passthrough",
            "target": "cheap",
            "verify": {"efficient": "cheap", "capable": "pricey", **verify},
        }
    }


def make(rig: Callable[..., Rig], verify: dict[str, Any], cheap: Any, pricey: Any = None) -> Rig:
    return rig({"cheap": [cheap], "pricey": [pricey or text("[pricey] fine")]}, targets=TARGETS, routes=routes(verify))


async def test_a_python_hook_by_import_path(rig: Callable[..., Rig]) -> None:
    r = make(rig, {"checks": [{"type": "hook", "callable": "_verify_hooks:no_todo"}]}, text("TODO: later"))
    done = await r.engine.complete(req())
    assert done.target == "pricey"
    assert done.record.details["verify"]["failed"] == {"check": "hook", "reason": "TODO left in the answer"}


async def test_a_coroutine_hook(rig: Callable[..., Rig]) -> None:
    r = make(rig, {"checks": [{"type": "hook", "callable": "_verify_hooks:approve_async"}]}, text("TODO"))
    assert (await r.engine.complete(req())).target == "cheap"


@pytest.mark.parametrize(("on_error", "served"), [("fail", "pricey"), ("pass", "cheap")])
async def test_a_broken_hook_counts_as_on_error(rig: Callable[..., Rig], on_error: str, served: str) -> None:
    check = {"type": "hook", "name": "lint", "callable": "_verify_hooks:broken", "on_error": on_error}
    r = make(rig, {"checks": [check]}, text("x"))
    done = await r.engine.complete(req())
    assert done.target == served
    if on_error == "fail":
        assert "lint failed: RuntimeError: hook bug" in done.record.details["verify"]["failed"]["reason"]


async def test_active_mode_never_releases_a_failed_answer(rig: Callable[..., Rig]) -> None:
    r = make(
        rig,
        {"checks": ["tool_arguments"]},
        call("read_file", "{}"),
        UpstreamStatusError("HTTP 503", upstream_status=503),
    )
    with pytest.raises(UpstreamStatusError):
        await r.engine.complete(req(tools=[TOOL]))
    assert r.records[-1].details["verify"]["capable_error"] == "HTTP 503"


async def test_regex_check_from_config(rig: Callable[..., Rig]) -> None:
    r = make(
        rig,
        {"checks": [{"type": "regex", "name": "no-apology", "pattern": "(?i)i cannot", "expect": "no_match"}]},
        text("I cannot do that"),
    )
    done = await r.engine.complete(req())
    assert done.target == "pricey" and done.record.details["verify"]["failed"]["check"] == "no-apology"


class _Judge:
    """A tiny ASGI verification endpoint: rejects answers that mention 'rm -rf'."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        payload = json.loads(body)
        self.bodies.append(payload)
        texts = [p.get("text", "") for p in payload["response"]["content"]]
        verdict = {"pass": False, "reason": "dangerous"} if any("rm -rf" in t for t in texts) else {"pass": True}
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(verdict).encode()})


@pytest.fixture
def judge() -> Iterator[tuple[_Judge, int]]:
    app = _Judge()
    server = AppThread(app).start()
    try:
        yield app, server.port
    finally:
        server.stop()


async def test_an_http_endpoint_check(rig: Callable[..., Rig], judge: tuple[_Judge, int]) -> None:
    app, port = judge
    check = {"type": "http", "name": "policy", "url": f"http://127.0.0.1:{port}/verify", "timeout_s": 5}
    r = make(rig, {"checks": [check]}, text("run rm -rf / to clean up"))
    done = await r.engine.complete(req())
    assert done.target == "pricey"
    assert done.record.details["verify"]["failed"] == {"check": "policy", "reason": "dangerous"}
    assert app.bodies[0]["request"]["messages"][0]["content"][0]["text"] == "go"


BASE: dict[str, Any] = {
    "llm_clients": {"up": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}},
    "targets": TARGETS,
}


@pytest.mark.parametrize(
    ("verify", "path", "words"),
    [
        ({"checks": [{"type": "regex"}]}, "routes.r.verify.checks[0]", "needs 'pattern'"),
        (
            {"checks": [{"type": "hook", "callable": "nomodule"}]},
            "routes.r.verify.checks[0]",
            "package.module:function",
        ),
        (
            {"checks": [{"type": "tool_arguments", "url": "http://x"}]},
            "routes.r.verify.checks[0]",
            "belongs to type 'http'",
        ),
        ({"mode": "loud"}, "routes.r.verify.mode", ""),
        ({"checks": []}, "routes.r.verify.checks", ""),
    ],
)
def test_bad_verify_blocks_name_their_path(verify: dict[str, Any], path: str, words: str) -> None:
    data = {
        **BASE,
        "routes": {"r": {"type": "stage_router", "capable": "pricey", "efficient": "cheap", "verify": verify}},
    }
    with pytest.raises(ConfigError) as caught:
        load_config(data)
    assert path in str(caught.value) and words in str(caught.value)


def test_a_route_without_tiers_must_name_them() -> None:
    data = {**BASE, "routes": {"r": {"type": "random", "targets": ["cheap", "pricey"], "verify": {}}}}
    with pytest.raises(ConfigError) as caught:
        load_config(data)
    assert "routes.r.verify" in str(caught.value) and "set verify.efficient" in str(caught.value)
    data["routes"]["r"]["verify"] = {"efficient": "cheap", "capable": "cheap"}
    with pytest.raises(ConfigError, match="efficient and capable are both 'cheap'"):
        load_config(data)
    data["routes"]["r"]["verify"] = {"efficient": "cheap", "capable": "nope"}
    with pytest.raises(ConfigError) as caught:
        load_config(data)
    assert "routes.r.verify.capable" in str(caught.value)


def test_a_hook_that_cannot_be_imported_fails_the_build() -> None:
    from switchyard.config import build_engine

    for path in ("_verify_hooks:missing", "_verify_hooks:NOT_CALLABLE", "no_such_module_x:f"):
        data = {**BASE, "routes": routes({"checks": [{"type": "hook", "callable": path}]})}
        with pytest.raises(ConfigError) as caught:
            build_engine(load_config(data), env={})
        assert "routes.gated" in str(caught.value) and "verify.checks[0].callable" in str(caught.value)


async def test_streams_are_buffered_only_when_a_check_can_fail(rig: Callable[..., Rig]) -> None:
    r = make(rig, {"checks": ["tool_arguments", "response_schema"]}, text("plain"))
    events = await r.engine.stream(req(stream=True))  # no tools, no response_format: nothing to check
    async for _ in events:
        pass
    assert r.backend.calls[-1][0] == "stream" and "verify" not in r.records[-1].details
    events = await r.engine.stream(req(stream=True, tools=[TOOL]))
    async for _ in events:
        pass
    assert r.backend.calls[-1][0] == "complete"  # fetched whole, checked, replayed as a stream
    assert r.records[-1].details["verify"]["passed"] is True
    fmt = {"type": "json_object"}
    done = await r.engine.complete(req(response_format=fmt))
    assert done.target == "pricey" and done.record.details["verify"]["failed"]["check"] == "response_schema"
