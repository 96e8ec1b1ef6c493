"""decision_model routes end to end: the real openai SDK → ``switchyard serve`` (a subprocess) →
a fake decision model (System One API, and an RLCD model on the Chat API) on 127.0.0.1 → the
target the decision model chose, whose answer comes back to the SDK."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from _waits import serving, stop, wait_until

from switchyard.testing import FakeModel, FakeUpstream, serve_fake
from switchyard.testing.fake_decision import rlcd_brain

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    server = serve_fake(FakeUpstream([FakeModel("decider-rlcd", brain=rlcd_brain)]))
    try:
        yield server
    finally:
        server.stop()


def _config(port: int) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}/v1"
    labels = {
        "easy": {"target": "efficient", "description": "typo fixes, docstrings, renames"},
        "hard": {"target": "capable", "description": "debugging, race conditions, design"},
    }
    return {
        "llm_clients": {
            "local": {"format": "openai_chat", "base_url": base},
            "typesafe": {"format": "system_one", "base_url": base, "api_key_env": "FAKE_TYPESAFE_KEY"},
        },
        "targets": {
            "efficient": {"client": "local", "model": "fake-efficient"},
            "capable": {"client": "local", "model": "fake-capable"},
            "jev": {"client": "typesafe", "model": "jev-latest", "price": {"input_per_mtok": 0.042}},
            "rlcd": {"client": "local", "model": "decider-rlcd"},
            "broken": {"client": "typesafe", "model": "fail-500"},
        },
        "routes": {
            "typed": {
                "type": "decision_model",
                "decision_target": "jev",
                "labels": labels,
                "default_target": "efficient",
            },
            "rlcd": {
                "type": "decision_model",
                "decision_target": "rlcd",
                "labels": labels,
                "default_target": "efficient",
                "min_probability": 0.6,
                "response_format_type": "json_schema",
            },
            "outage": {
                "type": "decision_model",
                "decision_target": "broken",
                "labels": labels,
                "default_target": "efficient",
            },
        },
    }


@pytest.fixture(scope="module")
def proxy(fake: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    work = tmp_path_factory.mktemp("decision")
    config, log, out = work / "router.yaml", work / "decisions.jsonl", work / "serve.log"
    config.write_text(yaml.safe_dump(_config(fake.port)))
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_TYPESAFE_KEY": "fake-key"}
    cmd = [
        sys.executable,
        "-m",
        "switchyard",
        "serve",
        "-c",
        str(config),
        "--port",
        str(port),
        "--decision-log",
        str(log),
    ]
    with out.open("w") as sink:
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        serving(f"http://127.0.0.1:{port}/health", proc, 30, "switchyard serve", log=out)
        yield f"http://127.0.0.1:{port}/v1", log
    finally:
        stop(proc)


@pytest.fixture
def client(proxy: tuple[str, Path]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=proxy[0], api_key="test", max_retries=0) as c:
        yield c


def _ask(client: openai.OpenAI, route: str, text: str) -> tuple[tuple[str, str, str], str]:
    """``(decision source, selected target, answer)`` and the request id."""
    raw = client.chat.completions.with_raw_response.create(model=route, messages=[{"role": "user", "content": text}])
    answer = raw.parse().choices[0].message.content or ""
    headers = raw.headers
    return (headers["x-switchyard-decision-source"], headers["x-switchyard-selected-model"], answer), headers[
        "x-switchyard-request-id"
    ]


def _record(log: Path, request_id: str) -> dict[str, Any]:
    """The decision record of one request (the log is written after the reply)."""
    found: list[dict[str, Any]] = []

    def written() -> bool:
        lines = log.read_text().splitlines() if log.exists() else []
        found[:] = [r for r in map(json.loads, lines) if r.get("request_id") == request_id]
        return bool(found)

    wait_until(written, 10, f"the decision record of request {request_id}")
    return found[0]


def test_system_one_choice_routes_to_the_chosen_target(
    client: openai.OpenAI, proxy: tuple[str, Path], fake: Any
) -> None:
    text = "debug the race conditions in the scheduler [route:hard@0.8]"
    seen, request_id = _ask(client, "typed", text)
    assert seen == ("decision-model", "capable", f"[fake-capable] {text}")
    asked = [b for b in fake.app.bodies(path="/systemone") if text in b["state"]]
    assert len(asked) == 1 and asked[0]["questions"]["route"]["criteria"]["hard"].startswith("debugging")
    record = _record(proxy[1], request_id)
    details = record["details"]
    assert details["probabilities"] == {"efficient": pytest.approx(0.2), "capable": pytest.approx(0.8)}
    assert details["decision_model"]["protocol"] == "system_one"
    assert details["decision_model"]["model"] == "jev-1.13.0"
    assert record["router_cost"]["calls"] == 1 and record["router_cost"]["input_tokens"] > 0

    easy = "fix the typo in the README [route:easy]"
    assert _ask(client, "typed", easy)[0] == ("decision-model", "efficient", f"[fake-efficient] {easy}")


def test_rlcd_model_routes_and_low_confidence_falls_open(client: openai.OpenAI, proxy: tuple[str, Path]) -> None:
    sure = "please debug this deadlock [route:hard@0.9]"
    assert _ask(client, "rlcd", sure)[0] == ("decision-model", "capable", f"[fake-capable] {sure}")
    unsure = "something in between [route:hard@0.55]"
    seen, request_id = _ask(client, "rlcd", unsure)
    assert seen == ("fail_open", "efficient", f"[fake-efficient] {unsure}")
    details = _record(proxy[1], request_id)["details"]
    assert details["judge_failure"] == "below_cutoff"
    assert details["probabilities"]["capable"] == pytest.approx(0.55)


def test_decision_model_outage_fails_open_to_the_default(client: openai.OpenAI, proxy: tuple[str, Path]) -> None:
    text = "debug the race condition [route:hard] during an outage"
    seen, request_id = _ask(client, "outage", text)
    assert seen == ("fail_open", "efficient", f"[fake-efficient] {text}")
    assert _record(proxy[1], request_id)["details"]["judge_failure"] == "upstream_5xx"


def test_streamed_answer_comes_from_the_chosen_target(client: openai.OpenAI) -> None:
    text = "stream me the fix for this race condition [route:hard]"
    with client.chat.completions.with_streaming_response.create(
        model="typed", messages=[{"role": "user", "content": text}], stream=True
    ) as raw:
        source, selected = raw.headers["x-switchyard-decision-source"], raw.headers["x-switchyard-selected-model"]
        streamed = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert (source, selected, streamed) == ("decision-model", "capable", f"[fake-capable] {text}")
