"""Reading an upstream's model list (``GET {base_url}/models``), e.g. vLLM's served ``max_model_len``.

Layer: ``clients`` — synchronous on purpose: it runs once while a router is being built, before
any event loop serves traffic, and is bounded by a short timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import httpx


class ModelListError(Exception):
    """The model list could not be read; the message says why (for a log line)."""


def fetch_models(
    base_url: str,
    *,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 2.0,
    transport: httpx.BaseTransport | None = None,
) -> list[dict[str, Any]]:
    """The ``data`` entries of ``GET {base_url}/models`` (OpenAI shape; vLLM adds ``max_model_len``).

    Args:
        base_url: Root URL of an OpenAI-compatible API (``http://host:8000/v1``).
        api_key: Sent as ``Authorization: Bearer`` when given.
        headers: Extra headers (the client's configured ones).
        timeout_s: Limit for connecting and for reading the answer, each.
        transport: An ``httpx`` transport to use instead of the network (tests).

    Raises:
        ModelListError: Unreachable, an HTTP error status, or not a model list.
    """
    import httpx  # only when a router asks for the list, not at start-up

    url = base_url.rstrip("/") + "/models"
    sent = {"accept": "application/json", **dict(headers or {})}
    if api_key:
        sent["authorization"] = f"Bearer {api_key}"
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout_s), transport=transport, follow_redirects=False) as client:
            resp = client.get(url, headers=sent)
    except httpx.HTTPError as exc:
        raise ModelListError(f"GET {url} failed: {type(exc).__name__}: {exc}") from exc
    if resp.status_code >= 400:
        raise ModelListError(f"GET {url} answered HTTP {resp.status_code}")
    return parse_model_list(resp.content, url)


def parse_model_list(content: bytes, url: str = "the model list") -> list[dict[str, Any]]:
    """The ``data`` entries of a ``/models`` answer body.

    Raises:
        ModelListError: Not JSON, or not an OpenAI-shaped model list.
    """
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raise ModelListError(f"GET {url} did not answer JSON") from exc
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ModelListError(f"GET {url} did not answer a model list")
    return [entry for entry in data if isinstance(entry, dict)]


_WINDOW_KEYS = ("max_model_len", "context_window", "context_length", "max_input_tokens")


def served_window(entries: list[dict[str, Any]], model: str) -> int | None:
    """The context window a model list reports for ``model``.

    The entry is matched on ``id``, then on ``root`` (vLLM's checkpoint name); the window is read
    from vLLM's ``max_model_len`` or the ``context_window``/``context_length``/``max_input_tokens``
    other servers use. ``None`` when the list does not say.
    """
    for key in ("id", "root"):
        for entry in entries:
            if entry.get(key) == model:
                for field in _WINDOW_KEYS:
                    value = entry.get(field)
                    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                        return value
                return None
    return None


__all__ = ["ModelListError", "fetch_models", "parse_model_list", "served_window"]
