"""``POST /v1/feedback``: a report on a session or a request, answered as JSON.

Layer: ``engine``. The body is checked by :func:`~switchyard.engine.feedback.parse_feedback`;
the caller's tenant comes from its inbound key (:data:`~switchyard.protocol.access.current_caller`,
set by the proxy's gate), so a key reports on its own tenant's sessions only.

Answers: **200** ``matched: true`` (a decision of the caller's tenant with that id is known),
**202** ``matched: false`` (unknown, expired from state, or another tenant's — alike; the
report is kept and logged all the same), **400** for a bad body (OpenAI's error envelope, the
field named in ``param``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from switchyard.engine.feedback import FeedbackResult, FeedbackStore, logger, parse_feedback
from switchyard.engine.reply import Reply
from switchyard.protocol.access import current_caller
from switchyard.protocol.errors import SwitchyardError
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps, load_object

FEEDBACK_PATH = "/v1/feedback"

LogLine = Callable[[dict[str, Any]], None]
"""Writes one feedback line to the decision log (``None``: no log configured)."""


async def record_feedback(
    store: FeedbackStore, body: dict[str, Any], log: LogLine | None, *, tenant: str | None, api_key: str | None
) -> FeedbackResult:
    """Checks, keeps and logs one report (the one path of the HTTP endpoint and the library)."""
    result = await store.report(parse_feedback(body), tenant)
    line = result.log_line(time.time(), api_key)
    if log is not None:
        try:
            log(line)
        except Exception:  # a broken log must not fail the report (it is kept in the store)
            logger.exception("could not write feedback %s to the decision log", result.id)
    for listener in store.listeners:
        try:
            listener(line)
        except Exception:  # a broken listener must not fail the report
            logger.exception("feedback listener failed")
    if logger.isEnabledFor(logging.INFO):
        logger.info("%s", dumps(line).decode())
    return result


async def feedback_reply(store: FeedbackStore, body: bytes, log: LogLine | None) -> Reply:
    """Serves ``POST /v1/feedback`` (see the module docstring)."""
    caller = current_caller.get()
    try:
        raw = load_object(body)
        tenant, key = (caller.tenant, caller.key) if caller is not None else (None, None)
        result = await record_feedback(store, raw, log, tenant=tenant, api_key=key)
    except SwitchyardError as exc:
        codec = get_codec(WireFormat.OPENAI_CHAT)
        return Reply(exc.status, {"content-type": "application/json"}, body=dumps(codec.encode_error(exc.info())))
    return Reply(200 if result.matched else 202, {"content-type": "application/json"}, body=dumps(result.to_dict()))


__all__ = ["FEEDBACK_PATH", "LogLine", "feedback_reply", "record_feedback"]
