"""The nemotron-3.5-lightning preset against a real fake upstream on 127.0.0.1."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import openai
import pytest

import switchyard
from switchyard.api import Switchyard
from switchyard.cli import main
from switchyard.config.build import target_infos
from switchyard.testing import FakeModel, FakeUpstream, serve_fake

pytestmark = pytest.mark.integration

MODEL = "nemotron-3.5-lightning"


@pytest.fixture(scope="module")
def lightning() -> Iterator[Any]:
    """A fake vLLM serving the preset's model id with a 65,536-token window and old-style reasoning."""
    app = FakeUpstream(
        [FakeModel(MODEL, context_window=65536, reasoning="plan the edit", reasoning_field="reasoning_content")]
    )
    server = serve_fake(app)
    try:
        yield server
    finally:
        server.stop()


def _config(port: int, **target: Any) -> dict[str, Any]:
    return {
        "llm_clients": {"lightning": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"}},
        "targets": {
            "lightning": {"client": "lightning", "preset": "nemotron-3.5-lightning", "price": {}, **target},
        },
        "routes": {"execute": {"type": "passthrough", "target": "lightning"}},
    }


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_start_up_reads_max_model_len(lightning: Any) -> None:
    lightning.app.gets.clear()
    sy = Switchyard.from_config(_config(lightning.port))
    try:
        assert lightning.app.gets == ["/v1/models"]
        assert target_infos(sy.loaded)["lightning"].context_window == 65536
        # The proxy's own model list advertises the served window for the route.
        reply = await sy.dispatch("GET", "/v1/models", b"", {})
        (entry,) = __import__("json").loads(reply.body)["data"]
        assert entry["id"] == "execute" and entry["max_model_len"] == 65536
    finally:
        await sy.aclose()
        sy.close()


def test_closed_port_is_a_warning_not_a_crash(caplog: pytest.LogCaptureFixture) -> None:
    port = _closed_port()
    with caplog.at_level(logging.WARNING, logger="switchyard.config"):
        sy = Switchyard.from_config(_config(port))
    try:
        assert target_infos(sy.loaded)["lightning"].context_window is None
        assert "targets.lightning: could not read the served context window" in caplog.text
        assert f"127.0.0.1:{port}/v1/models" in caplog.text
    finally:
        sy.close()


def test_probe_can_be_skipped_and_config_wins(lightning: Any) -> None:
    lightning.app.gets.clear()
    off = Switchyard.from_config(_config(lightning.port, probe_context_window=False))
    pinned = Switchyard.from_config(_config(lightning.port, context_window=32768))
    try:
        assert lightning.app.gets == []
        assert target_infos(off.loaded)["lightning"].context_window is None
        assert target_infos(pinned.loaded)["lightning"].context_window == 32768
    finally:
        off.close()
        pinned.close()


def test_unserved_model_is_a_warning_naming_the_served_ones(lightning: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="switchyard.config"):
        sy = Switchyard.from_config(_config(lightning.port, model="nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"))
    try:
        assert target_infos(sy.loaded)["lightning"].context_window is None
        assert f"(served: {MODEL})" in caplog.text
    finally:
        sy.close()


def test_validate_never_probes(lightning: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(_config(lightning.port)), encoding="utf-8")
    lightning.app.gets.clear()
    assert main(["validate", str(path)]) == 0
    assert lightning.app.gets == []
    capsys.readouterr()


def test_request_extras_and_reasoning_field(lightning: Any) -> None:
    """Thinking off reaches vLLM; an upstream's `reasoning_content` comes back as `reasoning`."""
    client = switchyard.OpenAI(config=_config(lightning.port))
    try:
        done = client.chat.completions.create(model="execute", messages=[{"role": "user", "content": "run tests"}])
        message = done.choices[0].message.model_dump()
        assert message["reasoning"] == "plan the edit"
        assert "reasoning_content" not in message
        sent = lightning.app.bodies(MODEL)[-1]
        assert sent["chat_template_kwargs"] == {"enable_thinking": False}

        chunks = list(
            client.chat.completions.create(
                model="execute", messages=[{"role": "user", "content": "run tests"}], stream=True
            )
        )
        deltas = [c.choices[0].delta.model_dump() for c in chunks if c.choices]
        assert "".join(d.get("reasoning") or "" for d in deltas) == "plan the edit"
        assert not any(d.get("reasoning_content") for d in deltas)
    finally:
        client.switchyard.close()


def test_reasoning_on_reaches_the_upstream(lightning: Any) -> None:
    config = _config(lightning.port)
    config["targets"]["lightning"]["preset"] = {"name": "nemotron-3.5-lightning", "reasoning": "on"}
    client = switchyard.OpenAI(config=config)
    try:
        client.chat.completions.create(model="execute", messages=[{"role": "user", "content": "think"}])
        assert lightning.app.bodies(MODEL)[-1]["chat_template_kwargs"] == {"enable_thinking": True}
        # A caller's own chat_template_kwargs win over the preset's (request keys win).
        client.chat.completions.create(
            model="execute",
            messages=[{"role": "user", "content": "think"}],
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
        assert lightning.app.bodies(MODEL)[-1]["chat_template_kwargs"] == {"enable_thinking": False}
    finally:
        client.switchyard.close()


_ = openai  # the real SDK is what switchyard.OpenAI returns
