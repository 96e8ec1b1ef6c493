"""Shadow mode's mirror (issue 48): the request also sent to the router's choice after the answer,
its answer discarded, its usage and cost recorded and booked; never to a target the request's
restrictions forbid; bounded; and config errors with YAML paths."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _waits import eventually

from switchyard import Switchyard
from switchyard.config.load import ConfigError
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.call import CallOptions, ModelBackend
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.targets import TargetInfo

HELLO = [{"role": "user", "content": "hello"}]
SECRET = "sk-ant-api03-" + "q7Xz" * 10  # what the ``secrets`` detector finds


class Gated:
    """A backend that answers only once ``gate`` is set, noting every request it was sent."""

    def __init__(self, inner: ModelBackend) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.sent: list[ChatRequest] = []

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        self.sent.append(request)
        await self.gate.wait()
        return await self.inner.complete(request, target, options)

    async def open_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a mirror is never streamed")

    async def aclose(self) -> None:
        await self.inner.aclose()


def shadow_route(config: dict[str, Any], **experiment: Any) -> dict[str, Any]:
    spec = {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "experiment": {"mode": "shadow", **experiment},
    }
    return {**config, "routes": {**config["routes"], "exp": spec}}


def gate_efficient(sy: Switchyard) -> Gated:
    target = sy.engine.targets["efficient"]
    gated = Gated(target.backend)
    target.backend = gated
    return gated


async def test_the_mirror_runs_after_the_answer_is_discarded_recorded_and_booked(config: dict[str, Any]) -> None:
    emitted: list[DecisionRecord] = []
    async with Switchyard.from_config(shadow_route(config, mirror_share=1.0)) as sy:
        sy.on_decision(emitted.append)
        gated = gate_efficient(sy)
        done = await sy.complete(model="exp", messages=HELLO, session_id="s1", stream=False)
        # The caller has its answer — the baseline's — while the mirror still waits upstream.
        assert done.record.selected == "capable" and done.response.model == "fake-capable"
        await eventually(lambda: gated.sent, what="the mirror sent")
        assert "mirror" not in done.record.details and emitted == []  # the record waits for it
        assert sy.engine.mirrors.in_flight == 1
        gated.gate.set()
        record = (await eventually(lambda: emitted, what="the record emitted"))[0]
        mirror = record.details["mirror"]
        assert mirror["target"] == "efficient" and mirror["model"] == "fake-efficient"
        assert mirror["output_tokens"] > 0 and mirror["cost_usd"] > 0 and "error" not in mirror
        # Booked: part of what the request spent, which budgets, the ledger and metrics count.
        assert record.experiment_cost_usd == mirror["cost_usd"]
        assert record.total_cost_usd == pytest.approx(record.cost_usd + mirror["cost_usd"])
        usd = sy.ledger.snapshot()["routes"]["exp"]
        assert usd["experiment_usd"] == pytest.approx(mirror["cost_usd"])
        assert usd["total_usd"] == pytest.approx(record.cost_usd + mirror["cost_usd"])
        assert sy.experiments is not None
        view = sy.experiments.view()["exp"]["shadow"]  # GET /v1/stats → experiment
        assert view["basis"] == "mirrors" and view["mirror_cost_usd"] == pytest.approx(mirror["cost_usd"])


async def test_a_stream_is_mirrored_as_one_json_call(config: dict[str, Any]) -> None:
    emitted: list[DecisionRecord] = []
    async with Switchyard.from_config(shadow_route(config, mirror_share=1.0)) as sy:
        sy.on_decision(emitted.append)
        gated = gate_efficient(sy)
        gated.gate.set()
        stream = await sy.complete(model="exp", messages=HELLO, session_id="s1", stream=True)
        async for _ in stream:  # type: ignore[union-attr]
            pass
        record = (await eventually(lambda: emitted, what="the record emitted"))[0]
    assert [r.stream for r in gated.sent] == [False]
    assert record.stream and record.details["mirror"]["cost_usd"] > 0


async def test_sessions_outside_the_share_and_the_baselines_own_choice_are_not_mirrored(
    config: dict[str, Any],
) -> None:
    emitted: list[DecisionRecord] = []
    async with Switchyard.from_config(shadow_route(config, mirror_share=0.5)) as sy:
        sy.on_decision(emitted.append)
        gated = gate_efficient(sy)
        gated.gate.set()
        route = sy.engine.routes["exp"]
        assert route.experiment is not None
        sessions = [f"s{i}" for i in range(10)]
        drawn = {s: route.experiment.mirrored(None, s, "") for s in sessions}
        assert set(drawn.values()) == {True, False}  # both kinds among these ids
        for session in sessions:
            await sy.complete(model="exp", messages=HELLO, session_id=session)
        await eventually(lambda: len(emitted) == len(sessions), what="every record emitted")
    for record in emitted:
        assert ("mirror" in record.details) == drawn[record.session_id]
    assert len(gated.sent) == sum(drawn.values())


async def test_a_target_the_restriction_forbids_is_never_sent_the_mirror(config: dict[str, Any]) -> None:
    config = {**config, "targets": {**config["targets"]}}
    config["targets"]["capable"] = {**config["targets"]["capable"], "labels": ["onprem"]}
    loaded = shadow_route(config, mirror_share=1.0)
    loaded["routes"]["exp"]["restrict"] = [{"detector": "secrets", "require": ["onprem"]}]
    emitted: list[DecisionRecord] = []
    async with Switchyard.from_config(loaded) as sy:
        sy.on_decision(emitted.append)
        gated = gate_efficient(sy)
        gated.gate.set()
        secret = [{"role": "user", "content": f"deploy with {SECRET}"}]
        done = await sy.complete(model="exp", messages=secret, session_id="s1")
        assert done.record.details["would_select"] == "efficient"
        await eventually(lambda: emitted, what="the record emitted")
        assert done.record.details["mirror"] == {"target": "efficient", "skipped": "restricted"}
        await sy.complete(model="exp", messages=HELLO, session_id="s2")  # nothing to restrict: mirrored
        await eventually(lambda: len(emitted) == 2, what="the second record")
    assert len(gated.sent) == 1 and SECRET not in str(gated.sent[0].messages)
    assert emitted[1].experiment_cost_usd > 0 and emitted[0].experiment_cost_usd == 0


async def test_mirrors_beyond_the_concurrency_bound_are_not_sent(config: dict[str, Any]) -> None:
    emitted: list[DecisionRecord] = []
    async with Switchyard.from_config(shadow_route(config, mirror_share=1.0, mirror_concurrency=1)) as sy:
        sy.on_decision(emitted.append)
        gated = gate_efficient(sy)
        await sy.complete(model="exp", messages=HELLO, session_id="s1")
        await eventually(lambda: gated.sent, what="the first mirror sent")
        second = await sy.complete(model="exp", messages=HELLO, session_id="s2")
        # Its mirror would be the second in flight: not sent, and its record goes out at once.
        await eventually(lambda: emitted, what="the busy record emitted")
        assert emitted == [second.record]
        assert second.record.details["mirror"] == {"target": "efficient", "skipped": "busy"}
        gated.gate.set()
        await eventually(lambda: len(emitted) == 2, what="the first record")
    assert len(gated.sent) == 1


async def test_closing_the_router_cancels_a_mirror_and_still_emits_its_record(config: dict[str, Any]) -> None:
    emitted: list[DecisionRecord] = []
    async with Switchyard.from_config(shadow_route(config, mirror_share=1.0)) as sy:
        sy.on_decision(emitted.append)
        gated = gate_efficient(sy)  # never opened
        await sy.complete(model="exp", messages=HELLO, session_id="s1")
        await eventually(lambda: gated.sent, what="the mirror sent")
    assert len(emitted) == 1
    assert emitted[0].details["mirror"]["error"].startswith("cancelled")
    assert emitted[0].experiment_cost_usd == 0


@pytest.mark.parametrize(
    ("experiment", "path", "words"),
    [
        ({"mode": "shadow", "mirror_share": 1.5}, "routes.exp.experiment.mirror_share", "less than or equal to 1"),
        ({"mode": "shadow", "mirror_share": -0.1}, "routes.exp.experiment.mirror_share", "greater than or equal"),
        ({"mirror_share": 0.1}, "routes.exp.experiment.mirror_share", "needs mode: shadow"),
        ({"control_share": 0.1, "mirror_share": 0.1}, "routes.exp.experiment.mirror_share", "needs mode: shadow"),
        ({"mode": "shadow", "mirror_concurrency": 0}, "routes.exp.experiment.mirror_concurrency", "greater than"),
    ],
)
def test_a_bad_mirror_setting_names_its_yaml_path(
    config: dict[str, Any], experiment: dict[str, Any], path: str, words: str
) -> None:
    spec = {"type": "stage_router", "capable": "capable", "efficient": "efficient", "experiment": experiment}
    with pytest.raises(ConfigError) as caught:
        Switchyard.from_config({**config, "routes": {**config["routes"], "exp": spec}})
    assert path in str(caught.value) and words in str(caught.value)
