"""Building an :class:`~switchyard.engine.Engine` from a validated config.

Layer: ``config`` — the place where concrete clients, routers and stores are wired together.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from switchyard.clients.retry import RetryPolicy
from switchyard.config.experiment_check import experiment_baseline
from switchyard.config.load import ConfigError, ConfigIssue, LoadedConfig
from switchyard.config.schema import LlmClientConfig
from switchyard.config.verify_build import build_verifier
from switchyard.engine.accounting import Pricing, RouteTiers
from switchyard.engine.core import Engine, Route, Target
from switchyard.engine.experiment import Experiment
from switchyard.engine.fallback import Reliability
from switchyard.engine.feedback import FeedbackStore
from switchyard.engine.health import BreakerPolicy, Health, HealthCheckPolicy
from switchyard.engine.records import DecisionSink, JsonlSink, log_sink
from switchyard.engine.verify import Verifier
from switchyard.protocol.call import ModelBackend
from switchyard.protocol.features import FeatureError, FeatureExtractor
from switchyard.protocol.redact import redact_urls
from switchyard.protocol.session import StateStore
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import BuildContext, Router, RouterSpec
from switchyard.routers.restrict import RestrictPolicy
from switchyard.routers.subagent import build_router
from switchyard.wire import available_formats

BackendFactory = Callable[[str, LlmClientConfig, "str | None"], ModelBackend]
"""Makes the backend of one ``llm_clients`` entry: ``(name, config, api_key) -> backend``."""


def http_backend(name: str, cfg: LlmClientConfig, api_key: str | None) -> ModelBackend:
    """The default backend factory: an :class:`~switchyard.clients.HttpBackend`, or a
    :class:`~switchyard.clients.litellm_backend.LiteLLMBackend` for ``format: litellm``, or a
    :class:`~switchyard.clients.system_one.SystemOneBackend` for ``format: system_one``."""
    from switchyard.clients.backend import HttpBackend, Timeouts

    if cfg.format == "litellm":
        from switchyard.clients.litellm_backend import LiteLLMBackend

        return LiteLLMBackend(
            name,
            base_url=cfg.base_url,
            api_key=api_key,
            headers=cfg.headers,
            timeouts=Timeouts(cfg.timeout.connect, cfg.timeout.read, cfg.timeout.total),
            params=cfg.litellm_params,
        )
    assert cfg.base_url is not None  # the schema requires it for every HTTP format
    common: dict[str, Any] = {
        "api_key": api_key,
        "headers": cfg.headers,
        "timeouts": Timeouts(cfg.timeout.connect, cfg.timeout.read, cfg.timeout.total),
        "max_connections": cfg.max_connections,
        "max_response_bytes": cfg.max_response_bytes,
    }
    if cfg.format == "system_one":
        from switchyard.clients.system_one import SystemOneBackend

        return SystemOneBackend(name, cfg.base_url, **common)
    return HttpBackend(name, cfg.base_url, cfg.format, **common)


def format_problem(cfg: LlmClientConfig) -> str | None:
    """Why a client's ``format`` cannot be served by :func:`http_backend` here (``None``: it
    can) — the serving engine and ``switchyard eval``'s offline engine both ask."""
    if cfg.format == "litellm":
        if importlib.util.find_spec("litellm") is None:
            return "format 'litellm' needs LiteLLM: pip install 'switchyard-router[litellm]'"
        return None
    if cfg.format == "system_one" or cfg.format in available_formats():
        return None
    return f"format {cfg.format!r} is not available in this version; available: {', '.join(available_formats())}"


