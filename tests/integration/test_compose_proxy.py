"""Composed policies through the proxy, over a real fake upstream on 127.0.0.1:

* a cascade stage router → prefill probe → LLM classifier → default, with the deciding stage
  in the record and the ``x-switchyard-decision-source`` header;
* the advisor gate streaming to the real openai SDK, advisor tokens booked as router cost;
* requests recorded from real Claude Code and Codex sessions that delegate to a sub-agent
  (``tests/fixtures/subagents``): the sub-agent's calls take the ``subagents`` policy, the
  parent's do not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

np = pytest.importorskip("numpy")

from switchyard.api import Switchyard  # noqa: E402
from switchyard.config import build as config_build  # noqa: E402
from switchyard.engine.records import DecisionRecord  # noqa: E402
from switchyard.protocol.features import FeatureRecipe  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from switchyard.routers.learned.checkpoint import Checkpoint, Member  # noqa: E402
from switchyard.server.runner import ServerThread  # noqa: E402
from switchyard.testing import FakeModel, FakeUpstream, Turn, serve_fake  # noqa: E402
from switchyard.testing.judges import capability_brain  # noqa: E402

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "subagents"
RECIPE = FeatureRecipe(source="fake", model="toy", layers=(0,), pooling=("mean",), hidden_size=2)


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


# Probe features per task: P(efficient), P(capable) as logits of an identity probe.
PROBE_TABLE = {
    "easy chore": [_logit(0.95), _logit(0.95)],  # score 0.5: far below threshold 0.7 -> efficient
    "borderline puzzle": [_logit(0.5), _logit(0.85)],  # score 0.675: inside band 0.05 -> abstain
    "murky riddle": [_logit(0.5), _logit(0.85)],  # same, and the judge gives no usable verdict
}


class TableExtractor:
    recipe = RECIPE

    async def extract(self, texts: list[str]) -> Any:
        return np.array([PROBE_TABLE.get(t, [0.0, 0.0]) for t in texts], dtype=np.float32)

    async def aclose(self) -> None:
        return None


def judge_brain() -> Any:
    forecast = capability_brain(lambda view: 0.9)

    def brain(body: dict[str, Any], model: FakeModel) -> Turn:
        if "murky" in json.dumps(body["messages"]):
            return Turn(text="I cannot say.")
        return forecast(body, model)

    return brain


def advisor_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    shown = body["messages"][-1]["content"]
    return Turn(text="APPROVE" if "verified" in shown else "REDO: run the tests and say so.")


def executor_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    last = body["messages"][-1]
    if last["role"] == "user" and "run the tests" in str(last["content"]):
        return Turn(text="Ran the tests: all 12 pass.")
    return Turn(text="Done. I verified it." if "verify" in str(body["messages"]) else "Done.")


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    app = FakeUpstream(
        [
            FakeModel("fake-small", brain=executor_brain),
            FakeModel("fake-big"),
            FakeModel("fake-judge", brain=judge_brain()),
            FakeModel("fake-advisor", brain=advisor_brain),
        ]
    )
    server = serve_fake(app)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def proxy(fake: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    eye = np.eye(2, dtype=np.float32)
    probe = Checkpoint(
        kind="prefill_probe",
        output_names=["efficient", "capable"],
        recipe=RECIPE,
        transform=ckpt.Transform(np.zeros(2, np.float32), np.ones(2, np.float32), np.zeros(2, np.float32), eye),
        members=[Member(hidden=[], output=(eye, np.zeros(2, np.float32)))],
    )
    probe_dir = tmp_path_factory.mktemp("probe") / "probe"
    ckpt.save(probe, probe_dir)
    config = {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{fake.port}/v1"}},
        "targets": {
            "efficient": {"client": "local", "model": "fake-small", "price": {"input_per_mtok": 0.1}},
            "capable": {"client": "local", "model": "fake-big", "price": {"input_per_mtok": 15}},
            "judge": {"client": "local", "model": "fake-judge", "price": {"input_per_mtok": 1}},
            "advisor": {
                "client": "local",
                "model": "fake-advisor",
                "price": {"input_per_mtok": 15, "output_per_mtok": 75},
            },
        },
        "routes": {
            "agent": {
                "type": "cascade",
                "stages": [
                    {"type": "stage_router", "capable": "capable", "efficient": "efficient"},
                    {
                        "type": "prefill_probe",
                        "targets": ["efficient", "capable"],
                        "checkpoint": str(probe_dir),
                        "features": {"backend": "embeddings", "base_url": "http://127.0.0.1:9/v1", "model": "toy"},
                        "costs": {"efficient": 1, "capable": 20},
                        "threshold": 0.7,
                        "abstain_band": 0.05,
                    },
                    {
                        "type": "llm_classifier",
                        "classifier_target": "judge",
                        "strong_target": "capable",
                        "weak_target": "efficient",
                        "base_threshold": 0.5,
                    },
                ],
                "default": "capable",
            },
            "reviewed": {
                "type": "advisor",
                "executor_target": "efficient",
                "advisor_target": "advisor",
                "max_reviews": 2,
            },
            "coding": {
                "type": "passthrough",
                "target": "capable",
                "subagents": {
                    "type": "cascade",
                    "stages": [{"type": "stage_router", "capable": "capable", "efficient": "efficient"}],
                    "default": "efficient",
                },
            },
        },
    }
    mp = pytest.MonkeyPatch()
    mp.setattr(config_build, "_feature_factory", lambda cfg, d: TableExtractor())
    sy = Switchyard.from_config(config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as server:
            yield server, records
    finally:
        sy.close()
        mp.undo()


def _client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)


def _ask(
    server: ServerThread, messages: list[dict[str, Any]], model: str = "agent", headers: dict[str, str] | None = None
) -> tuple[Any, str]:
    raw = _client(server).chat.completions.with_raw_response.create(
        model=model,
        messages=messages,  # type: ignore[arg-type]
        extra_headers=headers,
    )
    return raw.parse(), raw.headers["x-switchyard-decision-source"]


def test_cascade_names_the_deciding_stage(proxy: tuple[ServerThread, list[DecisionRecord]]) -> None:
    server, records = proxy
    compacted = [
        {"role": "user", "content": "This session is being continued from a previous conversation."},
    ]
    cases = [
        (compacted, "cascade:1/stage_router", "capable"),
        ([{"role": "user", "content": "easy chore"}], "cascade:2/prefill_probe", "efficient"),
        ([{"role": "user", "content": "borderline puzzle"}], "cascade:3/llm_classifier", "efficient"),
        ([{"role": "user", "content": "murky riddle"}], "cascade:default", "capable"),
    ]
    for messages, source, target in cases:
        records.clear()
        reply, header = _ask(server, messages)
        assert header == source, messages
        record = records[-1]
        assert record.source == source and record.selected == target
        # The reply names the requested route (reply_model: requested); the record, the served model.
        assert reply.model == "agent"
        assert record.selected_model == ("fake-small" if target == "efficient" else "fake-big")
    trail = records[-1].details["cascade"]
    assert [s["abstained"] for s in trail] == [True, True, True]
    assert records[-1].router_cost.calls == 1  # the judge call of the abstaining classifier is paid


def test_advisor_streams_and_books_advisor_cost(proxy: tuple[ServerThread, list[DecisionRecord]], fake: Any) -> None:
    server, records = proxy
    records.clear()
    fake.app.reset()
    headers = {"x-switchyard-session-id": "adv-1"}
    client = _client(server)
    stream = client.chat.completions.create(
        model="reviewed", messages=[{"role": "user", "content": "fix it"}], stream=True, extra_headers=headers
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Ran the tests: all 12 pass."  # REDO: the executor answered again with the plan
    record = records[-1]
    assert record.source == "advisor:redo" and record.selected == "efficient"
    assert record.router_cost.calls == 2  # the discarded executor turn and the advisor
    assert record.router_cost.cost_usd > 0
    advisor_asks = fake.app.bodies("fake-advisor")
    assert len(advisor_asks) == 1 and "Done." in advisor_asks[0]["messages"][-1]["content"]
    redo_body = fake.app.bodies("fake-small")[-1]
    assert "run the tests and say so" in redo_body["messages"][-1]["content"]
    # second turn: approved, replayed unchanged; the third is past the budget of 2
    reply, source = _ask(server, [{"role": "user", "content": "please verify"}], "reviewed", headers)
    assert source == "advisor:approve" and reply.choices[0].message.content == "Done. I verified it."
    raw = client.chat.completions.with_raw_response.create(
        model="reviewed", messages=[{"role": "user", "content": "again"}], extra_headers=headers
    )
    assert raw.headers["x-switchyard-decision-source"] == "advisor:unreviewed"


def _recorded(agent: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / f"{agent}.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize(("agent", "path"), [("claude", "/v1/messages"), ("codex", "/v1/responses")])
def test_recorded_subagent_traffic_takes_the_subagent_policy(
    proxy: tuple[ServerThread, list[DecisionRecord]], agent: str, path: str
) -> None:
    server, records = proxy
    outcomes = []
    for entry in _recorded(agent):
        body = {**entry["body"], "model": "coding", "stream": False}
        headers = {k: v for k, v in entry["headers"].items() if k not in ("content-length", "host", "accept-encoding")}
        records.clear()
        reply = httpx.post(f"http://127.0.0.1:{server.port}{path}", json=body, headers=headers, timeout=30)
        assert reply.status_code == 200, reply.text[:500]
        record = records[-1]
        delegated = entry["scripted"] == "text" and (
            "x-claude-code-agent-id" in entry["headers"] or "x-openai-subagent" in entry["headers"]
        )
        outcomes.append((delegated, record.source, record.selected))
        if delegated:
            assert record.source.startswith("subagents/cascade:"), record.source
            assert record.details["subagent"]["detected_by"] in ("x-claude-code-agent-id", "x-openai-subagent")
            assert record.session_id and record.agent_id
        else:
            assert record.source == "passthrough" and record.selected == "capable"
    assert any(d for d, _, _ in outcomes) and any(not d for d, _, _ in outcomes)
