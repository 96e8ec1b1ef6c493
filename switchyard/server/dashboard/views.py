"""What the dashboard's data endpoints answer: totals, windows, sessions and one session's timeline.

Layer: ``server``.

Totals "since start" are the live ledger (the same numbers as ``GET /v1/stats`` → ``usd``) and
reliability counters; everything windowed, the decision sources, latency, the session explorer
and the timelines come from the record ring (:mod:`~switchyard.server.dashboard.ring`), folded
into time buckets when a page asks (:mod:`~switchyard.server.dashboard.aggregate`).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from switchyard._dataclass import dataclass
from switchyard.engine.records import DecisionRecord
from switchyard.server.dashboard.aggregate import BUCKET_S, MAX_WINDOW_S, Aggregator
from switchyard.server.dashboard.experiment import Outcomes, experiment_view
from switchyard.server.dashboard.ring import RecordRing

# Keys of DecisionRecord.details that carry a judge's or advisor's verdict (routers/*).
_VERDICT_KEYS = ("escalation", "classifier", "classifier_error", "judge_failure", "advisor", "cascade", "stage_source")
_HIDDEN_KEYS = frozenset({"traceparent", "signals", *_VERDICT_KEYS})
_MAX_TIMELINE = 500


class TotalsSource(Protocol):
    """Where the "since start" figures come from (the live router, or a decision log)."""

    def usd(self) -> dict[str, Any]:
        """``total``, ``routes`` and ``sessions_tracked`` (a :meth:`UsdLedger.snapshot`)."""
        ...

    def reliability(self) -> dict[str, Any]:
        """Reliability counters since start."""
        ...

    def state(self) -> dict[str, Any]:
        """The state backend's status."""
        ...


@dataclass(frozen=True, slots=True)
class Replica:
    """Which process a page describes."""

    host: str
    pid: int
    started: float
    mode: str = "live"
    """``live`` (``switchyard serve``) or ``offline`` (``switchyard dashboard --log``)."""
    source: str | None = None
    """For ``offline``: the decision log's name."""

    @property
    def id(self) -> str:
        """``host:pid``."""
        return f"{self.host}:{self.pid}"

    @classmethod
    def this(cls, *, mode: str = "live", source: str | None = None, started: float | None = None) -> Replica:
        """This process."""
        return cls(socket.gethostname(), os.getpid(), time.time() if started is None else started, mode, source)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "mode": self.mode,
            "source": self.source,
        }


