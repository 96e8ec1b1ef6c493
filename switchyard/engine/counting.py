"""``POST /v1/messages/count_tokens``: counted by the route's upstream, or estimated.

Layer: ``engine``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from switchyard.engine.replies import HEADER_ROUTE, HEADER_SELECTED, error_reply, forwarded, lower
from switchyard.engine.reply import Reply
from switchyard.engine.restriction import restriction_for
from switchyard.engine.target import Route, Target
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import (
    InvalidRequestError,
    RouterError,
    SwitchyardError,
    UpstreamError,
    UpstreamStatusError,
)
from switchyard.protocol.request import ChatRequest
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps, load_object

logger = logging.getLogger("switchyard.engine")


async def count_tokens(
    route_for: Callable[[str], Route], targets: dict[str, Target], body: bytes, headers: Mapping[str, str]
) -> Reply:
    """Serves ``POST /v1/messages/count_tokens`` (Anthropic shape, any route).

    The route is not run (a count must not move session state or pay for judges). The
    route's first Anthropic target counts with Anthropic's own endpoint; otherwise the
    first target's upstream is asked (OpenAI Responses ``input_tokens``, vLLM ``/tokenize``)
    and, when it cannot answer, the documented estimate of
    :func:`switchyard.wire.tokens.estimate_input_tokens` is returned. The header
    ``x-switchyard-token-count`` says which (``upstream`` or ``estimate``).
    """
    fmt = WireFormat.ANTHROPIC_MESSAGES
    codec = get_codec(fmt)
    hdrs = lower(headers)
    try:
        raw = load_object(body)
        request = codec.decode_request(raw)
        if not request.model:
            raise InvalidRequestError("'model' is required: name a route (see GET /v1/models)", param="model")
        route = route_for(request.model)
        names = [n for n in route.order(()) if n in targets]
        infos = {n: t.info for n, t in targets.items()}
        restriction = restriction_for(request, hdrs, route.restrict, infos, names, raw)
        if restriction is not None:
            # A count sends the prompt upstream too: only to a target the request may reach.
            kept = restriction.keep(names)
            if not kept:
                raise restriction.error(route.name, names, "count its tokens")
            names = kept
        if not names:
            raise RouterError(f"route {route.name!r} has no targets")
        name = next((n for n in names if targets[n].info.format == fmt.value), names[0])
        target = targets[name]
        count, source = await _count(target, request, raw, hdrs)
    except SwitchyardError as exc:
        return error_reply(targets, fmt, exc, None)
    reply_headers = {
        "content-type": "application/json",
        HEADER_ROUTE: route.name,
        HEADER_SELECTED: name,
        "x-switchyard-token-count": source,
    }
    return Reply(200, reply_headers, body=dumps({"input_tokens": count}))


async def _count(
    target: Target, request: ChatRequest, raw: dict[str, Any], headers: Mapping[str, str]
) -> tuple[int, str]:
    from switchyard.wire.tokens import estimate_input_tokens

    counter = getattr(target.backend, "count_tokens", None)
    if counter is not None:
        options = CallOptions(raw_body=raw, raw_format=WireFormat.ANTHROPIC_MESSAGES.value, headers=forwarded(headers))
        try:
            return int(await counter(request, target.info, options)), "upstream"
        except UpstreamStatusError as exc:
            if target.info.format == WireFormat.ANTHROPIC_MESSAGES.value and exc.upstream_status in (400, 413):
                raise  # Anthropic judged the request itself: relay its answer.
            logger.info("token count by %r failed (%s); estimating", target.info.name, exc.message)
        except UpstreamError as exc:
            logger.info("token count by %r failed (%s); estimating", target.info.name, exc.message)
    return estimate_input_tokens(request), "estimate"
