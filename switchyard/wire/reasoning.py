"""Reasoning that crosses providers: who may see a signature, and how a foreign one travels.

Layer: ``wire`` — imports ``protocol`` only.

Providers only accept reasoning they issued themselves: Anthropic checks the ``signature`` of
every ``thinking`` block, OpenAI decrypts ``encrypted_content`` of reasoning items. So an
upstream request carries a :class:`~switchyard.protocol.messages.ReasoningPart` only when
``part.provider`` is that upstream's format; everything else is dropped (with a diagnostic).

The other direction — a caller whose format has a slot for opaque reasoning data (Anthropic's
``signature``, Responses' ``encrypted_content``) receiving reasoning another provider produced —
is handled with a *carrier token*: the slot gets ``switchyard.v1.<provider>.<base64 JSON>``,
which holds whatever the issuing provider needs to accept the block again (its signature,
redacted data or encrypted content, and the exact text a signature covers). When the caller
sends the block back, the decoder turns the token into the original part, so a conversation
that moves between Claude, OpenAI and vLLM keeps each provider's reasoning for that provider.
The prefix contains ``.``, which never occurs in base64, so a real signature is never mistaken
for a token. Reasoning with no issuer (vLLM's plain text) is tagged ``switchyard``: it is never
sent to a provider as signed reasoning.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

import orjson

from switchyard.protocol.messages import Message, ReasoningPart
from switchyard.protocol.request import ReasoningConfig

PREFIX = "switchyard.v1."
"""Start of every carrier token."""

UNSIGNED = "switchyard"
"""``ReasoningPart.provider`` of reasoning that no provider signed (e.g. vLLM's ``reasoning``)."""


def is_token(value: str | None) -> bool:
    """Whether ``value`` is a carrier token this module produced."""
    return bool(value) and value.startswith(PREFIX)  # type: ignore[union-attr]


def pack(part: ReasoningPart) -> str:
    """The carrier token for ``part`` (any provider, signed or not)."""
    provider = part.provider or UNSIGNED
    payload: dict[str, Any] = {}
    for key in ("signature", "redacted", "encrypted", "item_id"):
        value = getattr(part, key)
        if value is not None:
            payload[key] = value
    if part.signature is not None or part.encrypted is not None:
        # Signatures cover the exact text; keep it so a client's reformatting cannot break it.
        payload["text"] = part.text
    blob = base64.urlsafe_b64encode(orjson.dumps(payload)).decode().rstrip("=") if payload else ""
    return f"{PREFIX}{provider}.{blob}"


def unpack(token: str, text: str = "") -> ReasoningPart | None:
    """The part a carrier token stands for, or ``None`` when ``token`` is not a valid token.

    Args:
        token: The signature / encrypted content the caller sent back.
        text: The reasoning text the caller sent with it (used when the token holds none).
    """
    if not is_token(token):
        return None
    provider, _, blob = token[len(PREFIX) :].partition(".")
    if not provider:
        return None
    payload: dict[str, Any] = {}
    if blob:
        try:
            decoded = orjson.loads(base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4)))
        except (binascii.Error, ValueError, orjson.JSONDecodeError):
            return None
        if not isinstance(decoded, dict):
            return None
        payload = decoded

    def _str(key: str) -> str | None:
        value = payload.get(key)
        return value if isinstance(value, str) else None

    stored_text = _str("text")
    return ReasoningPart(
        text=stored_text if stored_text is not None else text,
        signature=_str("signature"),
        provider=provider,
        redacted=_str("redacted"),
        encrypted=_str("encrypted"),
        item_id=_str("item_id"),
    )


def native_for(part: ReasoningPart, fmt: str) -> bool:
    """Whether ``part`` may be sent to an upstream of format ``fmt`` as reasoning."""
    return part.provider == fmt


def is_foreign(part: ReasoningPart, fmt: str) -> bool:
    """Whether ``part`` was issued by (or relayed from) a provider other than ``fmt``.

    Plain reasoning that arrived without any provider mark (``provider is None``) is not
    foreign: it is ordinary history text of the caller's own format.
    """
    return part.provider is not None and part.provider != fmt


_CONTENT = attrgetter("content")
_SHORT = 16


def any_foreign(messages: Sequence[Message], fmt: str) -> bool:
    """Whether any reasoning part of ``messages`` is foreign to ``fmt`` (:func:`is_foreign`).

    The types of all parts are gathered first, without an ``isinstance`` per part (pydantic's
    class check is a Python call): an agent's 400-message conversation usually holds no
    reasoning at all, and this halves what answering that costs.
    """
    if len(messages) >= _SHORT:  # (for a few messages the per-part check costs less)
        kinds = set(map(type, chain.from_iterable(map(_CONTENT, messages))))
        if not any(issubclass(kind, ReasoningPart) for kind in kinds):
            return False
    return any(is_foreign(p, fmt) for m in messages for p in m.content if isinstance(p, ReasoningPart))


def effort_for(config: ReasoningConfig) -> str | None:
    """An OpenAI-style ``reasoning_effort`` for a reasoning preference (``None``: say nothing).

    An explicit effort is kept, except Anthropic's ``max`` (``output_config.effort``), which
    OpenAI calls ``xhigh``; an Anthropic thinking budget maps to ``low`` (< 4096 tokens),
    ``medium`` (< 16384) or ``high``; "thinking on" without a budget is ``medium``.
    """
    if config.effort is not None:
        return "xhigh" if config.effort == "max" else config.effort
    if config.enabled is False:
        return None
    if config.budget_tokens is not None:
        budget = config.budget_tokens
        return "low" if budget < 4096 else "medium" if budget < 16384 else "high"
    return "medium" if config.enabled else None
