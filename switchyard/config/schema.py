"""The YAML config as pydantic models.

Layer: ``config`` — imports ``protocol``, ``routers`` (specs) and ``engine``.

Routes are validated in a second pass (see :mod:`switchyard.config.load`) because their keys
depend on their ``type``; here they are kept as plain mappings.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from switchyard.config.server import ServerConfig
from switchyard.protocol.targets import Price
from switchyard.routers.restrict import clean_labels

ClientFormat = Literal["openai_chat", "anthropic_messages", "openai_responses", "litellm", "system_one"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class TimeoutConfig(_Strict):
    """Upstream time limits in seconds.

    Attributes:
        connect: Establishing the connection.
        read: Longest silence between bytes of the answer.
        total: Whole request, first byte to last (``null``: no limit).
    """

    connect: PositiveFloat = 10.0
    read: PositiveFloat = 300.0
    total: PositiveFloat | None = 900.0


class RetryConfig(_Strict):
    """Backoff between retries of one target (``llm_clients.<name>.retry``).

    Attributes:
        initial_delay_s: Backoff before the first retry (before jitter).
        max_delay_s: Cap on the backoff.
        multiplier: Growth of the backoff per retry.
        jitter: Fraction of each backoff taken off at random (0: none; 1: "full jitter").
        max_retry_after_s: Longest ``Retry-After`` (or rate-limit reset) honoured by sleeping;
            a longer one makes the engine fall back at once instead.
    """

    initial_delay_s: NonNegativeFloat = 0.25
    max_delay_s: NonNegativeFloat = 2.0
    multiplier: float = Field(default=2.0, ge=1.0)
    jitter: float = Field(default=0.5, ge=0.0, le=1.0)
    max_retry_after_s: NonNegativeFloat = 10.0

    @model_validator(mode="after")
    def _order(self) -> RetryConfig:
        if self.max_delay_s < self.initial_delay_s:
            raise ValueError(
                f"max_delay_s ({self.max_delay_s}) must not be below initial_delay_s ({self.initial_delay_s})"
            )
        return self


class CircuitBreakerConfig(_Strict):
    """Per-target circuit breaker (``llm_clients.<name>.circuit_breaker``).

    Attributes:
        failures: Consecutive failed attempts (5xx, 429, timeouts, connection/protocol errors,
            mid-stream failures) that open the breaker; 0 turns it off.
        cooldown_s: How long an open breaker skips the target before one probe request.
        max_cooldown_s: Cap on a cooldown an upstream asks for with a long ``Retry-After``.
    """

    failures: NonNegativeInt = 5
    cooldown_s: PositiveFloat = 30.0
    max_cooldown_s: PositiveFloat = 600.0


class HealthCheckConfig(_Strict):
    """Probing the upstream's health endpoint (``llm_clients.<name>.health_check``).

    Attributes:
        enabled: Probe at all; ``false`` reports the backend as ``not_probed`` and never takes
            it out of routing.
        path: Health endpoint: a path under the server root (the ``base_url`` without ``/v1``;
            vLLM serves ``/health`` there) or an absolute URL. Default: ``/health``, falling
            back to ``/models`` when the server has no such endpoint (Chat upstreams), or
            ``/models`` (Anthropic and Responses upstreams).
        interval_s: Probe in the background this often (seconds, at least 1). Default: only on
            ``GET /health?deep=1``.
        timeout_s: Longest a probe may take.
    """

    enabled: bool = True
    path: str | None = None
    interval_s: float | None = Field(default=None, ge=1.0)
    timeout_s: float = Field(default=1.0, gt=0.0, le=30.0)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("/", "http://", "https://")):
            raise ValueError(f"must start with '/' (a path under the server root) or be an http(s) URL, got {value!r}")
        return value

    @field_validator("timeout_s")
    @classmethod
    def _timeout_below_interval(cls, value: float, info: ValidationInfo) -> float:
        interval = info.data.get("interval_s")
        if interval is not None and value >= interval:
            raise ValueError(f"must be below interval_s ({interval:g}), got {value:g}")
        return value


MarkupLeakMode = Literal["off", "flag", "fallback"]


class LlmClientConfig(_Strict):
    """An upstream API endpoint (``llm_clients.<name>``).

    Attributes:
        format: Wire format the upstream speaks, ``litellm`` (any provider LiteLLM knows), or
            ``system_one`` (a decision model's typed-choice API, asked only by
            ``decision_model`` routes; see docs/decision-model.md).
        base_url: Root URL (e.g. ``http://localhost:8000/v1``); optional for ``litellm``.
        api_key_env: Name of the environment variable holding the API key.
        headers: Extra headers on every request (no auth headers: use ``api_key_env``).
        timeout: Time limits.
        max_connections: Connection-pool size.
        max_response_bytes: Largest answer body read from this upstream: a JSON answer's
            whole body, and a compressed (gzip/deflate) body's decoded size, streamed or not.
            Past it the attempt fails as a protocol error and the next candidate is tried (a
            32 KiB gzip bomb never becomes 32 MiB in memory).
        max_retries: Extra attempts on the same target after a retryable failure (429, 408,
            5xx, timeouts, connection errors) before falling back.
        retry: Backoff between those attempts.
        circuit_breaker: Skips a failing target for a while.
        discover_context_window: On a context-window overflow, read the window of targets that
            do not set ``context_window`` from the upstream's ``GET /models`` (vLLM's
            ``max_model_len``), once, bounded to 2 s.
        health_check: Probing the upstream's health endpoint (``GET /health?deep=1``, and in
            the background with ``interval_s``); a backend found down is skipped by routing.
        markup_leak: What an answer with ``</think>`` or tool-call XML in its text does (Chat
            upstreams only; default ``flag``): ``off``, ``flag`` (passed on, target flagged
            degraded and counted) or ``fallback`` (also a failure: next candidate).
        litellm_params: Extra keyword arguments for ``litellm.acompletion`` (``format: litellm``
            only), e.g. ``aws_region_name`` or ``vertex_project``.
    """

    format: ClientFormat = "openai_chat"
    base_url: str | None = Field(default=None, validate_default=True)
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: TimeoutConfig = Field(default_factory=TimeoutConfig)
    max_connections: PositiveInt = 256
    max_response_bytes: PositiveInt = 16 * 1024 * 1024
    max_retries: int = Field(default=2, ge=0, le=10)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    circuit_breaker: CircuitBreakerConfig = Field(default_factory=CircuitBreakerConfig)
    discover_context_window: bool = True
    health_check: HealthCheckConfig = Field(default_factory=HealthCheckConfig)
    markup_leak: MarkupLeakMode | None = None
    litellm_params: dict[str, Any] = Field(default_factory=dict, validate_default=True)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            if info.data.get("format", "openai_chat") != "litellm":
                raise ValueError("required key is missing (only format 'litellm' may leave it out)")
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an absolute http(s) URL, got {value!r}")
        return value

    @field_validator("litellm_params")
    @classmethod
    def _litellm_only(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if value and info.data.get("format") != "litellm":
            raise ValueError("only allowed with format 'litellm'")
        return value

    @field_validator("markup_leak", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare ``off`` as false (and ``on`` as true).
        if value is False:
            return "off"
        if value is True:
            return "flag"
        return value

    @field_validator("markup_leak")
    @classmethod
    def _chat_only(cls, value: str | None, info: ValidationInfo) -> str | None:
        fmt = info.data.get("format", "openai_chat")
        if value not in (None, "off") and fmt != "openai_chat":
            raise ValueError(
                f"only Chat-format upstreams (format 'openai_chat', e.g. vLLM) return raw model markup; "
                f"format {fmt!r} is never checked"
            )
        return value

    @field_validator("health_check")
    @classmethod
    def _probe_able(cls, value: HealthCheckConfig, info: ValidationInfo) -> HealthCheckConfig:
        if info.data.get("format") == "litellm" and value.enabled and (value.path or value.interval_s):
            raise ValueError("'litellm' clients have no health endpoint to probe; set enabled: false or remove it")
        return value

    @field_validator("headers")
    @classmethod
    def _no_auth(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key.lower() in ("authorization", "x-api-key", "api-key"):
                raise ValueError(f"header {key!r} carries a secret: set api_key_env instead")
        return value


class TargetConfig(_Strict):
    """A model on an upstream (``targets.<name>``).

    Attributes:
        client: Name of the ``llm_clients`` entry.
        model: Model id sent upstream.
        price: USD per million tokens.
        extra_body: Fields merged into every request body (request keys win).
        context_window: Tokens the model accepts (when unset and ``probe_context_window`` is on,
            the served ``max_model_len`` is read from the upstream's ``/v1/models`` at start-up).
        preset: The named preset whose defaults were applied under these keys (see
            :mod:`switchyard.config.presets`; keys set here win).
        probe_context_window: Read the served context window from ``GET /v1/models`` when the
            router starts (never during ``switchyard validate``); a failure is a logged warning.
        max_output_tokens: Most tokens the model may generate in one answer; a request asking
            for more is clamped to it (with a diagnostic) instead of being rejected upstream.
        labels: What the target is (``onprem``, ``eu``, ``zero-retention`` …); a request that
            requires labels (header ``x-switchyard-require``, the key's ``require_labels``, a
            route's ``restrict:``) is served only by targets carrying all of them.
    """

    client: str
    model: str = Field(min_length=1)
    price: Price = Field(default_factory=Price)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    context_window: PositiveInt | None = None
    preset: str | None = None
    probe_context_window: bool = False
    max_output_tokens: PositiveInt | None = None
    labels: list[str] = Field(default_factory=list)

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        return clean_labels(value)


class StateConfig(_Strict):
    """Where per-session router state lives.

    Attributes:
        backend: ``memory`` (one process) or ``redis`` (shared by replicas).
        url: Redis URL for the ``redis`` backend.
        ttl_s: Idle lifetime of a session's state.
        max_entries: Bound on sessions kept by the ``memory`` backend (and by the ``redis``
            backend's per-process copy used while Redis is unreachable).
        prefix: Namespace of every Redis key (``<prefix><route>:<session>:<slot>``).
        timeout_s: Longest wait for one Redis operation before the request goes on with this
            process's own copy of the state (degraded mode, see docs/deployment.md).
        retry_interval_s: While degraded, how often Redis is pinged to resume.
    """

    backend: Literal["memory", "redis"] = "memory"
    url: str | None = None
    ttl_s: PositiveFloat = 3600.0
    max_entries: PositiveInt = 100_000
    prefix: str = "switchyard:"
    timeout_s: PositiveFloat = 0.25
    retry_interval_s: PositiveFloat = 2.0


class FeaturePriceConfig(_Strict):
    """What a learned router's feature extraction (probe, kNN) costs.

    Attributes:
        usd_per_call: Per extraction (an embeddings API's price for one request …).
        usd_per_second: Per second of extraction time (the feature server's hourly cost / 3600).
    """

    usd_per_call: NonNegativeFloat = 0.0
    usd_per_second: NonNegativeFloat = 0.0


class AccountingConfig(_Strict):
    """Live USD accounting (``/v1/stats``, metrics, ``switchyard stats``).

    Attributes:
        feature_extraction: Price of feature extraction (judge calls are priced by their target).
        baseline: Per route, the target whose price is the "always this model" baseline for
            savings; routes with two tiers default to their capable target.
    """

    feature_extraction: FeaturePriceConfig = Field(default_factory=FeaturePriceConfig)
    baseline: dict[str, str] = Field(default_factory=dict)


class TelemetryConfig(_Strict):
    """Tracing.

    Attributes:
        otel: Emit OpenTelemetry spans (GenAI semantic conventions) for every request to the
            global tracer provider; needs the ``otel`` extra. See docs/deployment.md.
    """

    otel: bool = False


class SessionConfig(_Strict):
    """How sessions are identified beyond the headers.

    Attributes:
        hash_first_message: Derive a session id from the first user message when the caller
            sent none.
        derive: When the caller sent no session identity (and ``hash_first_message`` is off),
            key the session by a hash of the conversation's opening (leading system text and
            first user message); the decision record says ``session_source: derived``.
    """

    hash_first_message: bool = False
    derive: bool = True


class FeedbackConfig(_Strict):
    """Reports of how sessions ended (``POST /v1/feedback``, docs/rollout.md).

    Attributes:
        enabled: Accept reports and index every decision so that a report can be matched to it.
            Unset: on when the config has a ``feedback:`` section or a route has an
            ``experiment:`` block, off otherwise (then no decision is indexed and a report is
            refused with 404 ``feedback_off``).
        max_entries: Reports kept by the ``memory`` state backend (least recently written
            evicted first); the ``redis`` backend keeps them for ``state.ttl_s``.
        index_entries: Decisions (request and session ids) the ``memory`` backend remembers so
            that a report can be matched to them.
    """

    enabled: bool | None = None
    max_entries: PositiveInt = 10_000
    index_entries: PositiveInt = 50_000


class SwitchyardConfig(_Strict):
    """The whole config file."""

    llm_clients: dict[str, LlmClientConfig] = Field(default_factory=dict)
    targets: dict[str, TargetConfig] = Field(default_factory=dict)
    # Values are checked per route ``type`` in load.py (which reports a non-mapping route once).
    routes: dict[str, Any] = Field(default_factory=dict)
    default_route: str | None = None
    state: StateConfig = Field(default_factory=StateConfig)
    session: SessionConfig = Field(default_factory=SessionConfig)
    accounting: AccountingConfig = Field(default_factory=AccountingConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    feedback: FeedbackConfig = Field(default_factory=FeedbackConfig)
    decision_log: str | None = None
    # What a reply's ``model`` says: the requested id (default) or the upstream's (see
    # switchyard.engine.reply_model; a route's own ``reply_model`` wins).
    reply_model: Literal["requested", "upstream"] = "requested"
    server: ServerConfig = Field(default_factory=ServerConfig)