def reliability(cfg: LlmClientConfig) -> Reliability:
    """The retry and circuit-breaker settings of a client's targets."""
    r, b, h = cfg.retry, cfg.circuit_breaker, cfg.health_check
    return Reliability(
        retry=RetryPolicy(
            max_retries=cfg.max_retries,
            initial_delay_s=r.initial_delay_s,
            max_delay_s=r.max_delay_s,
            multiplier=r.multiplier,
            jitter=r.jitter,
            max_retry_after_s=r.max_retry_after_s,
        ),
        breaker=BreakerPolicy(failures=b.failures, cooldown_s=b.cooldown_s, max_cooldown_s=b.max_cooldown_s),
        discover_context_window=cfg.discover_context_window,
        health_check=HealthCheckPolicy(
            enabled=h.enabled and cfg.format != "litellm",
            path=h.path,
            interval_s=h.interval_s,
            timeout_s=h.timeout_s,
        ),
        # Only Chat upstreams (vLLM and friends) can leak raw markup; they are flagged by default.
        markup_leak=cfg.markup_leak or ("flag" if cfg.format == "openai_chat" else "off"),
    )


def target_infos(loaded: LoadedConfig) -> dict[str, TargetInfo]:
    """Every target as a :class:`TargetInfo`.

    ``context_window`` is the configured one, else the one read from the upstream at start-up
    (:func:`switchyard.config.discovery.probe_context_windows`), else ``None``.
    """
    cfg = loaded.config
    return {
        name: TargetInfo(
            name=name,
            model=t.model,
            client=t.client,
            format=cfg.llm_clients[t.client].format,
            price=t.price,
            extra_body=t.extra_body,
            context_window=t.context_window or loaded.served_context_windows.get(name),
            max_output_tokens=t.max_output_tokens,
            labels=frozenset(t.labels),
        )
        for name, t in cfg.targets.items()
    }


def _feature_factory(config: Any, config_dir: str | None) -> FeatureExtractor:
    from switchyard.features import build_extractor

    return build_extractor(config, config_dir)


def build_routes(loaded: LoadedConfig, infos: Mapping[str, TargetInfo]) -> dict[str, Route]:
    """Builds every route's router (each once, also when a cascade stage names it)."""
    built: dict[str, Router] = {}

    def router_of(name: str) -> Router:
        if name not in built:
            spec = loaded.routes[name]
            ctx = BuildContext(
                route=name,
                targets=infos,
                config_dir=str(loaded.base_dir),
                features=_feature_factory,
                router_of=router_of,
            )
            try:
                built[name] = build_router(spec, ctx)
            except (ValueError, OSError, FeatureError) as exc:
                raise ConfigError([ConfigIssue(f"routes.{name}", str(exc))], loaded.source) from exc
        return built[name]

    routes: dict[str, Route] = {}
    for name, spec in loaded.routes.items():
        routes[name] = Route(
            name=name,
            kind=spec.type,
            router=router_of(name),
            targets=tuple(spec.routable_targets()),
            fallbacks=tuple(spec.fallbacks),
            aliases=tuple(spec.aliases),
            description=spec.description,
            context_window=spec.context_window,
            stateful=spec.uses_session_state(),
            hash_session_fallback=spec.hashes_first_message(),
            fallback_on_auth_error=spec.fallback_on_auth_error,
            reply_model=spec.reply_model,
            restrict=RestrictPolicy(spec.restrict) if spec.restrict else None,
            auxiliary=tuple(dict.fromkeys(t for _, t in (*spec.checked_target_refs(), *spec.auxiliary_refs()))),
            verify=_verifier(loaded, name, spec),
            experiment=_experiment(spec),
        )
    return routes


def _experiment(spec: RouterSpec) -> Experiment | None:
    """The route's ``experiment:`` block, built (its baseline checked at load, config/experiment_check.py)."""
    block, baseline = spec.experiment, experiment_baseline(spec)
    if block is None or baseline is None:
        return None
    return Experiment(
        mode=block.mode,
        control_share=block.control_share,
        baseline=baseline,
        mirror_share=block.mirror_share,
        mirror_concurrency=block.mirror_concurrency,
    )