class Views:
    """The data behind every view of the page.

    Args:
        ring: The records (live: fed by the router's decision callback).
        totals: The "since start" figures.
        replica: This process.
        window_s: Default window of the windowed views.
        poll_s: How often the page polls.
        clock: Wall clock; offline, the time of the log's last record.
        fleet: Totals of every replica sharing the state store (``None``: this one only).
        outcomes: The feedback reports received (the routed-vs-control panel's outcomes).
    """

    def __init__(
        self,
        ring: RecordRing,
        totals: TotalsSource,
        replica: Replica,
        *,
        window_s: float = 3600.0,
        poll_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        fleet: Callable[[], dict[str, Any] | None] | None = None,
        outcomes: Outcomes | None = None,
    ) -> None:
        self.ring = ring
        self.totals = totals
        self.replica = replica
        self.window_s = window_s
        self.poll_s = poll_s
        self.clock = clock
        self.fleet = fleet
        self.outcomes = outcomes
        self.aggregator = Aggregator(max_window_s=max(MAX_WINDOW_S, window_s))

    def refresh(self) -> None:
        """Folds in the records that arrived since the last view."""
        self.aggregator.fold(self.ring.snapshot())

    def _window_s(self, asked: float | None) -> float:
        if asked is None:
            return self.window_s
        return min(max(asked, BUCKET_S), self.aggregator.max_window_s)

    def summary(self, window_s: float | None = None) -> dict[str, Any]:
        """Totals since start and over the window, sources, latency, reliability, the series."""
        self.refresh()
        now = self.clock()
        span = self._window_s(window_s)
        agg = self.aggregator
        window = agg.window(now - span, now)
        # Partial: records left the ring before a view folded them in, or the process (or log)
        # does not reach back to the window's start.
        window["window_s"] = span
        window["missed_records"] = agg.missed
        window["covers_whole_window"] = agg.missed == 0 and self.replica.started <= now - span + 1e-6
        return {
            "replica": self.replica.to_dict(),
            "now": now,
            "poll_s": self.poll_s,
            "since_start": {
                "usd": self.totals.usd(),
                "reliability": self.totals.reliability(),
                "state": self.totals.state(),
            },
            "window": window,
            "ring": {"records": len(self.ring), "size": self.ring.size, "sessions": len(agg.sessions)},
            "fleet": self.fleet() if self.fleet is not None else None,
            # Over the records in memory (not the window): arms compare whole sessions.
            "experiment": experiment_view((r for _, r in self.ring.snapshot()), self.outcomes),
        }

    def sessions(self, limit: int = 100, route: str | None = None, tenant: str | None = None) -> dict[str, Any]:
        """The most recently active sessions, newest first (of one route, of one tenant)."""
        self.refresh()
        rows = []
        for summary in reversed(self.aggregator.sessions.values()):
            if (route is not None and summary.route != route) or (tenant is not None and summary.tenant != tenant):
                continue
            rows.append(summary.to_dict())
            if len(rows) >= limit:
                break
        return {"replica": self.replica.to_dict(), "now": self.clock(), "sessions": rows}

    def session(self, key: str) -> dict[str, Any] | None:
        """One session's turns still in the ring, oldest first (``None``: unknown session)."""
        self.refresh()
        summary = self.aggregator.sessions.get(key)
        turns = [_turn(r) for _, r in self.ring.snapshot() if r.session_key == key]
        if summary is None and not turns:
            return None
        return {
            "replica": self.replica.to_dict(),
            "session": summary.to_dict() if summary is not None else None,
            "turns": turns[-_MAX_TIMELINE:],
            "turns_not_in_memory": max(0, (summary.totals.requests if summary else 0) - len(turns)),
        }


def _turn(record: DecisionRecord) -> dict[str, Any]:
    """One timeline row."""
    details = record.details
    verdict = {k: details[k] for k in _VERDICT_KEYS if k in details}
    other = {k: v for k, v in details.items() if k not in _HIDDEN_KEYS}
    signals = details.get("signals")
    return {
        "request_id": record.request_id,
        "ts": record.ts,
        "turn": record.turn_index,
        "agent": record.agent_id,
        "path": record.path,
        "stream": record.stream,
        "tier": record.tier,
        "selected": record.selected,
        "model": record.selected_model,
        "source": record.source,
        "reason": record.reason,
        "score": record.score,
        "confidence": record.confidence,
        "signals": signals if isinstance(signals, dict) else {},
        "verdict": verdict,
        "details": other,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "cache_read_tokens": record.cache_read_tokens,
        "reasoning_tokens": record.reasoning_tokens,
        "cost_usd": round(record.total_cost_usd, 9),
        "router_usd": round(record.router_cost.cost_usd + record.feature_cost_usd, 9),
        "router_calls": record.router_cost.calls,
        "always_capable_usd": record.baseline_cost_usd,
        "overhead_ms": round(record.overhead_ms, 3),
        "duration_ms": round(record.duration_ms, 3),
        "status": record.status,
        "error": record.error,
        "fallbacks": record.fallbacks_tried,
        "attempts": [
            {"target": a.target, "ok": a.ok, "retry": a.retry, "error_class": a.error_class, "ms": a.elapsed_ms}
            for a in record.attempts
        ],
        "prompt": record.preview,
    }


__all__ = ["Replica", "TotalsSource", "Views"]
