"""The YAML config as pydantic models.

Layer: ``config`` — imports ``protocol``, ``routers`` (specs) and ``engine``.

Routes are validated in a second pass (see :mod:`switchyard.config.load`) because their keys
depend on their ``type``; here they are kept as plain mappings.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator

from switchyard.protocol.targets import Price

ClientFormat = Literal["openai_chat", "anthropic_messages", "openai_responses", "litellm"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


class LlmClientConfig(_Strict):
    """An upstream API endpoint (``llm_clients.<name>``).

    Attributes:
        format: Wire format the upstream speaks.
        base_url: Root URL (e.g. ``http://localhost:8000/v1``).
        api_key_env: Name of the environment variable holding the API key.
        headers: Extra headers on every request (no auth headers: use ``api_key_env``).
        timeout: Time limits.
        max_connections: Connection-pool size.
    """

    format: ClientFormat = "openai_chat"
    base_url: str
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: TimeoutConfig = Field(default_factory=TimeoutConfig)
    max_connections: PositiveInt = 256

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an absolute http(s) URL, got {value!r}")
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
        context_window: Tokens the model accepts.
        preset: A named preset whose defaults apply under these keys.
    """

    client: str
    model: str = Field(min_length=1)
    price: Price = Field(default_factory=Price)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    context_window: PositiveInt | None = None
    preset: str | None = None


class StateConfig(_Strict):
    """Where per-session router state lives.

    Attributes:
        backend: ``memory`` (one process) or ``redis`` (shared by replicas).
        url: Redis URL for the ``redis`` backend.
        ttl_s: Idle lifetime of a session's state.
        max_entries: Bound on sessions kept by the ``memory`` backend.
    """

    backend: Literal["memory", "redis"] = "memory"
    url: str | None = None
    ttl_s: PositiveFloat = 3600.0
    max_entries: PositiveInt = 100_000


class SessionConfig(_Strict):
    """How sessions are identified beyond the headers.

    Attributes:
        hash_first_message: Derive a session id from the first user message when the caller
            sent none.
    """

    hash_first_message: bool = False


class SwitchyardConfig(_Strict):
    """The whole config file."""

    llm_clients: dict[str, LlmClientConfig] = Field(default_factory=dict)
    targets: dict[str, TargetConfig] = Field(default_factory=dict)
    # Values are checked per route ``type`` in load.py (which reports a non-mapping route once).
    routes: dict[str, Any] = Field(default_factory=dict)
    default_route: str | None = None
    state: StateConfig = Field(default_factory=StateConfig)
    session: SessionConfig = Field(default_factory=SessionConfig)
    decision_log: str | None = None
