"""The dashboard over a decision log (``switchyard dashboard --log decisions.jsonl``).

Layer: ``server``.

The log's records are read back into :class:`~switchyard.engine.records.DecisionRecord` objects
and fed to the same ring, views and page as a live proxy; "since start" means the whole log,
"now" is the time of its last record, and the default window spans the log. Prompt previews
are not in decision logs (they stay in the live process's memory), so the timeline shows none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from switchyard.engine.accounting import UsdLedger, record_from_log
from switchyard.engine.feedback import FEEDBACK_LINE
from switchyard.engine.records import Attempt, DecisionRecord
from switchyard.server.auth import KeyRing
from switchyard.server.dashboard.aggregate import BUCKET_S, Reliability, clamp_ms
from switchyard.server.dashboard.experiment import Outcomes
from switchyard.server.dashboard.http import DashboardHttp, is_dashboard_path
from switchyard.server.dashboard.ring import RecordRing
from switchyard.server.dashboard.views import Replica, Views
from switchyard.server.guard import is_loopback_host
from switchyard.wire.json import dumps


def _get(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = obj.get(name, default)
    if value is None or (isinstance(value, bool) and kind is not bool):
        return default
    return value if isinstance(value, kind) else default


def _ms(obj: Mapping[str, Any], name: str) -> float:
    """A duration field, within the range the views count (``aggregate.MAX_MS``)."""
    return clamp_ms(float(_get(obj, name, (int, float), 0.0)))


def record_from_json(obj: Mapping[str, Any]) -> DecisionRecord:
    """A full record from one decision-log line (fields missing or mistyped keep their defaults,
    durations are clamped to what the views count; the accounting fields are checked by
    :func:`~switchyard.engine.accounting.record_from_log`).

    Raises:
        ValueError: An accounting field has the wrong type, or ``route`` is missing.
    """
    record = record_from_log(obj)
    number = (int, float)
    record.ts = float(_get(obj, "ts", number, record.ts))
    record.agent_id = _get(obj, "agent_id", str, None)
    record.session_source = _get(obj, "session_source", str, None)
    record.turn_index = int(_get(obj, "turn_index", int, 0))
    record.reason = _get(obj, "reason", str, "")
    record.score = _get(obj, "score", number, None)
    record.confidence = _get(obj, "confidence", number, None)
    record.selected_model = _get(obj, "selected_model", str, None)
    record.inbound_format = _get(obj, "inbound_format", str, None)
    record.stream = bool(_get(obj, "stream", bool, False))
    record.path = _get(obj, "path", str, None)
    record.error = _get(obj, "error", str, None)
    record.fallbacks_tried = int(_get(obj, "fallbacks_tried", int, 0))
    record.overhead_ms = _ms(obj, "overhead_ms")
    record.duration_ms = _ms(obj, "duration_ms")
    record.reasoning_tokens = int(_get(obj, "reasoning_tokens", int, 0))
    record.candidates = [c for c in _get(obj, "candidates", list, []) if isinstance(c, str)]
    router_cost = _get(obj, "router_cost", dict, {})
    record.router_cost.failures = int(_get(router_cost, "failures", int, 0))
    record.router_cost.input_tokens = int(_get(router_cost, "input_tokens", int, 0))
    record.router_cost.output_tokens = int(_get(router_cost, "output_tokens", int, 0))
    record.router_cost.elapsed_ms = _ms(router_cost, "elapsed_ms")
    record.attempts = _attempts(_get(obj, "attempts", list, []))
    record.router_attempts = _attempts(_get(obj, "router_attempts", list, []))
    return record


def _attempts(items: list[Any]) -> list[Attempt]:
    return [
        Attempt(
            target=item["target"],
            ok=bool(_get(item, "ok", bool, False)),
            elapsed_ms=_ms(item, "elapsed_ms"),
            error=_get(item, "error", str, None),
            status=_get(item, "status", int, None),
            error_class=_get(item, "error_class", str, None),
            retry=int(_get(item, "retry", int, 0)),
            waited_ms=_ms(item, "waited_ms"),
        )
        for item in items
        if isinstance(item, dict) and isinstance(item.get("target"), str)
    ]


def read_log(
    path: str | Path, *, reprice: Callable[[DecisionRecord], None] | None = None
) -> tuple[list[DecisionRecord], list[str]]:
    """The records of a decision log, oldest first, and a warning per unreadable line.

    Args:
        path: The JSONL file.
        reprice: Recomputes tier and always-capable baseline (``Pricing`` from a config).

    Raises:
        OSError: The file cannot be read.
    """
    warnings: list[str] = []
    records = list(logged_records(path, record_from_json, skipped=warnings.append, reprice=reprice))
    records.sort(key=lambda r: r.ts)
    return records, warnings


def logged_records(
    path: str | Path,
    parse: Callable[[Mapping[str, Any]], DecisionRecord],
    *,
    skipped: Callable[[str], None],
    reprice: Callable[[DecisionRecord], None] | None = None,
) -> Iterator[DecisionRecord]:
    """Streams the records of a decision log in file order, passing over lines it cannot read.

    The one tolerant reader of decision logs (the offline dashboard, ``switchyard stats``): a
    log a crashed proxy left may end in half a line, which is told, not fatal.

    Args:
        path: The JSONL file (opened on the first ``next``).
        parse: One line's object → record (:func:`record_from_json`, or
            :func:`~switchyard.engine.accounting.record_from_log` for the accounting fields).
        skipped: Told ``path:line: skipped (why)`` for each line passed over.
        reprice: Recomputes tier and always-capable baseline (``Pricing`` from a config).

    Raises:
        OSError: The file cannot be read.
    """
    with Path(path).open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                if obj.get("object") == FEEDBACK_LINE:
                    continue  # an outcome report, not a decision (engine/feedback.py)
                record = parse(obj)
            except (orjson.JSONDecodeError, ValueError) as exc:
                skipped(f"{path}:{number}: skipped ({exc})")
                continue
            if reprice is not None:
                record.tier, record.baseline_cost_usd = None, None
                reprice(record)
            yield record


class LogTotals:
    """ "Since start" of a decision log: its ledger and reliability counts over every record."""

    def __init__(self, records: list[DecisionRecord]) -> None:
        self.ledger = UsdLedger()
        counted = Reliability()
        mid_stream = 0
        for record in records:
            self.ledger(record)
            counted.add(record)
            mid_stream += bool(record.details.get("mid_stream_failure"))
        figures = counted.to_dict()
        self.counters = {name: figures[name] for name in ("attempts", "retries", "fallbacks", "failed_requests")}
        self.counters["mid_stream_failures"] = mid_stream

    def usd(self) -> dict[str, Any]:
        """The log's USD totals (as ``switchyard stats LOG`` computes them)."""
        snapshot = self.ledger.snapshot(sessions=0)
        snapshot.pop("sessions", None)
        return snapshot

    def reliability(self) -> dict[str, Any]:
        """Counters recomputed from the records."""
        return {"counters": dict(self.counters)}

    def state(self) -> dict[str, Any]:
        """No state backend offline."""
        return {"backend": "none (decision log)", "degraded": False}


