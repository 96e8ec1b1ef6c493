"""The I/O shapes routers and the engine depend on, without any implementation.

Layer: ``protocol`` — imports nothing of ours.

* :class:`ModelCall` is what a router awaits when it needs a model (a judge, a weak-first
  answer): the engine serves it, with fallback over the given targets, and records the cost.
* :class:`ModelBackend` is what the engine awaits to reach an upstream; ``switchyard.clients``
  implements it over HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol

from switchyard._dataclass import dataclass
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import StreamEvent
from switchyard.protocol.targets import TargetInfo


class ModelCall(Protocol):
    """Calls a model on behalf of a router.

    ``targets`` is one target name or an ordered list tried in turn. The returned response is
    complete (never a stream). Raises :class:`~switchyard.protocol.errors.UpstreamError` when
    every target failed.
    """

    async def __call__(self, targets: str | Sequence[str], request: ChatRequest) -> ChatResponse: ...


@dataclass(slots=True)
class CallOptions:
    """Per-call extras the engine hands to a backend.

    Attributes:
        raw_body: The caller's original JSON body when it may be replayed verbatim (same wire
            format as the upstream and no router rewrote the request).
        raw_format: Wire format of ``raw_body``.
        headers: Caller headers worth forwarding (e.g. ``anthropic-beta``).
        timeout: Per-request overrides (``connect``/``read``/``total`` seconds).
        deadline: ``time.monotonic()`` by which the whole request must be done (streams
            included); a backend caps its own ``total`` so as not to outlive it.
    """

    raw_body: dict[str, Any] | None = None
    raw_format: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: Mapping[str, float] | None = None
    deadline: float | None = None


class ModelBackend(Protocol):
    """An upstream that can answer chat requests for its targets."""

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        """Returns the complete answer, or raises an ``UpstreamError``."""
        ...

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        """Sends the request and returns its event stream once the upstream has accepted it.

        Errors before the upstream accepted the request (connection, status) are raised here;
        errors after that are raised by the iterator (or reported as ``StreamError``).
        """
        ...

    async def aclose(self) -> None:
        """Releases connections."""
        ...
