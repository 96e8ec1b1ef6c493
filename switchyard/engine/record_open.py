"""Opening a request's decision record: its id, its caller and the caller's trace context.

Layer: ``engine`` — imports ``protocol``.

The record is opened once the request is admitted and identified, in the request's own task.
What it takes from the caller is bound here, once, and bounded:

* the inbound key (:class:`~switchyard.protocol.access.Caller`): bound to the record, so booking
  and attribution read it from the record wherever and whenever the record is handed out;
* ``x-switchyard-request-id``: kept as the record's id when it is a plain token of at most
  :data:`MAX_REQUEST_ID_CHARS` characters and no inbound keys are configured. With keys (several
  tenants on one proxy) the proxy makes every id itself, so no caller can give its request
  another tenant's id; a caller's valid id is then kept as ``details.client_request_id``. An
  invalid id is dropped;
* ``traceparent``: kept only when it is a well-formed W3C trace context (55 characters);
  anything else is dropped, so a caller cannot park kilobytes in every record.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from switchyard.engine.records import DecisionRecord
from switchyard.engine.replies import HEADER_REQUEST_ID
from switchyard.protocol.access import current_caller
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo

MAX_REQUEST_ID_CHARS = 128
"""The longest ``x-switchyard-request-id`` a caller may name its request with."""

_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
# W3C Trace Context §3.2: version-traceid-parentid-flags, lower-case hex. A later version may
# append fields after a dash; only the four known fields are kept.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[0-9a-zA-Z._-]*)?")
_MAX_TRACEPARENT_CHARS = 512


def caller_request_id(value: str | None) -> str | None:
    """``value`` when it may name a request (a token of ``A-Z a-z 0-9 . _ : -``, at most
    :data:`MAX_REQUEST_ID_CHARS` characters), else ``None``."""
    if not value or len(value) > MAX_REQUEST_ID_CHARS or not _REQUEST_ID.fullmatch(value):
        return None
    return value


def valid_traceparent(value: str | None) -> str | None:
    """The W3C ``traceparent`` in ``value`` (its four fields), or ``None`` when it is not one."""
    if not value or len(value) > _MAX_TRACEPARENT_CHARS:
        return None
    found = _TRACEPARENT.fullmatch(value.strip())
    if found is None:
        return None
    version, trace_id, parent_id, _flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest) or not trace_id.strip("0") or not parent_id.strip("0"):
        return None
    return value.strip()[:55]


def open_record(
    headers: Mapping[str, str], route: str, router: str, fmt: str | None, request: ChatRequest, session: SessionInfo
) -> DecisionRecord:
    """The decision record of a request being served, bound to its caller (see the module).

    Args:
        headers: The request's headers (lower-case names).
        route: The route's name.
        router: The route's router kind.
        fmt: The inbound wire format (``None`` for library calls).
        request: The decoded request.
        session: Its session identity.
    """
    caller = current_caller.get()
    asked = caller_request_id(headers.get(HEADER_REQUEST_ID))
    record = DecisionRecord(
        request_id=asked if asked is not None and caller is None else os.urandom(8).hex(),  # 16 hex digits
        route=route,
        router=router,
        inbound_format=fmt,
        stream=request.stream,
        session_id=session.session_id,
        session_source=session.source,
        agent_id=session.agent_id,
        turn_index=session.turn_index,
    )
    if caller is not None:
        record.bind(caller)
        if asked is not None:
            record.details["client_request_id"] = asked
    if traceparent := valid_traceparent(headers.get("traceparent")):  # spans join the caller's trace
        record.details["traceparent"] = traceparent
    return record
