"""Log lines for what the engine decides: one per routing decision and per token count.

Layer: ``engine``. Both loggers are quiet unless asked: routing decisions go to
``switchyard.decisions`` at DEBUG (``switchyard serve --log-level debug``), token counts to
``switchyard.count_tokens`` at INFO (Claude Code calls ``/v1/messages/count_tokens`` often, and a
count is not a routed request, so it writes no decision record).
"""

from __future__ import annotations

import logging

from switchyard.engine.records import DecisionRecord
from switchyard.engine.reply import Reply

decisions = logging.getLogger("switchyard.decisions")
counts = logging.getLogger("switchyard.count_tokens")


def log_decision(record: DecisionRecord) -> None:
    """A decision sink: one DEBUG line per finished request (nothing is formatted when off)."""
    if not decisions.isEnabledFor(logging.DEBUG):
        return
    decisions.debug(
        "%s route=%s source=%s selected=%s model=%s candidates=%s status=%d session=%s turn=%d "
        "overhead_ms=%.2f duration_ms=%.1f reason=%s",
        record.path or "(library)",
        record.route,
        record.source or "-",
        record.selected or "-",
        record.selected_model or "-",
        ",".join(record.candidates) or "-",
        record.status,
        record.session_id or "-",
        record.turn_index,
        record.overhead_ms,
        record.duration_ms,
        record.reason or "-",
    )


def log_count_tokens(path: str, reply: Reply) -> None:
    """One INFO line per ``count_tokens`` call: route, counting target, how it was counted."""
    if not counts.isEnabledFor(logging.INFO):
        return
    headers = reply.headers
    counts.info(
        "%s route=%s target=%s status=%d counted_by=%s",
        path,
        headers.get("x-switchyard-route", "-"),
        headers.get("x-switchyard-selected-model", "-"),
        reply.status,
        headers.get("x-switchyard-token-count", "-"),
    )


__all__ = ["log_count_tokens", "log_decision"]
