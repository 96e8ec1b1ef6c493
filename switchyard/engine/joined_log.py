"""Decisions joined with their outcomes: the one reading of a decision log that replay, tune,
stats and the offline dashboard share.

Layer: ``engine`` — pure Python over decision-log lines (no numpy).

A decision log (``switchyard serve --decision-log``) holds decision records and the feedback
lines of ``POST /v1/feedback`` (``{"object": "switchyard.feedback", …}``), in the order they were
written. :func:`join_log` groups the records into sessions and attaches each session's outcome:

* **the unit** is the session, keyed by **tenant and session id** (a session id is unique
  within a tenant only); a record without a session id is a session of its own
  (``request:<request_id>``);
* **a report joins its own tenant's sessions only** — by ``session_id``, or by ``request_id``
  through the record with that id — the rule the live store follows
  (:mod:`switchyard.engine.feedback`);
* **the latest report wins** (by ``ts``; a tie goes to the one written later), as the live store
  keeps it: a user may correct a thumbs-down;
* **nothing is lost**: a report whose id names no record of the log (its session started before
  the log, or belongs to another tenant, or never existed) is kept in
  :attr:`JoinedLog.unmatched`, and a later join with more of the log can still place it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass

FEEDBACK_OBJECT = "switchyard.feedback"
OUTCOMES = ("resolved", "score", "reward")

SessionKey = tuple[str | None, str]
"""``(tenant, session id)``; a record without a session id has ``request:<request_id>``."""


def outcome_of(line: Mapping[str, Any]) -> dict[str, float]:
    """The outcome a feedback line gives, as numbers (``resolved`` true → 1.0)."""
    found: dict[str, float] = {}
    for name in OUTCOMES:
        value = line.get(name)
        if isinstance(value, bool):
            found[name] = 1.0 if value else 0.0
        elif isinstance(value, int | float) and math.isfinite(value):
            found[name] = float(value)
    return found


@dataclass(slots=True)
class JoinedSession:
    """One session's decision records (in log order) and its latest outcome.

    Attributes:
        key: ``(tenant, session id)``.
        records: The decision records (JSON objects as logged), in log order.
        outcome: The latest report's outcome (``{"resolved": 1.0}``), empty without one.
        outcome_ts: That report's ``ts``.
        reports: How many reports named the session (the latest counts).
    """

    key: SessionKey
    records: list[Mapping[str, Any]] = field(default_factory=list)
    outcome: dict[str, float] = field(default_factory=dict)
    outcome_ts: float = -math.inf
    reports: int = 0

    @property
    def route(self) -> str | None:
        """The route of the session's first record."""
        route = self.records[0].get("route") if self.records else None
        return route if isinstance(route, str) else None

    @property
    def arm(self) -> str | None:
        """The experiment arm of the session's first record (``routed``, ``control``, ``shadow``)."""
        details = self.records[0].get("details") if self.records else None
        arm = details.get("arm") if isinstance(details, Mapping) else None
        return arm if isinstance(arm, str) else None


@dataclass(slots=True)
class JoinedLog:
    """What :func:`join_log` read.

    Attributes:
        sessions: Per ``(tenant, session id)``, in order of first appearance.
        unmatched: Reports naming no record of the log (kept, never dropped).
        reports: Feedback lines read (after the tenant filter).
        failed: Records with an error status (left out of the sessions).
    """

    sessions: dict[SessionKey, JoinedSession] = field(default_factory=dict)
    unmatched: list[Mapping[str, Any]] = field(default_factory=list)
    reports: int = 0
    failed: int = 0


def _tenant(obj: Mapping[str, Any]) -> str | None:
    who = obj.get("tenant")
    return who if isinstance(who, str) else None


def join_log(
    lines: Iterable[Mapping[str, Any]],
    *,
    tenant: str | None = None,
    route: str | None = None,
    feedback: Iterable[Mapping[str, Any]] = (),
) -> JoinedLog:
    """Groups decision records into sessions and joins each session's latest report.

    Args:
        lines: The log's JSON objects in file order (decision records and feedback lines).
        tenant: Only this tenant's records and reports.
        route: Only sessions of this route (reports are joined before the filter, so a report by
            request id still finds its session).
        feedback: More feedback lines (a separate file), joined like the log's own.

    Returns:
        The joined sessions and the reports that matched none.
    """
    joined = JoinedLog()
    by_request: dict[tuple[str | None, str], SessionKey] = {}
    reports: list[Mapping[str, Any]] = []
    for obj in lines:
        if tenant is not None and obj.get("tenant") != tenant:
            continue
        if obj.get("object") == FEEDBACK_OBJECT:
            reports.append(obj)
            continue
        request_id = obj.get("request_id")
        if not isinstance(obj.get("route"), str) or not isinstance(request_id, str):
            continue
        status = obj.get("status", 200)
        if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
            joined.failed += 1
            continue
        session_id = obj.get("session_id")
        key: SessionKey = (_tenant(obj), session_id if isinstance(session_id, str) else f"request:{request_id}")
        by_request[(key[0], request_id)] = key
        entry = joined.sessions.get(key)
        if entry is None:
            entry = joined.sessions[key] = JoinedSession(key)
        entry.records.append(obj)
    for line in feedback:
        if (tenant is None or line.get("tenant") == tenant) and line.get("object", FEEDBACK_OBJECT) == FEEDBACK_OBJECT:
            reports.append(line)
    joined.reports = len(reports)
    for line in reports:
        _place(joined, by_request, line)
    if route is not None:
        joined.sessions = {k: s for k, s in joined.sessions.items() if s.route == route}
    return joined


def _place(joined: JoinedLog, by_request: Mapping[tuple[str | None, str], SessionKey], line: Mapping[str, Any]) -> None:
    who = _tenant(line)
    session_id, request_id = line.get("session_id"), line.get("request_id")
    key: SessionKey | None = None
    if isinstance(session_id, str):
        key = (who, session_id)
    elif isinstance(request_id, str):
        key = by_request.get((who, request_id))
    entry = joined.sessions.get(key) if key is not None else None
    outcome = outcome_of(line)
    if entry is None or not outcome:
        joined.unmatched.append(line)
        return
    ts = line.get("ts")
    at = float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else 0.0
    entry.reports += 1
    if at >= entry.outcome_ts:  # the latest counts; a tie goes to the line written later
        entry.outcome, entry.outcome_ts = outcome, at


__all__ = ["FEEDBACK_OBJECT", "OUTCOMES", "JoinedLog", "JoinedSession", "SessionKey", "join_log", "outcome_of"]
