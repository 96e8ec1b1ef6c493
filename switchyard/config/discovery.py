"""Start-up discovery: the served context window of each target, read from its upstream.

Layer: ``config`` — uses :mod:`switchyard.clients.models` for the one HTTP request per client.

Runs when a router is built (:class:`switchyard.api.Switchyard`), never during ``switchyard
validate``. Only targets with ``probe_context_window: true`` (the ``nemotron-3.5-lightning``
preset turns it on) and no configured ``context_window`` are probed. Every failure is one logged
warning; start-up goes on with the window unknown.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from switchyard.config.load import LoadedConfig
from switchyard.config.schema import LlmClientConfig
from switchyard.protocol.redact import redact_url, redact_urls

logger = logging.getLogger("switchyard.config")

Fetch = Callable[[LlmClientConfig, "str | None", float], list[dict[str, Any]]]
"""Reads one client's model list: ``(client config, api key, timeout) -> entries``."""

_OPENAI_FORMATS = ("openai_chat", "openai_responses")


def _fetch(cfg: LlmClientConfig, api_key: str | None, timeout_s: float) -> list[dict[str, Any]]:
    from switchyard.clients.models import fetch_models

    if cfg.base_url is None:
        return []
    return fetch_models(cfg.base_url, api_key=api_key, headers=cfg.headers, timeout_s=timeout_s)


def probe_context_windows(
    loaded: LoadedConfig,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 2.0,
    fetch: Fetch = _fetch,
) -> dict[str, int]:
    """Fills ``loaded.served_context_windows`` from the upstreams' ``/v1/models``.

    Args:
        loaded: A validated config.
        env: Environment for API keys (default ``os.environ``).
        timeout_s: Per-request limit (connect and read each).
        fetch: Reads one client's model list (tests inject fakes here).

    Returns:
        The windows found in this call, by target name. Never raises for upstream problems.
    """
    from switchyard.clients.models import served_window

    env = os.environ if env is None else env
    cfg = loaded.config
    wanted = [
        (name, t)
        for name, t in cfg.targets.items()
        if t.probe_context_window and t.context_window is None and name not in loaded.served_context_windows
    ]
    lists: dict[str, list[dict[str, Any]] | None] = {}
    found: dict[str, int] = {}
    for name, target in wanted:
        client = cfg.llm_clients.get(target.client)
        if client is None:
            continue
        if client.format not in _OPENAI_FORMATS:
            logger.warning(
                "targets.%s: probe_context_window needs an OpenAI-compatible upstream; client %r speaks %s",
                name,
                target.client,
                client.format,
            )
            continue
        if target.client not in lists:
            key = env.get(client.api_key_env) if client.api_key_env else None
            try:
                lists[target.client] = fetch(client, key, timeout_s)
            except Exception as exc:  # any failure must leave start-up alone
                logger.warning(
                    "targets.%s: could not read the served context window (%s); continuing without it",
                    name,
                    redact_urls(str(exc)),
                )
                lists[target.client] = None
        entries = lists[target.client]
        if entries is None:
            continue
        window = served_window(entries, target.model)
        if window is None:
            served = ", ".join(str(e.get("id")) for e in entries) or "none"
            logger.warning(
                "targets.%s: %s at %s reports no max_model_len for model %r (served: %s); context window unknown",
                name,
                target.client,
                redact_url(client.base_url or ""),
                target.model,
                served,
            )
            continue
        found[name] = window
        shown = redact_url(client.base_url or "")  # never credentials of the URL in a log line
        logger.info("targets.%s: served context window %d tokens (from %s/models)", name, window, shown)
    loaded.served_context_windows.update(found)
    return found


__all__ = ["probe_context_windows"]
