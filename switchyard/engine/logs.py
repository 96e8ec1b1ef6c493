"""The log line of a token count (``POST /v1/messages/count_tokens``).

Layer: ``engine``. Routed requests are logged by their decision record (logger
``switchyard.decisions``, see :func:`switchyard.engine.records.log_sink`); a count is not routed
and writes no record, but Claude Code calls it often, so each one gets an INFO line on
``switchyard.count_tokens``: route, the target that counted, and how (``upstream`` or ``estimate``).
"""

from __future__ import annotations

import logging

from switchyard.engine.reply import Reply

counts = logging.getLogger("switchyard.count_tokens")


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


__all__ = ["log_count_tokens"]
