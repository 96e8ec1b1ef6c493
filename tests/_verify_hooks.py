"""Verification hooks that tests name by import path (``_verify_hooks:<name>``)."""

from __future__ import annotations

from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse


def no_todo(request: ChatRequest, response: ChatResponse) -> bool | str:
    """Rejects answers that leave a TODO behind."""
    return "TODO left in the answer" if "TODO" in response.text else True


async def approve_async(request: ChatRequest, response: ChatResponse) -> bool:
    """A coroutine hook that approves everything."""
    return True


def broken(request: ChatRequest, response: ChatResponse) -> bool:
    """A hook that raises."""
    raise RuntimeError("hook bug")


NOT_CALLABLE = 42
