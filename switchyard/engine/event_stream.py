"""The streamed answer the engine hands out: IR events plus the bookkeeping at its end.

Layer: ``engine``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from switchyard.clients.retry import classify
from switchyard.engine.markup import MarkupScanner, first_marker, flag_leak
from switchyard.engine.records import DecisionRecord
from switchyard.engine.target import Target
from switchyard.protocol.errors import ErrorInfo, UpstreamError, UpstreamTimeoutError
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.stream import (
    MessageStart,
    ReasoningDelta,
    StreamAccumulator,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
    merge_usage,
)
from switchyard.wire.text_run import TextRun
from switchyard.wire.tokens import CHARS_PER_TOKEN

if TYPE_CHECKING:
    from switchyard.engine.health import Health
    from switchyard.protocol.call import CallOptions
    from switchyard.protocol.request import ChatRequest

logger = logging.getLogger("switchyard.engine")


class EventStream:
    """The answer as IR stream events, opened on the first candidate that accepted it.

    Iterate it for events; ``record`` is complete once the stream is exhausted or closed.
    An upstream failure after the first event ends the stream with a :class:`StreamError` —
    never a clean finish — marks the record (``details["mid_stream_failure"]``) and calls
    ``on_failure(blame)`` (the engine counts it and, when ``blame`` — not for a deadline the
    caller chose — tells the target's circuit breaker); ``on_end`` is
    called once with ``True`` when the stream ended cleanly, ``False`` when the consumer stopped
    reading first (the breaker hears of a stream's success only at its end). With
    ``on_markup``, text deltas are checked for leaked reasoning/tool-call markup as they pass
    (:mod:`switchyard.engine.markup`) and the first find is reported.
    """

    def __init__(
        self,
        first: Sequence[StreamEvent | TextRun],
        rest: AsyncIterator[StreamEvent | TextRun] | None,
        record: DecisionRecord,
        target: Target,
        finalize: Callable[[DecisionRecord], None],
        t0: float,
        on_failure: Callable[[bool], None] | None = None,
        on_markup: Callable[[str], None] | None = None,
        on_end: Callable[[bool], None] | None = None,
        prompt_tokens: Callable[[], int] | None = None,
    ) -> None:
        self.record = record
        self.target = target.info.name
        self._price = target.info.price
        self._first = first
        self._rest = rest
        self._finalize = finalize
        self._t0 = t0
        self._on_failure = on_failure
        self._on_markup = on_markup
        self._on_end = on_end
        self._scanner = MarkupScanner() if on_markup is not None else None
        self._failed = False
        self._blamed = False
        self._complete = False
        self._usage = Usage()
        self._chars = 0  # characters of output streamed so far (text, reasoning, tool calls)
        self._usage_seen = False
        self._prompt_tokens = prompt_tokens
        self._closed = False
        self._interrupted = False
        self._holding = False  # ``hold_record``: the finished record waits for ``release``
        self._held: DecisionRecord | None = None
        self._gen = self._run()

    def hold_record(self) -> Callable[[], None]:
        """Keeps the finished record from the sinks until the returned callable is called (a
        server calls it after the stream's last byte is sent: :attr:`Reply.release
        <switchyard.engine.reply.Reply.release>`); called before the stream ends, the record
        goes out at the end as usual."""
        self._holding = True
        return self._release

    def _release(self) -> None:
        self._holding = False
        record, self._held = self._held, None
        if record is not None:
            self._finalize(record)

    def __aiter__(self) -> EventStream:
        return self

    def __anext__(self) -> Awaitable[StreamEvent]:
        # The generator's own awaitable, not a coroutine wrapping it: one frame less per event.
        # (A TextRun comes only from a backend opened with ``open_stream_runs``, which only the
        # engine's own Chat replies do: a stream handed to users yields IR events alone.)
        return self._gen.__anext__()  # type: ignore[return-value]

    async def _run(self) -> AsyncGenerator[StreamEvent | TextRun, None]:
        try:
            for event in self._first:
                self._observe(event)
                yield event
            if self._rest is not None:
                try:
                    async for event in self._rest:
                        if type(event) is TextDelta and self._scanner is None:
                            self._chars += len(event.text)  # ``_observe``'s commonest case, inline
                        else:
                            self._observe(event)
                        yield event
                except UpstreamError as exc:
                    info = exc.info()
                    self.record.details["mid_stream_error_class"] = classify(exc).value
                    # A deadline the caller chose is no failure of the target: its breaker is
                    # not told (the attempt is released instead, see ``_done``).
                    self._fail(info, blame=not (isinstance(exc, UpstreamTimeoutError) and exc.caller_limit))
                    yield StreamError(error=info)
                except Exception as exc:  # a bug must not look like a clean finish either
                    logger.exception("stream of target %r failed", self.target)
                    info = ErrorInfo(status=500, type="api_error", message=f"stream failed: {type(exc).__name__}")
                    self._fail(info)
                    yield StreamError(error=info)
            self._complete = True
        finally:
            await self._close_rest()
            self._done()

    def _observe(self, event: StreamEvent | TextRun) -> None:
        kind = type(event)  # exact types: this runs once per event
        if kind is TextDelta:
            self._text(event.text)  # type: ignore[union-attr]
        elif kind is TextRun:
            texts: list[str] = event.texts  # type: ignore[union-attr]
            scanner = self._scanner
            if scanner is None or not (scanner.carries or "<" in "".join(texts)):
                self._chars += sum(map(len, texts))  # what the scan of each text would see: nothing
            else:
                for text in texts:
                    self._text(text)
        elif kind is UsageDelta:
            self._usage = merge_usage(self._usage, event.usage)  # type: ignore[union-attr]
            self._usage_seen = True
        elif kind is ReasoningDelta:
            self._chars += len(event.text)  # type: ignore[union-attr]
        elif kind is ToolCallDelta:
            self._chars += len(event.name or "") + len(event.arguments or "")  # type: ignore[union-attr]
        elif kind is StreamError:
            self._fail(event.error)  # type: ignore[union-attr]

    def _text(self, text: str) -> None:
        self._chars += len(text)
        if self._scanner is not None:
            marker = self._scanner.feed(text)
            if marker is not None:
                self._scanner = None  # one report per stream
                assert self._on_markup is not None
                self._on_markup(marker)

    def _fail(self, error: ErrorInfo, *, blame: bool = True) -> None:
        self.record.error = error.message
        self.record.status = error.status
        self.record.details["mid_stream_failure"] = True
        if not self._failed:
            self._failed = True
            self._blamed = blame
            if self._on_failure is not None:
                self._on_failure(blame)

    async def _close_rest(self) -> None:
        rest, self._rest = self._rest, None
        aclose = getattr(rest, "aclose", None)
        if aclose is not None:
            await aclose()

    def _done(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._complete and not self._failed and not self._interrupted:
            # The consumer stopped reading (a caller that disconnected, or aclose()): recorded
            # as a cancelled request, like a caller leaving before the answer (499).
            self.record.details["closed_early"] = True
            self.record.status = 499
            self.record.error = "cancelled: the caller stopped reading the stream"
        if self._on_end is not None and not (self._failed and self._blamed):
            self._on_end(self._complete and not self._failed)
        # Trusted as reported when the stream ended cleanly with a usage report; estimated when it
        # was cut short, or when the upstream never reported usage at all.
        reported = self._complete and not self._failed and self._usage_seen
        usage = self._usage if reported else self._estimated()
        self.record.set_usage(usage)
        self.record.cost_usd = self._price.cost(usage)
        self.record.duration_ms = (time.perf_counter() - self._t0) * 1000
        if self._holding:
            self._held = self.record
        else:
            self._finalize(self.record)

    def _estimated(self) -> Usage:
        """The usage of a stream that ended before its final usage report (the caller left, the
        upstream broke off, a shutdown) or had none: what the upstream reported so far, raised to what it
        visibly generated — four streamed characters per output token, and the prompt estimate
        when no input count came — so a stream cut short is charged, not free. The estimated
        fields are listed in ``details["usage_estimated"]``."""
        usage = self._usage
        estimated: list[str] = []
        output = -(-self._chars // CHARS_PER_TOKEN)
        if output > usage.output_tokens:
            usage = usage.model_copy(update={"output_tokens": output})
            estimated.append("output_tokens")
        if usage.input_tokens == 0 and self._prompt_tokens is not None:
            usage = usage.model_copy(update={"input_tokens": self._prompt_tokens()})
            estimated.append("input_tokens")
        if estimated:
            self.record.details["usage_estimated"] = estimated
        return usage

    def interrupt(self, error: ErrorInfo) -> None:
        """Marks the record for a stream the server ends itself (a shutdown past its drain
        time): not the upstream's failure, not the caller's cancellation. Call before closing."""
        self._interrupted = True
        self.record.status = error.status
        self.record.error = error.message
        self.record.details["interrupted"] = error.code or error.type

    async def aclose(self) -> None:
        """Stops the stream early (closes the upstream connection) and writes the record."""
        await self._gen.aclose()
        await self._close_rest()
        self._done()

    async def collect(self) -> ChatResponse:
        """Drains the stream into a complete response."""
        acc = StreamAccumulator()
        async for event in self._gen:
            if isinstance(event, TextRun):
                for text in event.texts:
                    acc.add(TextDelta(text=text))
            else:
                acc.add(event)
        return acc.response()


async def open_first(
    health: Health, request: ChatRequest, record: DecisionRecord, runs: bool, target: Target, options: CallOptions
) -> tuple[AsyncIterator[Any], list[Any]]:
    """Opens ``request``'s stream on ``target`` and reads its first content: a fallback stays
    possible until then, nothing having reached the caller. With ``runs``, through the backend's
    ``open_stream_runs`` where it has one; a leak of reasoning/tool-call markup in the first
    events is flagged (and, under ``markup_leak: fallback``, fails the attempt)."""
    open_stream = (getattr(target.backend, "open_stream_runs", None) if runs else None) or target.backend.open_stream
    events = await open_stream(request, target.info, options)
    try:
        first = await first_content(events)
        if not first:
            raise UpstreamError(f"{target.info.name}: upstream stream was empty", target=target.info.name)
        if target.reliability.markup_leak == "fallback":
            marker = first_marker(first)
            if marker is not None:
                flag_leak(health, target, marker, record, replaceable=True)
    except BaseException:
        await aclose_events(events)
        raise
    return events, first


async def first_content(events: AsyncIterator[StreamEvent | TextRun]) -> list[StreamEvent | TextRun]:
    """Reads events up to and including the first one that carries content or ends the turn."""
    got: list[StreamEvent | TextRun] = []
    async for event in events:
        got.append(event)
        if isinstance(event, StreamError):
            # An in-band error before anything reached the caller is a failed attempt.
            raise UpstreamError(event.error.message or "upstream stream failed", status=event.error.status)
        if not isinstance(event, UsageDelta | MessageStart):
            return got
    return got


async def aclose_events(events: AsyncIterator[StreamEvent] | None) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()
