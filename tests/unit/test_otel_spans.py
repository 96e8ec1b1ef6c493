"""OpenTelemetry spans per request (GenAI semantic conventions), caught by the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from _configs import skeleton_config
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from switchyard.api import Switchyard
from switchyard.config.load import ConfigError
from switchyard.engine.telemetry import SpanSink
from switchyard.testing import FakeModel, FakeUpstream, serve_fake
from switchyard.testing.judges import escalation_brain


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def with_spans(config: dict[str, Any], exporter: InMemorySpanExporter) -> Switchyard:
    """A router whose span sink writes to ``exporter`` (instead of the global provider)."""
    config["telemetry"] = {"otel": True}
    sy = Switchyard.from_config(config)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert isinstance(sy._spans, SpanSink)
    sy._spans = SpanSink(sy._spans._targets, tracer_provider=provider)
    return sy


def ask(sy: Switchyard, route: str, session: str = "s-1", **headers: str) -> int:
    body = orjson.dumps({"model": route, "messages": [{"role": "user", "content": "Fix the bug."}]})
    reply = sy.run_sync(
        sy.dispatch("POST", "/v1/chat/completions", body, {"x-switchyard-session-id": session, **headers})
    )
    return reply.status


def tree(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, list[ReadableSpan]]:
    spans = list(exporter.get_finished_spans())
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1
    return roots[0], spans


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_one_request_span_with_an_attempt_per_upstream_call(upstream: Any, exporter: InMemorySpanExporter) -> None:
    sy = with_spans(skeleton_config(upstream.port), exporter)
    assert ask(sy, "resilient") == 200  # first candidate answers 500, the capable one serves
    sy.close()
    root, spans = tree(exporter)
    assert root.name == "chat resilient" and root.kind == SpanKind.SERVER
    attrs = dict(root.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "resilient"
    assert attrs["gen_ai.response.model"] == "fake-capable"
    assert attrs["gen_ai.conversation.id"] == "s-1"
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    kids = children(spans, root)
    assert kids[0].name == "route resilient"
    attempts = [s for s in kids if s.kind == SpanKind.CLIENT]
    assert [s.name for s in attempts][-1] == "chat fake-capable"
    failed = [s for s in attempts if s.status.status_code == StatusCode.ERROR]
    assert failed and all(s.name == "chat fail-500" for s in failed)
    assert dict(failed[0].attributes or {})["error.type"] == "server_error"
    assert dict(attempts[-1].attributes or {})["gen_ai.provider.name"] == "openai"
    assert dict(attempts[-1].attributes or {})["server.address"] == "127.0.0.1"
    # Children sit inside the request, in order.
    assert root.start_time is not None and root.end_time is not None
    for span in spans:
        assert span.start_time is not None and span.end_time is not None
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
    assert attempts[0].start_time <= attempts[-1].start_time  # type: ignore[operator]


def test_router_judge_calls_are_children_of_the_routing_span(exporter: InMemorySpanExporter) -> None:
    fake = serve_fake(FakeUpstream([FakeModel("fake-judge", brain=escalation_brain(lambda view: False))]))
    config = skeleton_config(fake.port)
    config["targets"]["judge"] = {"client": "local", "model": "fake-judge", "price": {"input_per_mtok": 1}}
    config["routes"]["watched"] = {
        "type": "llm_classifier",
        "mode": "escalation",
        "classifier_target": "judge",
        "strong_target": "capable",
        "weak_target": "efficient",
    }
    sy = with_spans(config, exporter)
    try:
        assert ask(sy, "watched") == 200
    finally:
        sy.close()
        fake.stop()
    root, spans = tree(exporter)
    routing = next(s for s in children(spans, root) if s.name == "route watched")
    calls = [s.name for s in children(spans, routing)]
    # Escalation mode: the efficient model answers first, then the judge reviews the answer.
    assert calls == ["chat fake-efficient", "chat fake-judge"]
    assert dict(routing.attributes or {})["switchyard.router.cost_usd"] > 0
    assert dict(root.attributes or {})["switchyard.tier"] == "efficient"


def test_spans_need_the_extra_only_when_asked(upstream: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    config = skeleton_config(upstream.port)
    Switchyard.from_config(config).close()  # off by default: nothing imported
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    config["telemetry"] = {"otel": True}
    with pytest.raises(ConfigError, match=r"telemetry\.otel.*switchyard-router\[otel\]"):
        Switchyard.from_config(config)


def test_the_request_span_joins_the_callers_trace(upstream: Any, exporter: InMemorySpanExporter) -> None:
    sy = with_spans(skeleton_config(upstream.port), exporter)
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    assert ask(sy, "fast", traceparent=f"00-{trace_id}-{parent_id}-01") == 200
    sy.close()
    spans = list(exporter.get_finished_spans())
    root = next(s for s in spans if s.name == "chat fast")
    assert root.parent is not None and format(root.parent.span_id, "016x") == parent_id
    assert all(format(s.context.trace_id, "032x") == trace_id for s in spans if s.context is not None)
