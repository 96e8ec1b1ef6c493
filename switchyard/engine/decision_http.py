"""``POST /v1/decision``: the route's decision for a request, without the answer call.

Layer: ``engine``.

For gateways and agent harnesses that keep their own HTTP client (LiteLLM, Envoy, a custom
loop): they send the body they are about to send upstream, in any of the three formats, and get
back which target and model to call, why, the fallbacks in order, and what routing changed in
the session's state. The request goes through exactly what a proxied request goes through
before its answer call — decoding and its limits, session identity, the router (judge calls
included, and booked), the key's route allowlist — and writes its decision record (``path``
``/v1/decision``, ``details.decision_only``), so metrics, budgets and logs see it.

**Which format the body is in**, first rule that applies:

1. ``?format=openai_chat`` | ``anthropic_messages`` | ``openai_responses`` (or ``chat``,
   ``messages``, ``responses``);
2. an ``anthropic-version`` header (every Anthropic SDK and Claude Code send one): Anthropic
   Messages;
3. a body with ``input`` and no ``messages``: OpenAI Responses;
4. otherwise OpenAI Chat Completions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from switchyard.engine.book import decision_only
from switchyard.engine.offload import decode
from switchyard.engine.replies import error_reply, lower, reply_headers
from switchyard.engine.reply import Reply
from switchyard.engine.state_watch import unwatch, watch
from switchyard.protocol.errors import InvalidRequestError, SwitchyardError
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps, load_object

if TYPE_CHECKING:
    from switchyard.engine.core import Engine

DECISION_PATH = "/v1/decision"

FORMAT_NAMES: dict[str, WireFormat] = {
    "openai_chat": WireFormat.OPENAI_CHAT,
    "chat": WireFormat.OPENAI_CHAT,
    "anthropic_messages": WireFormat.ANTHROPIC_MESSAGES,
    "messages": WireFormat.ANTHROPIC_MESSAGES,
    "openai_responses": WireFormat.OPENAI_RESPONSES,
    "responses": WireFormat.OPENAI_RESPONSES,
}
"""The values ``?format=`` accepts."""


def detect_format(query: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> WireFormat:
    """The body's wire format by the rules in the module docstring.

    Raises:
        InvalidRequestError: ``?format=`` names no format.
    """
    asked = parse_qs(query).get("format") if query else None
    if asked:
        found = FORMAT_NAMES.get(asked[-1])
        if found is None:
            names = ", ".join(sorted(FORMAT_NAMES))
            raise InvalidRequestError(f"unknown format {asked[-1]!r}; use one of {names}", param="format")
        return found
    if "anthropic-version" in headers:
        return WireFormat.ANTHROPIC_MESSAGES
    if "input" in body and "messages" not in body:
        return WireFormat.OPENAI_RESPONSES
    return WireFormat.OPENAI_CHAT


def _target(engine: Engine, name: str | None) -> dict[str, Any] | None:
    if name is None or name not in engine.targets:
        return None
    info = engine.targets[name].info
    return {"target": name, "model": info.model, "client": info.client, "format": info.format}


async def decision_reply(engine: Engine, body: bytes, headers: Mapping[str, str], query: str = "") -> Reply:
    """Serves ``POST /v1/decision``: the decision as JSON, or an error in the body's envelope.

    With inbound keys, the session state the decision reads and changes is its key's tenant's:
    ``state_changes`` lists only that tenant's (:mod:`switchyard.protocol.tenancy`).
    """
    t0 = time.perf_counter()
    hdrs = lower(headers)
    fmt = WireFormat.OPENAI_CHAT
    try:
        raw = load_object(body)  # orjson: milliseconds even for a 5 MB body
        fmt = detect_format(query, hdrs, raw)
        # As for proxied requests: decoding a long conversation must not stall the event loop.
        request = await decode(get_codec(fmt), raw)
        changes, token = watch()
        try:
            prep = await engine.prepare(request, hdrs, fmt, raw, t0)
        finally:
            unwatch(token)
    except SwitchyardError as exc:
        return error_reply(engine.targets, fmt, exc, None)
    decision = prep.decision
    # Booked as the library's Switchyard.decide books it (one function: engine/book.py).
    record = decision_only(engine, prep, DECISION_PATH)
    state = changes.to_list()
    chosen = _target(engine, record.selected)
    rewritten = None
    if decision.request is not None:
        # The router changed the request (an advisor's plan, a trimmed history): the gateway
        # must send this one, in the format it sent.
        rewritten = get_codec(fmt).encode_request(decision.request, model=request.model, stream=request.stream)
    payload = {
        "object": "switchyard.decision",
        "request_id": record.request_id,
        "route": record.route,
        "router": record.router,
        "request_format": fmt.value,
        **(chosen or {"target": None, "model": None, "client": None, "format": None}),
        "source": record.source,
        "score": record.score,
        "confidence": record.confidence,
        "reason": record.reason,
        "fallbacks": [t for c in prep.candidates[1:] if (t := _target(engine, c)) is not None],
        "answered": decision.response is not None,
        "request": rewritten,
        "session": {
            "id": record.session_id,
            "source": record.session_source,
            "agent_id": record.agent_id,
            "turn_index": record.turn_index,
            "state_changes": state,
        },
        "router_cost": {
            "calls": record.router_cost.calls,
            "usd": record.router_cost.cost_usd,
            "elapsed_ms": record.router_cost.elapsed_ms,
        },
        "overhead_ms": record.overhead_ms,
    }
    # The x-switchyard-* headers of every answer (route, selected, source, overhead, request id).
    return Reply(200, reply_headers(record, stream=False), body=dumps(payload))
