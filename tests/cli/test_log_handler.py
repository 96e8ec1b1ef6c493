"""The CLI's log handler: one write per event-loop turn, the standard line format, nothing lost."""

from __future__ import annotations

import asyncio
import io
import logging

import pytest

from switchyard.cli.log_handler import FORMAT, Formatter, TurnBatchingHandler


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)


@pytest.fixture
def handler() -> TurnBatchingHandler:
    h = TurnBatchingHandler(CountingStream())
    h.setFormatter(Formatter(FORMAT))
    return h


def _logger(name: str, handler: logging.Handler) -> logging.Logger:
    log = logging.getLogger(name)
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.INFO)
    return log


def test_formatter_writes_what_the_standard_one_writes() -> None:
    record = logging.LogRecord("switchyard.x", logging.INFO, __file__, 1, "hello %s", ("you",), None)
    assert Formatter(FORMAT).format(record) == logging.Formatter(FORMAT).format(record)
    record.created += 1.5  # another second: the cached stamp moves on
    record.msecs = 500.0
    assert Formatter(FORMAT).format(record) == logging.Formatter(FORMAT).format(record)


def test_lines_of_one_loop_turn_leave_in_one_write_in_order(handler: TurnBatchingHandler) -> None:
    handler.linger_s = 0  # to the end of the turn
    log = _logger("tlh.turn", handler)
    stream = handler.stream

    async def main() -> tuple[int, int]:
        for i in range(5):
            log.info("line %d", i)
        before = stream.writes  # nothing written yet: the turn is not over
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return before, stream.writes

    before, after = asyncio.run(main())
    assert (before, after) == (0, 1)
    lines = stream.getvalue().splitlines()
    assert [line.rsplit(": ", 1)[1] for line in lines] == [f"line {i}" for i in range(5)]


def test_lines_linger_then_leave_in_one_write(handler: TurnBatchingHandler) -> None:
    log = _logger("tlh.linger", handler)
    stream = handler.stream
    due: list[tuple[float, object]] = []

    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        loop.call_later = lambda delay, callback, *args: due.append((delay, callback))  # type: ignore[method-assign,assignment,misc,return-value]
        for i in range(6):
            log.info("line %d", i)
            if i % 2:
                await asyncio.sleep(0)  # other loop turns: still one write due
        before = stream.writes
        assert len(due) == 1
        due[0][1]()  # type: ignore[operator]  # the timer fires
        return before, stream.writes

    assert asyncio.run(main()) == (0, 1)
    assert due[0][0] == handler.linger_s > 0
    assert [line.rsplit(": ", 1)[1] for line in stream.getvalue().splitlines()] == [f"line {i}" for i in range(6)]


def test_lines_left_by_a_stopped_loop_go_before_the_next_ones(handler: TurnBatchingHandler) -> None:
    handler.linger_s = 3600.0  # the timer never fires here: the loop stops first
    log = _logger("tlh.stopped", handler)

    async def first() -> None:
        log.info("from the first loop")

    async def second() -> str:
        log.info("from the second loop")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return handler.stream.getvalue()

    asyncio.run(first())
    assert handler.stream.writes == 0
    handler.linger_s = 0
    text = asyncio.run(second())  # the first loop's line goes as soon as another comes; this one at its turn's end
    assert text.index("first loop") < text.index("second loop")


def test_outside_a_loop_each_line_is_written_at_once(handler: TurnBatchingHandler) -> None:
    log = _logger("tlh.plain", handler)
    log.info("one")
    assert handler.stream.getvalue().endswith("INFO tlh.plain: one\n")
    assert handler.stream.writes == 1


def test_flush_writes_what_is_pending(handler: TurnBatchingHandler) -> None:
    log = _logger("tlh.flush", handler)

    async def main() -> str:
        log.info("pending")
        handler.flush()  # what logging.shutdown() does at exit
        return handler.stream.getvalue()

    assert asyncio.run(main()).endswith("pending\n")


def test_a_full_buffer_is_written_early() -> None:
    h = TurnBatchingHandler(CountingStream(), max_pending=100)
    h.setFormatter(Formatter(FORMAT))
    log = _logger("tlh.full", h)

    async def main() -> int:
        for _ in range(10):
            log.info("x" * 40)
        return h.stream.writes

    assert asyncio.run(main()) >= 3


def test_direct_lines_match_formatted_records_and_keep_their_order() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    h = TurnBatchingHandler(CountingStream(), linger_s=0)
    h.setFormatter(Formatter(FORMAT))
    root.handlers[:] = [h]
    root.setLevel(logging.INFO)
    log = logging.getLogger("tlh.direct.child")
    try:

        async def main() -> bool:
            log.info("first")
            took = h.write_direct(log, logging.INFO, '{"a":1}')
            log.info("third")
            await asyncio.sleep(0)
            return took

        assert asyncio.run(main()) is True
        lines = h.stream.getvalue().splitlines()
        assert [line.split(" ", 2)[2] for line in lines] == [
            "INFO tlh.direct.child: first",
            'INFO tlh.direct.child: {"a":1}',
            "INFO tlh.direct.child: third",
        ]
        assert h.stream.writes == 1
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def test_direct_lines_give_way_to_filters_other_handlers_and_formats() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    h = TurnBatchingHandler(CountingStream())
    h.setFormatter(Formatter(FORMAT))
    root.handlers[:] = [h]
    log = logging.getLogger("tlh.refuse")
    try:

        async def took() -> bool:
            return h.write_direct(log, logging.INFO, "m")

        assert asyncio.run(took()) is True
        log.addFilter(lambda r: True)
        assert asyncio.run(took()) is False
        log.filters.clear()
        extra = logging.NullHandler()
        log.addHandler(extra)
        assert asyncio.run(took()) is False
        log.removeHandler(extra)
        h.setFormatter(Formatter("%(message)s"))
        assert asyncio.run(took()) is False
        h.setFormatter(Formatter(FORMAT))
        assert h.write_direct(log, logging.INFO, "outside a loop") is False
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
