"""Stage 3, restrict: which targets may see this request at all.

Layer: ``engine``. Reads the request (its whole text and, for a verbatim replay, the raw body),
the ``x-switchyard-require`` header, the caller's key, the route's ``restrict:`` rules and the
labels a continued thread required; changes only the decision record: its
``details.restriction``, the mask its error texts get before any sink sees them, and the
dashboard's prompt preview (masked the same way).

The restriction itself and how it is enforced (candidates, router calls, the fallback walk) are
:mod:`switchyard.engine.restriction`'s. A plain Chat stand-in is never restricted: the intake
stage takes the plain lane only when nothing could require a label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchyard.engine import threads
from switchyard.engine.records import DecisionRecord, prompt_preview
from switchyard.engine.restriction import Restriction, restriction_for
from switchyard.engine.target import Route
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo


def restricted(
    request: ChatRequest,
    headers: Mapping[str, str],
    route: Route,
    infos: Mapping[str, TargetInfo],
    relevant: tuple[str, ...],
    raw: dict[str, Any] | None,
    inherited: list[str] | None,
    record: DecisionRecord,
    *,
    plain: bool,
    preview_chars: int,
) -> Restriction | None:
    """The labels ``request`` requires and the targets they leave (``None``: unrestricted).

    Args:
        request: The request.
        headers: Its headers, lower-cased.
        route: Its route (its ``restrict:`` rules).
        infos: Every target's description, by name (their labels).
        relevant: The route's targets, fallbacks and judges: what the record lists as removed.
        raw: The caller's body, when it may be replayed verbatim (its text is checked too).
        inherited: The labels a continued thread required (the identify stage's).
        record: The request's record (noted and masked; its preview kept when asked).
        plain: The request is a plain Chat stand-in (never restricted).
        preview_chars: How much of the latest message the dashboard keeps (0: none).
    """
    restriction = None
    if not plain:
        carried = threads.carried(request, inherited)
        restriction = restriction_for(request, headers, route.restrict, infos, relevant, raw, carried)
        if restriction is not None:
            record.restrict(restriction.to_dict(), restriction.redact)
    if preview_chars:  # server.dashboard's session timeline (memory only), without what a rule matched
        record.keep_preview(prompt_preview(request, preview_chars, restriction.redact if restriction else None))
    return restriction
