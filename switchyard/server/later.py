"""Decision records handed to their sinks while the server waits, not while a caller does.

Layer: ``server``.

A proxied answer's record goes to the sinks (the decision log, the metrics, the USD ledger,
``on_decision`` callbacks) after the answer's last byte is written. Run right there, those
~30 µs sit on the next request's path whenever it arrives sooner: an agent, or a load test at
c=1, sends its next call within microseconds of reading the answer. So the server keeps the
released replies here, and hands their records out

* when the next proxied request first waits (its upstream call, usually): :meth:`soon`;
* before anything that reads what the sinks hold — ``/metrics``, ``/v1/stats``, the dashboard,
  a budget check: :meth:`flush`;
* at the latest :data:`IDLE_S` after the first was kept, when no request comes (a timer);
* at shutdown.

A reply is kept before its caller can send anything after it: a JSON answer right after its
last write, a stream as its body's end is written (before the stream's own clean-up, which may
wait). So the next request on the same connection is admitted only after the record of the one
before is here, and a budget check flushes it first: a keep-alive client cannot outrun its
daily budget.

Records keep their order; none is dropped (a sink that raises is logged, as
``Engine.emit`` logs it, and the rest still run).
"""

from __future__ import annotations

import asyncio
import logging

from switchyard.engine.reply import Reply

logger = logging.getLogger("switchyard.server")

IDLE_S = 0.005
"""The longest a kept record waits when no request comes to hand it out."""


class LaterRecords:
    """Released replies whose records go to the sinks at the next quiet moment (see the module)."""

    __slots__ = ("_soon", "_timer", "pending")

    def __init__(self) -> None:
        self.pending: list[Reply] = []
        # The loops a hand-out is due in: one that has closed since (an app served again under
        # another loop, in tests) has none due, and a new one is set in the running loop.
        self._timer: asyncio.AbstractEventLoop | None = None
        self._soon: asyncio.AbstractEventLoop | None = None

    def keep(self, reply: Reply | None) -> None:
        """Keeps ``reply`` for a later :meth:`flush` when its record is still held (a reply
        without a held record has nothing to hand out)."""
        if reply is None or reply.release is None:
            return
        if reply.stream is not None and any(kept is reply for kept in self.pending):
            return  # a stream is kept as its last byte is written, and again when its request ends
        self.pending.append(reply)
        loop = asyncio.get_running_loop()
        if self._timer is not loop:
            self._timer = loop
            loop.call_later(IDLE_S, self._idle)

    def soon(self) -> None:
        """Hands the kept records out at the loop's next turn: called as a request starts, that
        is when the request first waits (nothing it does before can read them)."""
        if self.pending:
            loop = asyncio.get_running_loop()
            if self._soon is not loop:
                self._soon = loop
                loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hands every kept record to the sinks now, in the order kept."""
        self._soon = None
        pending = self.pending
        if not pending:
            return
        self.pending = []
        for reply in pending:
            try:
                reply.released()
            except Exception:  # one broken sink must not lose the other records
                logger.exception("decision sink failed")

    def _idle(self) -> None:
        self._timer = None
        self.flush()