def _verifier(loaded: LoadedConfig, name: str, spec: RouterSpec) -> Verifier | None:
    try:
        return build_verifier(spec)
    except ValueError as exc:
        raise ConfigError([ConfigIssue(f"routes.{name}", str(exc))], loaded.source) from exc


def build_pricing(loaded: LoadedConfig) -> Pricing:
    """The record enricher for USD accounting (tiers, feature cost, always-capable baseline)."""
    cfg = loaded.config
    tiers: dict[str, RouteTiers] = {}
    for name, spec in loaded.routes.items():
        found = spec.tiers()
        capable, efficient = (found["capable"], found["efficient"]) if found is not None else (None, None)
        tiers[name] = RouteTiers(capable=cfg.accounting.baseline.get(name, capable), efficient=efficient)
    price = cfg.accounting.feature_extraction
    return Pricing(
        tiers=tiers,
        prices={name: t.price for name, t in cfg.targets.items()},
        feature_usd_per_call=price.usd_per_call,
        feature_usd_per_second=price.usd_per_second,
    )


def build_span_sink(loaded: LoadedConfig) -> DecisionSink | None:
    """The OpenTelemetry span sink when ``telemetry.otel`` is on (``None`` otherwise).

    Raises:
        ConfigError: ``telemetry.otel`` is on but opentelemetry-api is not installed.
    """
    cfg = loaded.config
    if not cfg.telemetry.otel:
        return None
    from urllib.parse import urlsplit

    from switchyard.engine.telemetry import SpanSink, TargetMeta, provider_name

    meta: dict[str, TargetMeta] = {}
    for name, target in cfg.targets.items():
        client = cfg.llm_clients.get(target.client)
        fmt = client.format if client is not None else "unknown"
        host = urlsplit(client.base_url).hostname if client is not None and client.base_url else None
        meta[name] = TargetMeta(model=target.model, provider=provider_name(fmt), address=host)
    try:
        return SpanSink(meta)
    except ImportError as exc:
        raise ConfigError(
            [ConfigIssue("telemetry.otel", "needs OpenTelemetry: pip install 'switchyard-router[otel]'")],
            loaded.source,
        ) from exc


def build_store(loaded: LoadedConfig) -> StateStore:
    """The session store the config asks for."""
    state = loaded.config.state
    if state.backend == "memory":
        from switchyard.state.memory import MemoryStore

        return MemoryStore(max_entries=state.max_entries, default_ttl_s=state.ttl_s)
    try:
        from switchyard.state.redis_store import RedisStore

        assert state.url is not None  # the schema requires it for this backend
        return RedisStore(
            state.url,
            prefix=state.prefix,
            default_ttl_s=state.ttl_s,
            timeout_s=state.timeout_s,
            retry_interval_s=state.retry_interval_s,
            max_entries=state.max_entries,
        )
    except ImportError as exc:
        raise ConfigError(
            [ConfigIssue("state.backend", "backend 'redis' needs redis-py: pip install 'switchyard-router[redis]'")],
            loaded.source,
        ) from exc
    except ValueError as exc:  # redis-py rejects a malformed URL
        # redis-py's message may quote the URL: never its password (docs/security.md).
        raise ConfigError([ConfigIssue("state.url", redact_urls(str(exc)))], loaded.source) from exc


def feedback_on(loaded: LoadedConfig) -> bool:
    """Whether reports are accepted and decisions indexed for them: ``feedback.enabled``, else
    on when the config has a ``feedback:`` section or a route has an ``experiment:`` block."""
    config = loaded.config
    if config.feedback.enabled is not None:
        return config.feedback.enabled
    return "feedback" in config.model_fields_set or any(s.experiment is not None for s in loaded.routes.values())


def build_feedback_store(loaded: LoadedConfig, store: StateStore) -> FeedbackStore:
    """The outcome reports' store over the router's state ``store`` (see :func:`feedback_on`)."""
    fb = loaded.config.feedback
    return FeedbackStore(
        store,
        ttl_s=loaded.config.state.ttl_s,
        max_entries=fb.max_entries,
        index_entries=fb.index_entries,
        enabled=feedback_on(loaded),
    )


