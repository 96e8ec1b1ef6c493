"""OpenTelemetry spans for every request, following the GenAI semantic conventions.

Layer: ``engine``. Needs ``opentelemetry-api`` (the ``otel`` extra), imported only when a
:class:`SpanSink` is built (``telemetry.otel: true`` in the config). Exporting is the
application's business: spans go to the global tracer provider (set one up in code, or run
``opentelemetry-instrument switchyard serve …`` with an exporter installed) or to the provider
passed in.

Like the metrics, spans are made from the finished
:class:`~switchyard.engine.records.DecisionRecord` rather than by calls sprinkled through the
engine. Per request:

* ``chat <route>`` (kind SERVER): the whole request, with ``gen_ai.operation.name=chat``,
  ``gen_ai.request.model`` (the route the caller named), ``gen_ai.response.model`` (the upstream
  model that answered), ``gen_ai.usage.input_tokens``/``output_tokens``,
  ``gen_ai.conversation.id`` (the session) and ``switchyard.*`` attributes (decision source,
  tier, cost, always-capable baseline). ``error.type`` when it failed.
* ``route <route>`` (INTERNAL): the routing phase (the overhead), with one ``chat <model>``
  CLIENT child per model call the router made (judges, weak-first answers) and an
  ``embeddings <route>`` child for feature extraction (probe, kNN).
* ``chat <model>`` (CLIENT): one per upstream attempt of the answer call, with the target,
  retry number and error class.

Durations are the measured ones. Start times inside the request are laid out from them (calls
in order, backoff waits between attempts), since the record keeps durations, not timestamps; a
trace viewer shows the right lengths and order, while sub-millisecond gaps are approximate.
Spans are emitted when the request ends (for streams: when the stream ends). A caller's W3C
``traceparent`` header makes the request span a child of the caller's span.

Attribute names follow https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ (span
name ``{gen_ai.operation.name} {gen_ai.request.model}``; CLIENT kind for calls to a model).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from switchyard._dataclass import dataclass
from switchyard.engine.records import Attempt, DecisionRecord

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

_PROVIDERS = {"openai_chat": "openai", "openai_responses": "openai", "anthropic_messages": "anthropic"}


@dataclass(frozen=True, slots=True)
class TargetMeta:
    """What a span says about a target."""

    model: str
    provider: str
    address: str | None = None


def provider_name(fmt: str) -> str:
    """``gen_ai.provider.name`` for an upstream wire format (the API family it speaks)."""
    return _PROVIDERS.get(fmt, fmt)


class SpanSink:
    """A decision sink that turns each record into a small span tree.

    Args:
        targets: Per target name, its upstream model, provider and address.
        tracer_provider: Where spans go (default: the global provider).
    """

    def __init__(self, targets: Mapping[str, TargetMeta], tracer_provider: TracerProvider | None = None) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        from switchyard._version import __version__

        # Looked up once here, not per record: the sink runs for every request.
        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()
        self._tracer: Tracer = trace.get_tracer("switchyard", __version__, tracer_provider=tracer_provider)
        self._targets = dict(targets)

    def __call__(self, record: DecisionRecord) -> None:
        SpanKind, Status, StatusCode = self._trace.SpanKind, self._trace.Status, self._trace.StatusCode
        start = _ns(record.ts)
        end = start + _ns_ms(record.duration_ms)
        root = self._tracer.start_span(
            f"chat {record.route}",
            context=self._caller_context(record),
            kind=SpanKind.SERVER,
            start_time=start,
            attributes=_request_attributes(record),
        )
        if record.status >= 400:
            root.set_attribute("error.type", str(record.status))
            root.set_status(Status(StatusCode.ERROR, (record.error or "")[:200]))
        ctx = self._trace.set_span_in_context(root)
        routed = self._routing(record, ctx, start)
        at = max(routed, start + _ns_ms(record.overhead_ms))
        for attempt in record.attempts:
            at = self._attempt(attempt, ctx, at + _ns_ms(attempt.waited_ms), answer=True)
        root.end(end_time=max(end, at))

    def _caller_context(self, record: DecisionRecord) -> Context | None:
        """The caller's trace (its W3C ``traceparent`` header), so the request span joins it."""
        traceparent = record.details.get("traceparent")
        if not isinstance(traceparent, str):
            return None
        return self._propagator.extract({"traceparent": traceparent})

    def _routing(self, record: DecisionRecord, parent: Context, start: int) -> int:
        SpanKind = self._trace.SpanKind
        rc = record.router_cost
        span = self._tracer.start_span(
            f"route {record.route}",
            context=parent,
            kind=SpanKind.INTERNAL,
            start_time=start,
            attributes={
                "switchyard.router": record.router,
                "switchyard.decision.source": record.source,
                "switchyard.router.calls": rc.calls,
                "switchyard.router.cost_usd": rc.cost_usd,
                "switchyard.router.input_tokens": rc.input_tokens,
                "switchyard.router.output_tokens": rc.output_tokens,
            },
        )
        ctx = self._trace.set_span_in_context(span)
        at = start
        feature_ms = record.feature_ms
        if feature_ms is not None:
            child = self._tracer.start_span(
                f"embeddings {record.route}",
                context=ctx,
                kind=SpanKind.CLIENT,
                start_time=at,
                attributes={
                    "gen_ai.operation.name": "embeddings",
                    "switchyard.feature_ms": feature_ms,
                    "switchyard.feature_cost_usd": record.feature_cost_usd,
                },
            )
            at += _ns_ms(feature_ms)
            child.end(end_time=at)
        for attempt in record.router_attempts:
            at = self._attempt(attempt, ctx, at + _ns_ms(attempt.waited_ms), answer=False)
        span.end(end_time=max(at, start + _ns_ms(record.overhead_ms)))
        return at

    def _attempt(self, attempt: Attempt, parent: Context, start: int, *, answer: bool) -> int:
        SpanKind, Status, StatusCode = self._trace.SpanKind, self._trace.Status, self._trace.StatusCode
        meta = self._targets.get(attempt.target)
        model = meta.model if meta else attempt.target
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "switchyard.target": attempt.target,
            "switchyard.attempt.retry": attempt.retry,
            "switchyard.attempt.purpose": "answer" if answer else "router",
        }
        if meta is not None:
            attributes["gen_ai.provider.name"] = meta.provider
            if meta.address:
                attributes["server.address"] = meta.address
        if attempt.status is not None:
            attributes["http.response.status_code"] = attempt.status
        span: Span = self._tracer.start_span(
            f"chat {model}", context=parent, kind=SpanKind.CLIENT, start_time=start, attributes=attributes
        )
        if not attempt.ok:
            span.set_attribute("error.type", attempt.error_class or "error")
            span.set_status(Status(StatusCode.ERROR, (attempt.error or "")[:200]))
        end = start + _ns_ms(attempt.elapsed_ms)
        span.end(end_time=end)
        return end


def _request_attributes(record: DecisionRecord) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": record.route,
        "gen_ai.usage.input_tokens": record.input_tokens,
        "gen_ai.usage.output_tokens": record.output_tokens,
        "switchyard.route": record.route,
        "switchyard.router": record.router,
        "switchyard.decision.source": record.source,
        "switchyard.request_id": record.request_id,
        "switchyard.overhead_ms": record.overhead_ms,
        "switchyard.cost_usd": record.total_cost_usd,
        "switchyard.fallbacks": record.fallbacks_tried,
        "switchyard.stream": record.stream,
        "http.response.status_code": record.status,
    }
    optional = {
        "gen_ai.response.model": record.selected_model,
        "gen_ai.conversation.id": record.session_id,
        "switchyard.selected": record.selected,
        "switchyard.tier": record.tier,
        "switchyard.always_capable_usd": record.baseline_cost_usd,
        "switchyard.inbound_format": record.inbound_format,
    }
    attributes.update({k: v for k, v in optional.items() if v is not None})
    return attributes


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _ns_ms(ms: float) -> int:
    return int(max(0.0, ms) * 1_000_000)
