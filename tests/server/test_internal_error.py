"""A bug in the engine answers 500 in the caller's own API's error envelope."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from switchyard.engine.reply import Reply
from switchyard.server.app import SwitchyardApp


class _Broken:
    """Just enough of a Switchyard for the ASGI app: ``dispatch`` has a bug."""

    async def dispatch(self, method: str, path: str, body: bytes, headers: Any, **_: Any) -> Reply:
        raise KeyError("bug")


async def _post(path: str) -> tuple[int, dict[str, Any]]:
    app = SwitchyardApp(_Broken())  # type: ignore[arg-type]
    started: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)
        else:
            chunks.append(message.get("body", b""))

    scope = {"type": "http", "method": "POST", "path": path, "headers": [(b"content-type", b"application/json")]}
    await app(scope, receive, send)
    return started["status"], orjson.loads(b"".join(chunks))


async def test_anthropic_callers_get_anthropics_envelope(caplog: pytest.LogCaptureFixture) -> None:
    status, body = await _post("/v1/messages")
    assert status == 500
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert body["error"]["message"] == "internal error: KeyError"
    assert "unhandled error serving POST /v1/messages" in caplog.text


async def test_openai_callers_get_openais_envelope() -> None:
    status, body = await _post("/v1/chat/completions")
    assert status == 500
    assert body["error"]["type"] == "api_error"
    assert body["error"]["message"] == "internal error: KeyError"
