"""Upstream health probes: one bounded ``GET`` of a health endpoint, classified.

Layer: ``clients`` — HTTP through ``httpx``; the engine's monitor (:mod:`switchyard.engine.monitor`)
decides when to probe and what a result means for routing.

Which URL is probed (see ``docs/reliability.md``):

* ``health_check.path`` when configured: a path under the server root (the ``base_url`` without
  a trailing ``/v1``, where vLLM serves ``/health``), or an absolute URL;
* otherwise, for Chat upstreams, ``GET {root}/health`` (vLLM, SGLang, llama.cpp, TGI answer it),
  and when that endpoint does not exist (404/405), ``GET {base_url}/models`` — remembered, so
  later probes go there directly; for Anthropic and Responses upstreams ``GET …/models``
  (hosted APIs have no health endpoint).

A 2xx answer is ``up``; 401/403 is ``auth_error`` (the upstream is up, the key is not; the
request path returns that error with the provider's message, so the backend is not taken out);
429 is ``rate_limited`` (the upstream is up and answering — only throttling, which the request
path already handles with ``Retry-After`` and fallbacks — so it is not taken out either: a burst
of probes that the upstream throttles must not hold it out of service); anything else — another
status, a refused connection, a timeout — is ``down``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from switchyard._dataclass import dataclass
from switchyard.protocol.redact import redact_url, redact_urls

if TYPE_CHECKING:
    import httpx

ProbeState = Literal["up", "down", "auth_error", "rate_limited", "not_probed"]


@dataclass(frozen=True, slots=True)
class Probe:
    """The outcome of one health probe.

    Attributes:
        state: ``up``, ``down``, ``auth_error``, ``rate_limited`` (429: up, throttling) or
            ``not_probed`` (nothing to probe).
        status: The HTTP status, when one came back.
        url: The URL probed.
        latency_ms: How long the probe took.
        error: Why it is not ``up``.
    """

    state: ProbeState
    status: int | None = None
    url: str | None = None
    latency_ms: float | None = None
    error: str | None = None


def server_root(base_url: str) -> str:
    """The server root of an API base URL: ``http://h:8000/v1`` → ``http://h:8000``."""
    return base_url.rstrip("/").removesuffix("/v1")


def health_url(base_url: str, path: str) -> str:
    """Resolves a configured ``health_check.path`` against an API base URL."""
    if path.startswith(("http://", "https://")):
        return path
    return server_root(base_url) + path


async def probe_urls(
    client: httpx.AsyncClient,
    urls: Sequence[str],
    headers: Mapping[str, str],
    timeout_s: float,
) -> tuple[Probe, bool]:
    """Probes ``urls`` in order, moving on only when one does not exist (404/405).

    Returns:
        The probe, and whether the first URL was missing (so the caller can skip it next time).
    """
    import httpx  # loaded with the first probe, not at start-up

    missing_first = False
    started = time.perf_counter()
    probe = Probe("not_probed")
    for i, url in enumerate(urls):
        started = time.perf_counter()
        shown = redact_url(url)  # what /health and the log name: never credentials in the URL
        try:
            resp = await client.get(url, headers=dict(headers), timeout=httpx.Timeout(timeout_s))
        except httpx.TimeoutException:
            return Probe("down", url=shown, latency_ms=_ms(started), error=f"no answer within {timeout_s:g}s"), False
        except httpx.HTTPError as exc:
            error = redact_urls(f"{type(exc).__name__}: {exc}")
            return Probe("down", url=shown, latency_ms=_ms(started), error=error), False
        status = resp.status_code
        if status in (404, 405) and i + 1 < len(urls):
            missing_first = missing_first or i == 0
            continue
        probe = classify(status, shown, _ms(started))
        break
    return probe, missing_first


def classify(status: int, url: str, latency_ms: float | None = None) -> Probe:
    """A probe from the HTTP status of a health endpoint."""
    if 200 <= status < 300:
        return Probe("up", status, url, latency_ms)
    if status in (401, 403):
        return Probe("auth_error", status, url, latency_ms, f"HTTP {status}: the API key was refused")
    if status == 429:
        return Probe("rate_limited", status, url, latency_ms, "HTTP 429: the upstream is up but throttling")
    return Probe("down", status, url, latency_ms, f"HTTP {status}")


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


__all__ = ["Probe", "ProbeState", "classify", "health_url", "probe_urls", "server_root"]
