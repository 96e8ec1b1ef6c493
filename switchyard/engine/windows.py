"""Does the prompt fit a target's context window? A cheap, conservative pre-call check.

Layer: ``engine`` — imports ``protocol`` and ``wire.tokens`` (the documented estimate).

Before calling a target whose context window is known — configured, read from the upstream's
``/v1/models`` at start-up (``probe_context_window``), or learned from an earlier overflow or
lookup — the engine asks :meth:`PromptSize.exceeds`. The work is staged so ordinary requests pay
almost nothing:

1. no known window: no work at all;
2. for a caller's body forwarded as decoded (the proxy path, no router rewrote the request),
   its length in bytes bounds every character of text and tool definitions from above: when
   ``bytes / 4`` is at most half the window the prompt fits, at the cost of a division;
3. the characters of the message text plus the tool definitions (names, descriptions and the
   parameter schemas' JSON), counted once per request: when ``chars / 4`` is at most half the
   window the prompt fits — the common case ends here;
4. otherwise :func:`switchyard.wire.tokens.estimate_input_tokens` (text, tool calls and
   results, tool definitions, per-message and per-image allowances), also once per request.

The target is skipped only when even a generous error in the estimate cannot save it:
``estimate * (1 - FIT_MARGIN) > window``. Four characters per token overestimates prose a
little and underestimates code and non-Latin text, so a prompt within that band is sent, and a
real overflow is then handled by the context-window fallback. ``max_tokens`` is not added: the
prompt is what must fit, and an upstream that also counts the completion budget still answers
with an overflow the fallback understands.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from switchyard.protocol.messages import message_chars
from switchyard.protocol.request import ChatRequest

FIT_MARGIN = 0.2
"""Share of the estimate forgiven before a prompt is judged too long (estimation error)."""

QUICK_SHARE = 0.5
"""A prompt of at most this share of the window (by ``chars / 4``) fits without an estimate."""

_CHARS_PER_TOKEN = 4


class PromptSize:
    """The size of one request's prompt, computed lazily and at most once.

    Args:
        request: The request as it will be sent, or a function that decodes it (called at
            most once, only when the size is needed: the plain Chat lane never decodes).
        body_bytes: Length of the caller's body when ``request`` was decoded from it unchanged
            (an upper bound of its characters); ``None`` otherwise.
    """

    __slots__ = ("_body_bytes", "_chars", "_decode", "_found", "_tokens")

    def __init__(self, request: ChatRequest | Callable[[], ChatRequest], body_bytes: int | None = None) -> None:
        if isinstance(request, ChatRequest):
            self._found: ChatRequest | None = request
            self._decode: Callable[[], ChatRequest] | None = None
        else:
            self._found, self._decode = None, request
        self._body_bytes = body_bytes
        self._chars: int | None = None
        self._tokens: int | None = None

    @property
    def _request(self) -> ChatRequest:
        if self._found is None:
            assert self._decode is not None
            self._found = self._decode()
        return self._found

    def chars(self) -> int:
        """Characters of message text (text, reasoning, tool-call names and arguments, tool
        results) and of the tool definitions."""
        if self._chars is None:
            n = sum(map(message_chars, self._request.messages))
            for tool in self._request.tools:
                n += len(tool.name) + len(tool.description or "")
                if tool.parameters:
                    n += len(orjson.dumps(tool.parameters))
            self._chars = n
        return self._chars

    def tokens(self) -> int:
        """The documented prompt-token estimate (:func:`~switchyard.wire.tokens.estimate_input_tokens`)."""
        if self._tokens is None:
            from switchyard.wire.tokens import estimate_input_tokens

            self._tokens = estimate_input_tokens(self._request)
        return self._tokens

    def exceeds(self, window: int) -> bool:
        """Whether the prompt clearly does not fit ``window`` tokens (see the module docstring)."""
        limit = QUICK_SHARE * window
        if self._body_bytes is not None and self._body_bytes / _CHARS_PER_TOKEN <= limit:
            return False
        if self.chars() / _CHARS_PER_TOKEN <= limit:
            return False
        return self.tokens() * (1 - FIT_MARGIN) > window


__all__ = ["FIT_MARGIN", "QUICK_SHARE", "PromptSize"]
