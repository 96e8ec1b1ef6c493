"""What a relayed stream tells its target's health: failures, markup leaks and how it ended.

Layer: ``engine``.
"""

from __future__ import annotations

from switchyard.engine.health import Health
from switchyard.engine.markup import flag_leak
from switchyard.engine.records import DecisionRecord
from switchyard.engine.target import Target


class StreamHealth:
    """The callbacks an :class:`~switchyard.engine.event_stream.EventStream` reports to.

    Args:
        health: The engine's reliability counters and breakers.
        target: The target serving the stream.
        record: The request's decision record.
    """

    def __init__(self, health: Health, target: Target, record: DecisionRecord) -> None:
        self.health = health
        self.target = target
        self.record = record
        self.leak_failed = False

    def failed_mid_stream(self, blame: bool) -> None:
        """The stream broke after its first event; ``blame`` is false for a caller's own deadline."""
        self.health.count("mid_stream_failures")
        if blame:
            self.health.failed(self.target.info.name, self.target.reliability.breaker)

    def leaked(self, marker: str) -> None:
        """Template markup showed up mid-stream (too late to fall back)."""
        flag_leak(self.health, self.target, marker, self.record, replaceable=False)
        if self.target.reliability.markup_leak == "fallback":
            self.leak_failed = True  # counted as a failure: the clean end is no success

    def ended(self, complete: bool) -> None:
        """The stream ended: complete, or cut off because the caller left."""
        name = self.target.info.name
        if complete and not self.leak_failed:
            self.health.succeeded(name)
        elif not complete:
            self.health.released(name)  # the caller left: says nothing about the upstream
            if self.record.status == 499:
                self.health.count("cancelled")
