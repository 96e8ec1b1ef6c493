"""``Deadline``: ``asyncio.timeout`` semantics at a lower cost (clients/http_parts.py)."""

from __future__ import annotations

import asyncio

import pytest

from switchyard.clients.http_parts import Deadline


def test_time_up_raises_timeout_error() -> None:
    async def main() -> bool:
        d = Deadline(0.01)
        with pytest.raises(TimeoutError):
            async with d:
                await asyncio.Event().wait()
        return d.expired()

    assert asyncio.run(main()) is True


def test_none_never_expires_and_a_quick_block_is_untouched() -> None:
    async def main() -> tuple[int, bool, int]:
        async with Deadline(None):
            await asyncio.sleep(0)
        d = Deadline(30)
        async with d:
            await asyncio.sleep(0)
        task = asyncio.current_task()
        assert task is not None
        return 1, d.expired(), task.cancelling()

    assert asyncio.run(main()) == (1, False, 0)


def test_a_cancel_from_outside_stays_a_cancel() -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def inner() -> None:
            async with Deadline(30):
                started.set()
                await asyncio.Event().wait()

        task = asyncio.ensure_future(inner())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_nested_the_inner_one_fires_the_outer_one_does_not() -> None:
    async def main() -> str:
        async with Deadline(30) as outer:
            with pytest.raises(TimeoutError):
                async with Deadline(0.01):
                    await asyncio.Event().wait()
            await asyncio.sleep(0)
        return f"outer expired: {outer.expired()}"

    assert asyncio.run(main()) == "outer expired: False"


def test_a_deadline_given_its_task_needs_no_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> bool:
        task = asyncio.current_task()
        assert task is not None

        def no_lookup(loop: object = None) -> None:
            raise AssertionError("looked the task up")

        monkeypatch.setattr(asyncio, "current_task", no_lookup)
        d = Deadline(0.01, task)
        with pytest.raises(TimeoutError):
            async with d:
                await asyncio.Event().wait()
        monkeypatch.undo()
        return d.expired()

    assert asyncio.run(main()) is True