def build_engine(
    loaded: LoadedConfig,
    *,
    sinks: Iterable[DecisionSink] = (),
    backend_factory: BackendFactory = http_backend,
    env: Mapping[str, str] | None = None,
    routes: Mapping[str, Route] | None = None,
    store: StateStore | None = None,
    health: Health | None = None,
) -> Engine:
    """Wires clients, targets, routers and the state store into an engine.

    Args:
        loaded: A validated config.
        sinks: Receivers of decision records besides the log (see :func:`decision_log_sink`).
        backend_factory: Makes backends (tests inject fakes here).
        env: Environment for API keys (default ``os.environ``).
        routes: Routes already built (to share routers between engines of one config).
        store: A state store to share (default: a new one as the config says).
        health: Circuit breakers and reliability counters to share (default: new ones).

    Raises:
        ConfigError: Something only detectable at build time (a missing API key, an
            unsupported format, a router that cannot start).
    """
    env = os.environ if env is None else env
    cfg = loaded.config
    issues: list[ConfigIssue] = []
    backends: dict[str, ModelBackend] = {}
    for name, client in cfg.llm_clients.items():
        problem = format_problem(client)
        if problem is not None:
            issues.append(ConfigIssue(f"llm_clients.{name}.format", problem))
            continue
        key: str | None = None
        if client.api_key_env:
            key = env.get(client.api_key_env)
            if not key:
                issues.append(
                    ConfigIssue(
                        f"llm_clients.{name}.api_key_env", f"environment variable {client.api_key_env} is not set"
                    )
                )
                continue
        backends[name] = backend_factory(name, client, key)
    if issues:
        raise ConfigError(issues, loaded.source)
    infos = target_infos(loaded)
    targets = {
        name: Target(info, backends[info.client], reliability(cfg.llm_clients[info.client]))
        for name, info in infos.items()
        if info.client in backends
    }
    built = dict(routes) if routes is not None else build_routes(loaded, infos)
    engine = Engine(
        built,
        targets,
        store=store if store is not None else build_store(loaded),
        sinks=[build_pricing(loaded), log_sink, *sinks],
        default_route=cfg.default_route,
        hash_session_fallback=cfg.session.hash_first_message,
        health=health,
    )
    engine.reply_model = cfg.reply_model
    engine.derive_session = cfg.session.derive
    if cfg.server.dashboard.enabled:
        engine.preview_chars = cfg.server.dashboard.prompt_preview_chars
    return engine


def decision_log_sink(loaded: LoadedConfig, override: str | None = None) -> JsonlSink | None:
    """The JSONL sink for ``decision_log`` (or ``override``), relative to the config's directory."""
    log_path = override or loaded.config.decision_log
    if not log_path:
        return None
    path = log_path if os.path.isabs(log_path) else str(loaded.base_dir / log_path)
    return JsonlSink(path)


def describe_routes(engine: Engine) -> list[dict[str, Any]]:
    """``/v1/models`` entries for the engine's routes."""
    out: list[dict[str, Any]] = []
    for route in engine.routes.values():
        windows = [engine.targets[t].info.context_window for t in route.targets if t in engine.targets]
        known = [w for w in windows if w]
        entry: dict[str, Any] = {
            "id": route.name,
            "object": "model",
            "created": 0,
            "owned_by": "switchyard",
            "router": route.kind,
            "targets": list(route.targets),
        }
        window = route.context_window or (min(known) if known else None)
        if window:
            entry["context_window"] = window
            entry["max_model_len"] = window
        if route.description:
            entry["description"] = route.description
        out.append(entry)
        for alias in route.aliases:
            out.append({**entry, "id": alias, "alias_of": route.name})
    return out
