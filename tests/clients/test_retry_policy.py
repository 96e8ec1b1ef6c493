"""The error-class table, Retry-After parsing and the backoff policy (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from switchyard.clients.errors import overflow_limit, status_error
from switchyard.clients.retry import (
    ERROR_TABLE,
    ErrorClass,
    RetryPolicy,
    classify,
    judge,
    retry_after_s,
    rule_for,
    should_retry,
)
from switchyard.protocol.errors import (
    ContextWindowExceededError,
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.wire import codec
from switchyard.wire.base import WireFormat

NOW = 1_800_000_000.0
CHAT = codec(WireFormat.OPENAI_CHAT)


def status(code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> UpstreamStatusError:
    return status_error(CHAT, code, body, headers or {}, target="t")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (status(429), ErrorClass.RATE_LIMITED),
        (status(408), ErrorClass.TIMEOUT),
        (status(504), ErrorClass.TIMEOUT),
        (UpstreamTimeoutError("read timeout"), ErrorClass.TIMEOUT),
        (status(500), ErrorClass.SERVER_ERROR),
        (status(502, b"<html><body>Bad Gateway</body></html>"), ErrorClass.SERVER_ERROR),
        (status(503), ErrorClass.SERVER_ERROR),
        (status(529), ErrorClass.SERVER_ERROR),
        (UpstreamConnectionError("refused"), ErrorClass.CONNECTION),
        (UpstreamProtocolError("bad json"), ErrorClass.PROTOCOL),
        (UpstreamError("upstream stream was empty"), ErrorClass.PROTOCOL),
        (UpstreamError("in-band", status=429), ErrorClass.RATE_LIMITED),
        (UpstreamError("in-band", status=400), ErrorClass.CLIENT_ERROR),
        (status(401), ErrorClass.AUTH),
        (status(403), ErrorClass.AUTH),
        (status(400, b'{"error": {"message": "temperature must be <= 2"}}'), ErrorClass.CLIENT_ERROR),
        (status(404), ErrorClass.CLIENT_ERROR),
        (status(422), ErrorClass.CLIENT_ERROR),
    ],
)
def test_classify(error: UpstreamError, expected: ErrorClass) -> None:
    assert classify(error) is expected


@pytest.mark.parametrize(
    "body",
    [
        b'{"error": {"message": "bad", "code": "context_length_exceeded"}}',
        b'{"error": {"message": "This model\'s maximum context length is 4096 tokens. However, you requested 9000"}}',
        b'{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: '
        b'215000 tokens > 200000 maximum"}}',
        b'{"object": "error", "message": "The decoder prompt (length 9000) is longer than the maximum model length'
        b' of 4096.", "code": 400}',
    ],
)
def test_context_overflow_wordings(body: bytes) -> None:
    error = status(400, body)
    assert isinstance(error, ContextWindowExceededError)
    assert classify(error) is ErrorClass.CONTEXT_OVERFLOW
    assert rule_for(error).fallback == "larger_window" and not should_retry(error)


@pytest.mark.parametrize(
    ("message", "limit"),
    [
        ("This model's maximum context length is 4096 tokens. However, you requested 9000 tokens.", 4096),
        ("prompt is too long: 215000 tokens > 200000 maximum", 200000),
        ("The decoder prompt (length 9000) is longer than the maximum model length of 32768.", 32768),
        ("The input (9000 tokens) is longer than the model's context length (8192 tokens).", 8192),
        ("context window exceeded", None),
    ],
)
def test_overflow_limit(message: str, limit: int | None) -> None:
    assert overflow_limit(message) == limit


def test_table_rows() -> None:
    rows = {r.error_class: r for r in ERROR_TABLE}
    assert set(rows) == set(ErrorClass)
    retried = {c for c, r in rows.items() if r.retry}
    assert retried == {ErrorClass.RATE_LIMITED, ErrorClass.TIMEOUT, ErrorClass.SERVER_ERROR, ErrorClass.CONNECTION}
    assert rows[ErrorClass.AUTH].fallback == "if_route_allows"
    assert rows[ErrorClass.CLIENT_ERROR].fallback == "never"
    assert not rows[ErrorClass.CLIENT_ERROR].trips_breaker and not rows[ErrorClass.AUTH].trips_breaker


def test_docs_table_matches_code() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
    text = doc.read_text(encoding="utf-8")
    for rule in ERROR_TABLE:
        line = next((ln for ln in text.splitlines() if ln.startswith(f"| `{rule.error_class.value}`")), None)
        assert line is not None, f"docs/reliability.md lacks the row {rule.error_class.value}"
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2] == ("yes" if rule.retry else "no"), line
        assert cells[3].startswith(f"`{rule.fallback}`"), line
        assert cells[4] == ("yes" if rule.trips_breaker else "no"), line


# -- Retry-After and rate-limit headers -------------------------------------------------------


def test_retry_after_seconds_and_ms() -> None:
    assert retry_after_s({"Retry-After": "3"}) == 3.0
    assert retry_after_s({"retry-after": "0.5"}) == 0.5
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({"retry-after": "-1"}) is None
    assert retry_after_s({}) is None


def test_retry_after_http_date() -> None:
    when = datetime.fromtimestamp(NOW, UTC) + timedelta(seconds=30)
    assert retry_after_s({"retry-after": format_datetime(when, usegmt=True)}, now=NOW) == pytest.approx(30)
    past = datetime.fromtimestamp(NOW, UTC) - timedelta(seconds=30)
    assert retry_after_s({"retry-after": format_datetime(past, usegmt=True)}, now=NOW) == 0.0


def test_openai_ratelimit_reset_picks_the_exhausted_limit() -> None:
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1.5s",
        "x-ratelimit-remaining-tokens": "12000",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert retry_after_s(headers) == 1.5
    headers["x-ratelimit-remaining-requests"] = "3"
    # Neither says it is exhausted: wait for the longer one.
    assert retry_after_s(headers) == 360.0


@pytest.mark.parametrize(("text", "seconds"), [("20ms", 0.02), ("1h2m3.5s", 3723.5), ("7", 7.0)])
def test_openai_duration_formats(text: str, seconds: float) -> None:
    assert retry_after_s({"x-ratelimit-reset-tokens": text}) == pytest.approx(seconds)


def test_anthropic_ratelimit_reset() -> None:
    reset = datetime.fromtimestamp(NOW + 12, UTC).isoformat().replace("+00:00", "Z")
    later = datetime.fromtimestamp(NOW + 50, UTC).isoformat()
    headers = {
        "anthropic-ratelimit-requests-remaining": "10",
        "anthropic-ratelimit-requests-reset": later,
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": reset,
    }
    assert retry_after_s(headers, now=NOW) == pytest.approx(12)


def test_generic_ratelimit_reset_seconds_or_epoch() -> None:
    assert retry_after_s({"x-ratelimit-reset": "4"}, now=NOW) == 4
    assert retry_after_s({"x-ratelimit-reset": str(int(NOW + 9))}, now=NOW) == pytest.approx(9)


# -- backoff -----------------------------------------------------------------------------------


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=10, initial_delay_s=0.25, max_delay_s=2.0, multiplier=2.0, jitter=0.0)
    assert [policy.delay(i) for i in range(5)] == [0.25, 0.5, 1.0, 2.0, 2.0]


def test_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(max_retries=3, initial_delay_s=1.0, jitter=0.5)
    assert policy.delay(0, rng=lambda: 0.0) == 1.0
    assert policy.delay(0, rng=lambda: 0.999) == pytest.approx(0.5005)
    full = RetryPolicy(max_retries=3, initial_delay_s=1.0, jitter=1.0)
    assert full.delay(0, rng=lambda: 0.999) == pytest.approx(0.001)


def test_retry_after_wins_until_the_cap() -> None:
    policy = RetryPolicy(max_retries=2, initial_delay_s=0.25, max_retry_after_s=10.0)
    assert policy.delay(0, retry_after=3.0) == 3.0
    assert policy.delay(0, retry_after=10.0) == 10.0
    # Retry-After: 3600 means "fall back now", not "sleep an hour".
    assert policy.delay(0, retry_after=3600.0) is None


def test_attempt_budget() -> None:
    policy = RetryPolicy(max_retries=1, jitter=0.0)
    assert policy.delay(0) is not None
    assert policy.delay(1) is None
    assert RetryPolicy(max_retries=0).delay(0) is None


def test_judge_uses_the_upstreams_headers() -> None:
    policy = RetryPolicy(max_retries=2, max_retry_after_s=5)
    verdict = judge(status(429, b"", {"retry-after": "2"}), 0, policy)
    assert verdict.rule.error_class is ErrorClass.RATE_LIMITED and verdict.wait_s == 2 and verdict.retry_after_s == 2
    long = judge(status(429, b"", {"retry-after": "3600"}), 0, policy)
    assert long.wait_s is None and long.retry_after_s == 3600
    assert judge(status(401), 0, policy).wait_s is None
    assert judge(status(503), 2, policy).wait_s is None  # the budget is spent
