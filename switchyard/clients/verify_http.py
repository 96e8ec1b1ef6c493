"""The ``http`` verification check: an endpoint that judges an answer (``verify:`` on a route).

Layer: ``clients`` — the one place that imports ``httpx``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse


def http_check(url: str, timeout_s: float) -> Callable[[ChatRequest, ChatResponse], Awaitable[Any]]:
    """A check that POSTs ``{"request": …, "response": …}`` (IR JSON) to ``url``.

    The endpoint answers ``{"pass": true}`` or ``{"pass": false, "reason": "…"}``; anything
    else (another status, another shape) raises, which the engine counts as the check's
    ``on_error``.
    """

    async def check(request: ChatRequest, response: ChatResponse) -> Any:
        payload = {"request": request.model_dump(mode="json"), "response": response.model_dump(mode="json")}
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            reply = await client.post(url, json=payload)
        reply.raise_for_status()
        verdict = reply.json()
        if not isinstance(verdict, dict) or not isinstance(verdict.get("pass"), bool):
            raise ValueError(f"{url} answered {str(verdict)[:80]!r}, not {{'pass': bool, 'reason': str}}")
        if verdict["pass"]:
            return True
        return str(verdict.get("reason") or f"{url} rejected the answer")

    return check
