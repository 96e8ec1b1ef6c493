"""The fault-injection matrix: every injected upstream fault, JSON and SSE, through the proxy.

Shared by ``tests/integration/test_fault_matrix.py`` (which asserts each expectation) and
``benchmarks/fault_matrix.py`` (which prints the results table of ``docs/reliability.md``).

Each scenario routes to a primary target that suffers one fault, with a healthy ``backup``
behind it. The config uses small limits so the whole matrix runs in seconds: ``read`` 0.3 s,
``total`` 2 s, one retry per target after 50 ms, ``Retry-After`` honoured up to 1 s, circuit
breakers off (they are tested on their own). The client is the real ``openai`` SDK with its own
retries off, so every attempt seen is the engine's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any, Literal

from switchyard._dataclass import dataclass

Outcome = Literal["served", "fallback", "error", "stream_error"]
Mode = Literal["json", "sse"]

READ_S = 0.3
TOTAL_S = 2.0
STALL_S = 5.0
RETRY_AFTER = "0.2"
RATELIMIT_RESET = "200ms"
BACKUP = "backup"


@dataclass(frozen=True, slots=True)
class Expect:
    """What a scenario must produce in one mode.

    Attributes:
        outcome: ``served`` (by the primary), ``fallback`` (by another target), ``error`` (an
            HTTP error to the caller) or ``stream_error`` (the stream ended with an error event).
        attempts: Targets of the attempts, in order (from the decision record).
        status: The caller-visible HTTP status for ``error``.
        min_s: The caller waits at least this long (e.g. a ``Retry-After`` that must be
            honoured): load can only add to it.
        max_wait_s: The engine's own waits before its attempts (backoff, ``Retry-After``, as it
            chose them: the records' ``waited_ms``) add up to at most this.
        says: Words the error the caller gets must contain (e.g. which limit ended it).
        max_s: The caller waits at most this long: a guard against a hang, never a measure of
            speed (a busy machine stretches any elapsed time; what a fault must cost is in
            ``attempts``, ``max_wait_s`` and ``says``).
    """

    outcome: Outcome
    attempts: tuple[str, ...]
    status: int | None = None
    min_s: float = 0.0
    max_wait_s: float | None = None
    says: str = ""
    max_s: float = 8.0


@dataclass(frozen=True, slots=True)
class Scenario:
    """One injected fault and what must come of it.

    Attributes:
        key: Short id (also the route name).
        fault: The fault the primary suffers (a fake-upstream fault name, or ``refused``).
        error_class: The error-class table row it exercises.
        json: Expectation for a JSON request.
        sse: Expectation for a streamed request.
        route: Extra route keys.
        headers: Extra request headers.
        primary_window: ``context_window`` of the primary target.
        between: Targets tried between primary and backup, as ``(name, model, window)``.
    """

    key: str
    fault: str
    error_class: str
    json: Expect
    sse: Expect
    route: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    primary_window: int | None = None
    between: tuple[tuple[str, str, int | None], ...] = ()


def _same(expect: Expect) -> tuple[Expect, Expect]:
    return expect, expect


P = "primary"
_RETRIED = (P, P, BACKUP)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("rate_limit", "fail-429", "rate_limited", *_same(Expect("fallback", _RETRIED, min_s=0.2, max_wait_s=0.2))),
    Scenario("rate_limit_long", "fail-429-long", "rate_limited", *_same(Expect("fallback", (P, BACKUP), max_wait_s=0))),
    Scenario(
        "rate_limit_reset",
        "fail-429-reset",
        "rate_limited",
        *_same(Expect("fallback", _RETRIED, min_s=0.2, max_wait_s=0.2)),
    ),
    Scenario("http_408", "fail-408", "timeout", *_same(Expect("fallback", _RETRIED))),
    Scenario("http_504", "fail-504", "timeout", *_same(Expect("fallback", _RETRIED))),
    Scenario("stall_headers", "stall-headers", "timeout", *_same(Expect("fallback", _RETRIED, min_s=2 * READ_S))),
    Scenario("http_500", "fail-500", "server_error", *_same(Expect("fallback", _RETRIED))),
    Scenario("http_502_html", "fail-502-html", "server_error", *_same(Expect("fallback", _RETRIED))),
    Scenario("http_503", "fail-503", "server_error", *_same(Expect("fallback", _RETRIED))),
    Scenario("refused", "refused", "connection", *_same(Expect("fallback", _RETRIED))),
    Scenario(
        "reset_mid",
        "reset-mid",
        "connection",
        json=Expect("fallback", _RETRIED),
        sse=Expect("stream_error", (P,)),
    ),
    Scenario(
        "stall_mid",
        "stall-mid",
        "timeout",
        json=Expect("fallback", _RETRIED, min_s=2 * READ_S),
        sse=Expect("stream_error", (P,), min_s=READ_S),
    ),
    Scenario(
        "malformed",
        "malformed-sse",
        "protocol",
        json=Expect("fallback", (P, BACKUP)),
        sse=Expect("stream_error", (P,)),
    ),
    Scenario("empty", "empty-stream", "protocol", *_same(Expect("fallback", (P, BACKUP)))),
    Scenario(
        "overflow",
        "overflow-400",
        "context_overflow",
        *_same(Expect("fallback", (P, BACKUP))),
        primary_window=4096,
        between=(("same_window", "fake-same-window", 4096),),
    ),
    Scenario("auth_401", "fail-401", "auth", *_same(Expect("error", (P,), status=401, max_wait_s=0))),
    Scenario("auth_403", "fail-403", "auth", *_same(Expect("error", (P,), status=403, max_wait_s=0))),
    Scenario(
        "auth_fallback",
        "fail-401",
        "auth",
        *_same(Expect("fallback", (P, BACKUP), max_wait_s=0)),
        route={"fallback_on_auth_error": True},
    ),
    Scenario("bad_request", "fail-400", "client_error", *_same(Expect("error", (P,), status=400, max_wait_s=0))),
    Scenario("flaky", "flaky-1", "server_error", *_same(Expect("served", (P, P)))),
    Scenario(
        "deadline",
        "stall-headers",
        "timeout",
        *_same(Expect("error", (P,), status=504, min_s=0.2, says="request deadline")),
        headers={"x-switchyard-timeout": "0.2"},
    ),
)
"""The matrix; ``error_class`` names the row of the error-class table each scenario covers."""


def matrix_config(upstream_port: int, refused_base_url: str) -> dict[str, Any]:
    """The proxy config of the matrix (one route per scenario, named by its key)."""
    client = {
        "format": "openai_chat",
        "timeout": {"connect": 0.5, "read": READ_S, "total": TOTAL_S},
        "max_retries": 1,
        "retry": {"initial_delay_s": 0.05, "max_delay_s": 0.1, "jitter": 0.0, "max_retry_after_s": 1.0},
        "circuit_breaker": {"failures": 0},
        "discover_context_window": False,
    }
    clients = {
        "up": {**client, "base_url": f"http://127.0.0.1:{upstream_port}/v1"},
        "dead": {**client, "base_url": refused_base_url},
    }
    targets: dict[str, Any] = {BACKUP: {"client": "up", "model": "fake-backup", "context_window": 131072}}
    routes: dict[str, Any] = {}
    for sc in SCENARIOS:
        primary = f"{sc.key}_{P}"
        target: dict[str, Any] = {"client": "dead" if sc.fault == "refused" else "up", "model": sc.fault}
        if sc.primary_window:
            target["context_window"] = sc.primary_window
        targets[primary] = target
        middle = []
        for name, model, window in sc.between:
            targets[f"{sc.key}_{name}"] = {"client": "up", "model": model, "context_window": window}
            middle.append(f"{sc.key}_{name}")
        routes[sc.key] = {"type": "passthrough", "target": primary, "fallbacks": [*middle, BACKUP], **sc.route}
    return {"llm_clients": clients, "targets": targets, "routes": routes}


@dataclass(slots=True)
class Result:
    """What one run of a scenario produced."""

    scenario: Scenario
    mode: Mode
    outcome: Outcome
    served_by: str | None
    attempts: tuple[str, ...]
    classes: tuple[str | None, ...]
    skipped: tuple[str, ...]
    status: int | None
    message: str
    elapsed_s: float
    text: str = ""
    mid_stream_class: str | None = None
    waited_s: float = 0.0

    @property
    def expect(self) -> Expect:
        """The expectation for this mode."""
        return self.scenario.json if self.mode == "json" else self.scenario.sse

    def problems(self) -> list[str]:
        """Every way the result differs from the expectation (empty: as expected)."""
        e = self.expect
        out = []
        if self.outcome != e.outcome:
            out.append(f"outcome {self.outcome} != {e.outcome} ({self.message})")
        if self.attempts != e.attempts:
            out.append(f"attempts {self.attempts} != {e.attempts}")
        if e.status is not None and self.status != e.status:
            out.append(f"status {self.status} != {e.status}")
        if not e.min_s <= self.elapsed_s <= e.max_s:
            out.append(f"elapsed {self.elapsed_s:.3f}s outside [{e.min_s}, {e.max_s}]")
        if e.max_wait_s is not None and self.waited_s > e.max_wait_s:
            out.append(f"the engine waited {self.waited_s:.3f}s before its attempts (at most {e.max_wait_s:g})")
        if e.says and e.says not in self.message:
            out.append(f"error {self.message!r} does not say {e.says!r}")
        if self.outcome in ("served", "fallback") and not self.text:
            out.append("no answer text")
        return out


def _short(target: str | None, key: str) -> str | None:
    if target is None:
        return None
    return target[len(key) + 1 :] if target.startswith(key + "_") else target


def run_scenario(
    sc: Scenario,
    mode: Mode,
    base_url: str,
    record_for: Callable[[str], Any],
) -> Result:
    """Sends one request for ``sc`` through the proxy at ``base_url`` with the openai SDK.

    Args:
        sc: The scenario.
        mode: ``json`` or ``sse``.
        base_url: The proxy's ``/v1`` URL.
        record_for: Returns the decision record of a request id (waiting, bounded, for it).
    """
    import openai

    messages: Any = [{"role": "user", "content": f"{sc.key} {mode}"}]
    outcome: Outcome
    status: int | None = None
    message = ""
    text = ""
    request_id = ""
    with openai.OpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=10) as client:
        started = time.perf_counter()
        try:
            raw = client.chat.completions.with_raw_response.create(
                model=sc.key,
                messages=messages,
                stream=mode == "sse",
                extra_headers=sc.headers,
            )
            request_id = raw.headers.get("x-switchyard-request-id", "")
            selected = raw.headers.get("x-switchyard-selected-model")
            parsed: Any = raw.parse()
            if mode == "json":
                text = parsed.choices[0].message.content or ""
            else:
                try:
                    for chunk in parsed:
                        if chunk.choices:
                            text += chunk.choices[0].delta.content or ""
                except openai.APIError as exc:
                    outcome, message = "stream_error", exc.message
            outcome = "stream_error" if message else ("served" if selected == f"{sc.key}_{P}" else "fallback")
        except openai.APIStatusError as exc:
            outcome, status, message = "error", exc.status_code, exc.message
            request_id = exc.response.headers.get("x-switchyard-request-id", "")
        elapsed = time.perf_counter() - started
    record = record_for(request_id)
    return Result(
        sc,
        mode,
        outcome,
        _short(record.selected, sc.key),
        tuple(_short(a.target, sc.key) or "" for a in record.attempts),
        tuple(a.error_class for a in record.attempts),
        tuple(_short(s.target, sc.key) or "" for s in record.skipped),
        status,
        message,
        elapsed,
        text,
        record.details.get("mid_stream_error_class"),
        sum(a.waited_ms for a in record.attempts) / 1000,
    )


def markdown(results: Sequence[Result]) -> str:
    """The results as the markdown table of ``docs/reliability.md``."""
    lines = [
        "| Fault | Class | Mode | Outcome | Attempts (targets) | Status | Elapsed s | Waited s | Expected "
        "| As expected |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        e = r.expect
        fault = f"`{r.scenario.fault}`" + "".join(f" + `{k}: {v}`" for k, v in r.scenario.headers.items())
        if r.scenario.route:
            fault += "".join(f" + route `{k}: {json.dumps(v)}`" for k, v in r.scenario.route.items())
        skipped = f"; skipped {', '.join(r.skipped)}" if r.skipped else ""
        served = f" by {r.served_by}" if r.outcome in ("served", "fallback") else ""
        problems = r.problems()
        verdict = "yes" if not problems else "NO: " + "; ".join(problems)
        lines.append(
            f"| {fault} | {r.scenario.error_class} | {r.mode.upper()} | {r.outcome}{served} "
            f"| {' → '.join(r.attempts)}{skipped} | {r.status or ''} | {r.elapsed_s:.2f} "
            f"| {r.waited_s:.2f} | {_bounds(e)} | {verdict} |"
        )
    return "\n".join(lines)


def _bounds(e: Expect) -> str:
    """The time and wording an expectation asks for, for the table."""
    parts = [f"elapsed ≥ {e.min_s:g} s"] if e.min_s else []
    if e.max_wait_s is not None:
        parts.append(f"waits ≤ {e.max_wait_s:g} s")
    if e.says:
        parts.append(f"says “{e.says}”")
    return "; ".join(parts) or "—"


def fake_upstream() -> Any:
    """The fake upstream the matrix expects (short stalls, ``Retry-After: 0.2``, 200 ms resets)."""
    from switchyard.testing.fake_upstream import FakeUpstream

    return FakeUpstream(stall_s=STALL_S, retry_after=RETRY_AFTER, ratelimit_reset=RATELIMIT_RESET)
