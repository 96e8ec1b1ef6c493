"""Type and range checks every request decoder shares, answered locally as 400s.

Layer: ``wire`` — imports ``protocol`` only.

The decoders read fields by truthiness in places (``bool(body.get("stream"))`` made
``"stream": "false"`` a stream) and forwarded numbers no provider accepts. These checks run
once per request on the already-parsed body — a few dict lookups, no extra JSON pass — and
only refuse what every provider refuses too (sources in ``docs/security.md``):

* ``model`` is a JSON string (or absent) — all three APIs type it ``string``; a list, object
  or number was stringified and fell through to ``default_route``;
* ``stream`` is a JSON boolean (or null) — all three APIs type it ``boolean``;
* token limits (``max_tokens``, ``max_completion_tokens``, ``max_output_tokens``) are integers
  from 1 to :data:`MAX_TOKENS_CEILING`;
* ``temperature`` is a finite number ≥ 0 (no upper bound: vLLM accepts any), ``top_p`` a
  number in [0, 1];
* the message list is not empty and holds at most the operator's cap
  (``server.limits.max_messages``; set per request through :data:`max_messages`).

Fields these checks do not name are left to the decoders (and to the upstream).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

from switchyard.protocol.errors import InvalidRequestError

MAX_TOKENS_CEILING = 16_777_216
"""Largest token limit accepted (2**24): far above any model's output, below absurd values."""

max_messages: ContextVar[int | None] = ContextVar("switchyard_max_messages", default=None)
"""The operator's cap on messages per request (``None``: no cap; the proxy sets it)."""


_JSON_TYPES: dict[type, str] = {
    list: "an array",
    dict: "an object",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_body(
    body: dict[str, Any],
    *,
    messages: Sequence[Any] | None,
    messages_key: str,
    tokens: tuple[str, ...],
    empty_ok: bool = False,
) -> None:
    """Refuses a request body whose common fields have the wrong type or range.

    Args:
        body: The parsed request body.
        messages: The message list (``None`` when the format's input is not a list).
        messages_key: Its field name, for the error.
        tokens: Names of the token-limit fields of this format.
        empty_ok: An empty message list is allowed (a Responses turn continuing a stored one).

    Raises:
        InvalidRequestError: The first problem found, naming the field.
    """
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        kind = _JSON_TYPES.get(type(model), type(model).__name__)
        raise InvalidRequestError(f"'model' must be a string naming a route, got {kind}", param="model")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequestError(f"'stream' must be a boolean (true or false), got {stream!r}", param="stream")
    for key in tokens:
        value = body.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidRequestError(f"'{key}' must be an integer, got {value!r}", param=key)
        if not 1 <= value <= MAX_TOKENS_CEILING:
            raise InvalidRequestError(f"'{key}' must be between 1 and {MAX_TOKENS_CEILING}, got {value}", param=key)
    temperature = body.get("temperature")
    if temperature is not None and not (_number(temperature) and temperature >= 0):
        raise InvalidRequestError(f"'temperature' must be a number >= 0, got {temperature!r}", param="temperature")
    top_p = body.get("top_p")
    if top_p is not None and not (_number(top_p) and 0 <= top_p <= 1):
        raise InvalidRequestError(f"'top_p' must be a number between 0 and 1, got {top_p!r}", param="top_p")
    if messages is None:
        return
    if not messages and not empty_ok:
        raise InvalidRequestError(f"'{messages_key}' must contain at least one message", param=messages_key)
    cap = max_messages.get()
    if cap is not None and len(messages) > cap:
        raise InvalidRequestError(
            f"'{messages_key}' has {len(messages)} messages; this proxy accepts at most {cap} "
            "(server.limits.max_messages)",
            param=messages_key,
        )
