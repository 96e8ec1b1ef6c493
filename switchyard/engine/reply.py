"""What the engine hands back to the proxy and the in-process transport.

Layer: ``engine``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass(slots=True)
class Reply:
    """An HTTP-shaped answer: status, headers and either a body or a byte stream.

    Attributes:
        status: HTTP status.
        headers: Response headers (lower-case names).
        body: The whole body for JSON answers.
        stream: SSE bytes for streaming answers, one element per event group as it is due.
    """

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None

    @property
    def is_stream(self) -> bool:
        """Whether the answer is streamed."""
        return self.stream is not None