def read_feedback(path: str | Path) -> Outcomes:
    """The feedback lines of a decision log (``POST /v1/feedback``'s reports), for the
    routed-vs-control panel; unreadable lines are passed over (:func:`read_log` tells them).

    Raises:
        OSError: The file cannot be read.
    """
    found: list[dict[str, Any]] = []
    with Path(path).open("rb") as fh:
        for raw in fh:
            if FEEDBACK_LINE.encode() not in raw:
                continue  # a decision record: not parsed twice
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and obj.get("object") == FEEDBACK_LINE:
                found.append(obj)
    outcomes = Outcomes(max(1, len(found)))
    for line in found:
        outcomes(line)
    return outcomes


def offline_views(
    records: list[DecisionRecord], source: str, *, window_s: float | None = None, outcomes: Outcomes | None = None
) -> Views:
    """Views over ``records`` (oldest first): "now" is the last record's time; ``outcomes``:
    the log's feedback reports (:func:`read_feedback`), joined to the records' sessions."""
    ring = RecordRing(max(1, len(records)))
    for record in records:
        ring(record)
    first = records[0].ts if records else 0.0
    last = records[-1].ts if records else 0.0
    span = window_s or max(BUCKET_S, last - first)
    replica = Replica.this(mode="offline", source=source, started=first)
    return Views(ring, LogTotals(records), replica, window_s=span, poll_s=30.0, clock=lambda: last, outcomes=outcomes)


class OfflineApp:
    """An ASGI app serving only the dashboard, over a decision log, to loopback clients."""

    def __init__(self, views: Views, allowed_hosts: frozenset[str] = frozenset()) -> None:
        def host_allowed(host: str | None) -> bool:
            return host is None or is_loopback_host(host) or host.partition(":")[0].lower() in allowed_hosts

        self.http = DashboardHttp(views, KeyRing([]), host_allowed)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path = scope["path"]
        if path in ("", "/"):
            reply_status, reply_headers, body = 302, {"location": "/dashboard/"}, b""
        elif is_dashboard_path(path):
            reply = self.http.handle(
                scope["method"], path, scope.get("query_string") or b"", headers, scope.get("client")
            )
            reply_status, reply_headers, body = reply.status, reply.headers, reply.body
        else:
            body = dumps({"error": {"message": f"no such page: {path} (see /dashboard/)", "code": "not_found"}})
            reply_status, reply_headers = 404, {"content-type": "application/json"}
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply_headers.items()]
        raw.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": reply_status, "headers": raw})
        await send({"type": "http.response.body", "body": body, "more_body": False})


__all__ = ["LogTotals", "OfflineApp", "logged_records", "offline_views", "read_log", "record_from_json"]
