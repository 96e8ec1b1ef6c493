"""Building a route's verification gate from its ``verify:`` block.

Layer: ``config`` — resolves hooks by import path and wires the HTTP check from ``clients``.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any

from switchyard.engine.verify import Check, Verifier, guarded, sync_check
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.routers.base import RouterSpec
from switchyard.routers.verify import VerifyCheck, check_regex, check_response_schema, check_tool_arguments


def verify_tiers(spec: RouterSpec) -> tuple[str | None, str | None]:
    """The ``(efficient, capable)`` targets of a route's ``verify:`` block (``None``: unknown)."""
    assert spec.verify is not None
    tiers = spec.tiers()
    efficient = spec.verify.efficient or (tiers["efficient"] if tiers else None)
    capable = spec.verify.capable or (tiers["capable"] if tiers else None)
    return efficient, capable


def build_verifier(spec: RouterSpec) -> Verifier | None:
    """The route's :class:`~switchyard.engine.verify.Verifier` (``None`` without ``verify:``).

    Raises:
        ValueError: A hook cannot be imported or is not callable (the message names the check).
    """
    if spec.verify is None:
        return None
    efficient, capable = verify_tiers(spec)
    assert efficient is not None and capable is not None  # the loader checked them
    checks = [(c.label, _check(i, c)) for i, c in enumerate(spec.verify.checks)]
    relevant = [_RELEVANT.get(c.type) for c in spec.verify.checks]
    return Verifier(spec.verify.mode, efficient, capable, checks, relevant)


def _structured(request: ChatRequest) -> bool:
    return (request.response_format or {}).get("type") in ("json_schema", "json_object")


_RELEVANT: dict[str, Callable[[ChatRequest], bool]] = {
    "tool_arguments": lambda request: bool(request.tools),
    "response_schema": _structured,
}
"""Checks that cannot fail for some requests: those requests are not held back for them."""


def _check(index: int, check: VerifyCheck) -> Check:
    if check.type == "tool_arguments":
        return sync_check(check_tool_arguments)
    if check.type == "response_schema":
        return sync_check(check_response_schema)
    if check.type == "regex":
        assert check.pattern is not None
        pattern, expect = re.compile(check.pattern), check.expect
        return sync_check(lambda _request, response: check_regex(pattern, expect, response))
    if check.type == "hook":
        assert check.callable is not None
        return guarded(check.label, _hook(index, check.callable), check.timeout_s, check.on_error)
    from switchyard.clients.verify_http import http_check

    assert check.url is not None
    return guarded(check.label, http_check(check.url, check.timeout_s), check.timeout_s, check.on_error)


def _hook(index: int, path: str) -> Callable[[ChatRequest, ChatResponse], Awaitable[Any]]:
    module_name, _, attr = path.partition(":")
    where = f"verify.checks[{index}].callable"
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{where}: cannot import {path!r}: {exc}") from exc
    if not callable(fn):
        raise ValueError(f"{where}: {path!r} is not callable")

    async def call(request: ChatRequest, response: ChatResponse) -> Any:
        result = fn(request, response)
        return await result if inspect.isawaitable(result) else result

    return call
