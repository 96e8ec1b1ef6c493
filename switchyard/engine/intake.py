"""Stage 1, decode: a wire body becomes the request the later stages read.

Layer: ``engine``. Reads the body, its headers and the routes the plain Chat lane relays;
changes nothing (the body's bytes are parsed once and kept as ``raw`` for a verbatim replay).

Three ways in, each the cheapest that is exact for the body at hand:

* a body of ``offload.PARSE_OFF_LOOP_BYTES`` or more is parsed and decoded on a worker thread,
  so the event loop serves everyone else meanwhile (``engine/offload.py``);
* a plain Chat Completions body whose route relays it gets a stand-in instead of the full IR
  decode, with the session the body names (``engine/plain_chat.py``): the identify stage takes
  that session as it is;
* any other body is parsed here, once, and decoded by its wire codec into the IR (on a worker
  thread when it holds very many messages: ``offload.decode``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from switchyard.engine import offload, plain_chat
from switchyard.engine.offload import PARSE_OFF_LOOP_BYTES, decode_off_loop, release_off_loop
from switchyard.engine.target import Route, Target
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.wire.base import Codec, WireFormat
from switchyard.wire.json import load_object


async def decode(
    codec: Codec,
    fmt: WireFormat,
    body: bytes,
    headers: Mapping[str, str],
    lane: Mapping[str, tuple[Target, ...]] | None,
    route_of: Callable[[str], Route],
    *,
    derive: bool,
) -> tuple[dict[str, Any], ChatRequest, SessionInfo | None]:
    """The parsed ``body``, its request, and — for a plain Chat stand-in — the session it names.

    Args:
        codec: The wire codec of ``fmt``.
        fmt: The body's wire format.
        body: The request body as received.
        headers: The request's headers, lower-cased.
        lane: The routes whose plain Chat bodies are relayed without the IR decode, with their
            candidate targets (``plain_chat.relay_routes``); ``None`` or empty: no stand-ins.
        route_of: The engine's route lookup.
        derive: Whether a session id may be derived from the conversation's opening.

    Raises:
        InvalidRequestError: The body is not a valid request of its format.
    """
    if len(body) >= PARSE_OFF_LOOP_BYTES:
        # Decoding 5 MB (100,000 messages) takes seconds of CPU: on a worker thread the event
        # loop serves everyone else meanwhile (docs/benchmarks.md); so is freeing it, after.
        # Smaller bodies are read here, once (engine/offload.py says where the line is).
        raw, request = await decode_off_loop(codec, body)
        release_off_loop(raw, request)
        return raw, request, None
    raw = load_object(body)
    if lane and fmt is WireFormat.OPENAI_CHAT:
        plain = plain_chat.view(raw, headers, lane, route_of, derive=derive)
        if plain is not None:
            return raw, plain[0], plain[1]
    return raw, await offload.decode(codec, raw), None
