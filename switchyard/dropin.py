"""Drop-in SDK clients that route in-process: the real ``openai`` and ``anthropic`` clients, no
server, no port.

Layer: ``dropin`` — imports ``transport`` and ``api``; the SDKs are imported lazily.

Example:
    >>> client = switchyard.OpenAI(config="router.yaml")
    >>> client.chat.completions.create(model="agent", messages=[...])
    >>> client.responses.create(model="agent", input="hi")
    >>> claude = switchyard.Anthropic(config="router.yaml")
    >>> claude.messages.create(model="agent", max_tokens=512, messages=[...])

The SDK's own retries are turned off (``max_retries=0``): the engine owns retries and
fallback, so attempts never multiply.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from switchyard.api import Switchyard
from switchyard.transport import async_transport, family_of, sync_transport

_BASE_URL = "http://switchyard.in-process/v1"
_ANTHROPIC_BASE_URL = "http://switchyard.in-process"  # the Anthropic SDK appends /v1 itself


def _switchyard(config: str | Path | Mapping[str, Any] | Switchyard | None, sy: Switchyard | None) -> Switchyard:
    if sy is not None:
        return sy
    if isinstance(config, Switchyard):
        return config
    if config is None:
        raise TypeError("pass config= (a YAML path or dict) or switchyard= (a Switchyard instance)")
    return Switchyard.from_config(config)


def _client(sdk: str, cls_name: str, is_async: bool, sy: Switchyard, base_url: str, kwargs: dict[str, Any]) -> Any:
    module = importlib.import_module(sdk)
    family = family_of(sdk)
    http = importlib.import_module(family)
    transport = async_transport(sy, family) if is_async else sync_transport(sy, family)
    http_client = (http.AsyncClient if is_async else http.Client)(transport=transport, timeout=None)
    kwargs.setdefault("api_key", "switchyard-in-process")
    kwargs.setdefault("base_url", base_url)
    kwargs["max_retries"] = 0
    client = getattr(module, cls_name)(http_client=http_client, **kwargs)
    client.switchyard = sy
    # Outcomes in (docs/rollout.md): client.switchyard_feedback(session_id=..., resolved=True).
    client.switchyard_feedback = sy.feedback if is_async else sy.feedback_sync
    return client


def OpenAI(
    config: str | Path | Mapping[str, Any] | Switchyard | None = None,
    *,
    switchyard: Switchyard | None = None,
    **kwargs: Any,
) -> Any:
    """A real ``openai.OpenAI`` client whose requests are routed in-process.

    Args:
        config: YAML path or dict (or a :class:`Switchyard`).
        switchyard: An existing :class:`Switchyard` to share (routes, sessions, decision log).
        **kwargs: Passed to ``openai.OpenAI`` (``max_retries`` is always 0).

    Returns:
        ``openai.OpenAI``; its ``.switchyard`` attribute is the router behind it, and
        ``.switchyard_feedback(session_id=..., resolved=...)`` reports how a session ended
        (:meth:`Switchyard.feedback <switchyard.api.Switchyard.feedback>`; a coroutine on the
        async clients).
    """
    return _client("openai", "OpenAI", False, _switchyard(config, switchyard), _BASE_URL, dict(kwargs))


def AsyncOpenAI(
    config: str | Path | Mapping[str, Any] | Switchyard | None = None,
    *,
    switchyard: Switchyard | None = None,
    **kwargs: Any,
) -> Any:
    """A real ``openai.AsyncOpenAI`` client whose requests are routed in-process (see :func:`OpenAI`)."""
    return _client("openai", "AsyncOpenAI", True, _switchyard(config, switchyard), _BASE_URL, dict(kwargs))


def Anthropic(
    config: str | Path | Mapping[str, Any] | Switchyard | None = None,
    *,
    switchyard: Switchyard | None = None,
    **kwargs: Any,
) -> Any:
    """A real ``anthropic.Anthropic`` client whose requests are routed in-process.

    ``messages.create``, ``messages.stream`` and ``messages.count_tokens`` (also the
    ``beta`` variants) reach the engine; any route works, whatever its upstreams speak.

    Args:
        config: YAML path or dict (or a :class:`Switchyard`).
        switchyard: An existing :class:`Switchyard` to share (routes, sessions, decision log).
        **kwargs: Passed to ``anthropic.Anthropic`` (``max_retries`` is always 0).

    Returns:
        ``anthropic.Anthropic``; its ``.switchyard`` attribute is the router behind it, and
        ``.switchyard_feedback(...)`` reports outcomes (see :func:`OpenAI`).
    """
    sy = _switchyard(config, switchyard)
    return _client("anthropic", "Anthropic", False, sy, _ANTHROPIC_BASE_URL, dict(kwargs))


def AsyncAnthropic(
    config: str | Path | Mapping[str, Any] | Switchyard | None = None,
    *,
    switchyard: Switchyard | None = None,
    **kwargs: Any,
) -> Any:
    """A real ``anthropic.AsyncAnthropic`` client routed in-process (see :func:`Anthropic`)."""
    sy = _switchyard(config, switchyard)
    return _client("anthropic", "AsyncAnthropic", True, sy, _ANTHROPIC_BASE_URL, dict(kwargs))
