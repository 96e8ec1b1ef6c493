"""A scripted :class:`~switchyard.protocol.call.ModelCall` for router unit tests (no HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from switchyard.protocol.errors import UpstreamError
from switchyard.protocol.messages import TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage

Reply = ChatResponse | str | Exception | Callable[[ChatRequest], ChatResponse | str]


class ScriptedCall:
    """Answers router model calls from a script, per target, and records what was asked.

    Args:
        script: Target name → replies consumed in order (the last one repeats). A reply is a
            ``ChatResponse``, a string (becomes the text), an exception (raised), or a callable
            of the request.
        delays: Target name → seconds to wait before answering (to exercise deadlines).

    Attributes:
        calls: ``(target, request)`` for every call made.
    """

    def __init__(self, script: dict[str, Sequence[Reply]], *, delays: dict[str, float] | None = None) -> None:
        self._script = {k: list(v) for k, v in script.items()}
        self._delays = dict(delays or {})
        self.calls: list[tuple[str, ChatRequest]] = []

    def targets_called(self) -> list[str]:
        """Target names of every call, in order."""
        return [name for name, _ in self.calls]

    async def __call__(self, targets: str | Sequence[str], request: ChatRequest) -> ChatResponse:
        names = [targets] if isinstance(targets, str) else list(targets)
        last: Exception | None = None
        for name in names:
            self.calls.append((name, request))
            if self._delays.get(name):
                await asyncio.sleep(self._delays[name])
            replies = self._script.get(name)
            if not replies:
                last = UpstreamError(f"{name}: no scripted reply", target=name)
                continue
            reply = replies.pop(0) if len(replies) > 1 else replies[0]
            if callable(reply) and not isinstance(reply, ChatResponse | Exception):
                reply = reply(request)
            if isinstance(reply, Exception):
                if isinstance(reply, UpstreamError) and reply.fallback_ok:
                    last = reply
                    continue
                raise reply
            if isinstance(reply, str):
                return ChatResponse(
                    id="scripted",
                    model=name,
                    content=[TextPart(text=reply)],
                    usage=Usage(input_tokens=10, output_tokens=5),
                )
            return reply
        raise last or UpstreamError("no targets")
