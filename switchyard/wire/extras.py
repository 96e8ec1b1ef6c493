"""Which caller fields without an IR slot may reach an upstream of another format.

Layer: ``wire`` — imports ``protocol`` only.

A request keeps fields the IR does not model in ``ChatRequest.extra``. An upstream of the
caller's own format gets them all (it speaks the same API). Another format gets only the
fields it understands; everything else is dropped and reported, because real providers reject
unknown fields (OpenAI answers 400 "Unrecognized request argument") and OpenAI-only switches
such as ``store`` or ``service_tier`` mean nothing to vLLM or Anthropic.
"""

from __future__ import annotations

from typing import Any

from switchyard.protocol.errors import InvalidRequestError, ThreadNotFoundError
from switchyard.protocol.request import ChatRequest
from switchyard.wire import diagnostics

# Fields that keep their meaning (and name) across formats, by upstream format.
PORTABLE: dict[str, frozenset[str]] = {
    # vLLM understands top_k/min_p & co.; prompt_cache_key and safety_identifier are Chat fields too.
    "openai_chat": frozenset(
        {"top_k", "min_p", "repetition_penalty", "prompt_cache_key", "safety_identifier", "chat_template_kwargs"}
    ),
    "anthropic_messages": frozenset({"top_k"}),
    "openai_responses": frozenset({"prompt_cache_key", "safety_identifier", "prompt_cache_retention"}),
}


CARRIED: dict[tuple[str, str], frozenset[str]] = {
    # Anthropic: output_config.format becomes the IR response_format, .effort the reasoning
    # effort; thinking's type and budget_tokens the reasoning config.
    ("anthropic_messages", "output_config"): frozenset({"format", "effort"}),
    ("anthropic_messages", "thinking"): frozenset({"type", "budget_tokens"}),
    ("anthropic_messages", "output_format"): frozenset({"type", "schema"}),
    # Responses: text.format becomes the IR response_format.
    ("openai_responses", "text"): frozenset({"format"}),
}
"""Caller fields (by caller format) that the decoder already carried into IR slots, with the
sub-keys it carried: only their other sub-keys are lost on another format, and only those are
reported (as ``field.key``)."""

_NOT_LOSSY = frozenset({"n", "thread"})
"""Caller fields left out without a diagnostic: ``n`` (checked above) and ``thread``, whose
``create`` loses nothing on an upstream without threads (a later ``continue`` is refused)."""


def extras_for(request: ChatRequest, fmt: str) -> dict[str, Any]:
    """The ``extra`` fields to send to an upstream of format ``fmt``.

    Raises:
        InvalidRequestError: The caller asked for something the upstream cannot do and that
            must not be silently dropped (``n > 1`` to a non-Chat upstream, a stored Responses
            conversation to an upstream without that store).
    """
    if request.origin is None or request.origin == fmt:
        return dict(request.extra)
    for key in ("previous_response_id", "conversation"):
        if request.extra.get(key):
            raise InvalidRequestError(
                f"{key} cannot be honoured on this route: its {fmt} upstream has no access to stored "
                "OpenAI responses; send the whole conversation in 'input' (store=false)",
                param=key,
            )
    thread = request.extra.get("thread")
    if isinstance(thread, dict) and thread.get("type") == "continue":
        # Normally refused by the engine before any call (switchyard.engine.threads); this
        # covers calls routers make with the caller's request.
        raise ThreadNotFoundError(
            f"thread {thread.get('previous_message_id')!r} cannot be continued on this route: its {fmt} "
            "upstream keeps no Anthropic message threads; send the whole conversation",
            param="thread.previous_message_id",
        )
    n = request.extra.get("n")
    if isinstance(n, int) and n > 1:
        raise InvalidRequestError(
            f"n={n} cannot be served by this route's {fmt} upstream (one choice per request); send n=1",
            param="n",
        )
    keep = PORTABLE.get(fmt, frozenset())
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in request.extra.items():
        carried = CARRIED.get((request.origin, key))
        if key in keep:
            out[key] = value
        elif carried is not None and isinstance(value, dict):
            dropped.extend(f"{key}.{sub}" for sub in value if sub not in carried)
        elif key not in _NOT_LOSSY:
            dropped.append(key)
    if dropped:
        diagnostics.report(
            f"{request.origin}_to_{fmt}.fields_dropped",
            f"caller fields {sorted(dropped)} have no {fmt} equivalent and were not forwarded",
        )
    return out
