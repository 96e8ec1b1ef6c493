"""Loading a config: YAML → ``${ENV}`` interpolation → validation with precise error locations.

Layer: ``config``.

Every problem is reported as ``FILE:LINE: yaml.path: message`` (e.g.
``router.yaml:14: routes.mix.targets[1]: unknown target 'ghost'``), all problems at once, and
never as a traceback.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from switchyard._dataclass import dataclass
from switchyard.config import nested
from switchyard.config.experiment_check import experiment_problems
from switchyard.config.schema import SwitchyardConfig
from switchyard.config.server import tenant_problems
from switchyard.routers.base import RouterSpec
from switchyard.routers.registry import router_types, spec_for

PathT = tuple[str | int, ...]


@dataclass(slots=True)
class ConfigIssue:
    """One problem found in a config."""

    path: str
    message: str
    line: int | None = None
    severity: str = "error"

    def render(self, source: str | None) -> str:
        """``file:line: path: message``."""
        where = source or "<config>"
        if self.line is not None:
            where += f":{self.line}"
        prefix = f"{where}: " + (f"{self.path}: " if self.path else "")
        return prefix + ("warning: " if self.severity == "warning" else "") + self.message


class ConfigError(Exception):
    """The config is invalid. ``str(err)`` lists every problem, one per line."""

    def __init__(self, issues: list[ConfigIssue], source: str | None = None) -> None:
        self.issues = sorted(issues, key=lambda i: (i.line is None, i.line or 0))
        self.source = source
        super().__init__("\n".join(i.render(source) for i in self.issues))


@dataclass(slots=True)
class LoadedConfig:
    """A validated config.

    Attributes:
        config: The top-level model.
        routes: Validated route specs by name.
        source: File the config came from (``None`` for dicts).
        base_dir: Directory relative paths resolve against.
        warnings: Non-fatal findings.
        raw: The mapping that was validated (presets expanded).
        served_context_windows: Context windows read from the upstreams at start-up, by target
            (see :mod:`switchyard.config.discovery`); used where the config sets none.
    """

    config: SwitchyardConfig
    routes: dict[str, RouterSpec]
    source: str | None = None
    base_dir: Path = field(default_factory=Path.cwd)
    warnings: list[ConfigIssue] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    served_context_windows: dict[str, int] = field(default_factory=dict)

    def route_spec(self, name: str) -> RouterSpec:
        """The spec of route ``name``.

        Raises:
            KeyError: No such route (the message lists the routes).
        """
        spec = self.routes.get(name)
        if spec is None:
            raise KeyError(f"config has no route {name!r}; routes: {', '.join(self.routes) or '(none)'}")
        return spec


def format_path(parts: PathT) -> str:
    """``("routes", "mix", "targets", 1)`` → ``routes.mix.targets[1]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class _Lines:
    """Finds the line of a YAML path in the composed document."""

    def __init__(self, node: yaml.Node | None) -> None:
        self._root = node

    def line(self, parts: PathT) -> int | None:
        node = self._root
        best: int | None = None if node is None else node.start_mark.line + 1
        for part in parts:
            if isinstance(node, yaml.MappingNode):
                nxt = None
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                        nxt = value
                        best = key.start_mark.line + 1
                        break
                node = nxt
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                best = node.start_mark.line + 1
            else:
                break
            if node is None:
                break
        return best


_ENV = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _interpolate(value: Any, parts: PathT, env: Mapping[str, str], issues: list[ConfigIssue], lines: _Lines) -> Any:
    if isinstance(value, str):
        if "$" not in value:
            return value

        def repl(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            name, default = m.group(1), m.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            issues.append(
                ConfigIssue(
                    format_path(parts),
                    f"environment variable {name} is not set (use ${{{name}:-default}} for a default)",
                    lines.line(parts),
                )
            )
            return ""

        return _ENV.sub(repl, value)
    if isinstance(value, dict):
        return {k: _interpolate(v, (*parts, str(k)), env, issues, lines) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, (*parts, i), env, issues, lines) for i, v in enumerate(value)]
    return value


def _pydantic_issues(exc: ValidationError, prefix: PathT, lines: _Lines, model: type[BaseModel]) -> list[ConfigIssue]:
    out: list[ConfigIssue] = []
    for err in exc.errors():
        loc: PathT = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-after")))
        parts = (*prefix, *loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = "unknown key"
            known = _known_keys(model, loc[:-1])
            close = difflib.get_close_matches(str(loc[-1]), known, n=1) if loc else []
            if close:
                msg += f" (did you mean {close[0]!r}?)"
            elif known:
                msg += f"; allowed here: {', '.join(sorted(known))}"
        elif kind == "missing":
            msg = "required key is missing"
        else:
            msg = err["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            if (
                kind not in ("value_error", "assertion_error")
                and "input" in err
                and not isinstance(err["input"], dict | list)
            ):
                msg += f" (got {err['input']!r})"
        out.append(ConfigIssue(format_path(parts), msg, lines.line(parts)))
    return out


def _known_keys(model: type[BaseModel], loc: PathT) -> list[str]:
    """Field names of the model reached by ``loc`` (best effort, for suggestions)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            continue
        info = current.model_fields.get(str(part))
        if info is None:
            # A dict-valued field keyed by user names: step into its value type.
            continue
        current = _model_in(info.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    args = getattr(annotation, "__args__", ())
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in reversed(args):
        found = _model_in(arg)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    return None


def _read(source: str | Path) -> tuple[str, str]:
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise ConfigError([ConfigIssue("", f"config file not found: {path}")], str(path)) from None
    except OSError as exc:
        raise ConfigError([ConfigIssue("", f"cannot read config file: {exc}")], str(path)) from None


def _parse_yaml(text: str, name: str | None) -> tuple[Any, yaml.Node | None]:
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError([ConfigIssue("", f"invalid YAML: {exc.problem or exc}", line)], name) from None
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigIssue("", f"invalid YAML: {exc}")], name) from None
    return data, node


def load_config(source: str | Path | Mapping[str, Any], *, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Loads and validates a config.

    Args:
        source: A YAML file path, or an already-parsed mapping.
        env: Environment for ``${VAR}`` interpolation (default: ``os.environ``).

    Raises:
        ConfigError: Every problem found, each with its YAML path (and line, for files).
    """
    env = os.environ if env is None else env
    name: str | None = None
    node: yaml.Node | None = None
    base_dir = Path.cwd()
    if isinstance(source, Mapping):
        data: Any = dict(source)
    else:
        text, name = _read(source)
        base_dir = Path(source).resolve().parent
        data, node = _parse_yaml(text, name)
    lines = _Lines(node)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([ConfigIssue("", "the config must be a mapping at the top level", 1)], name)
    issues: list[ConfigIssue] = []
    warnings: list[ConfigIssue] = []
    data = _interpolate(data, (), env, issues, lines)
    preset_failed = _presets(data, issues, warnings, lines)
    config: SwitchyardConfig | None = None
    try:
        config = SwitchyardConfig.model_validate(data)
    except ValidationError as exc:
        issues.extend(
            i
            for i in _pydantic_issues(exc, (), lines, SwitchyardConfig)
            # A target whose preset is unknown misses the keys the preset would have filled in.
            if not (i.message == "required key is missing" and _under_target(i.path, preset_failed))
        )
    # Routes are checked even when other sections failed, so one run reports every problem.
    raw_routes = data.get("routes")
    routes: dict[str, RouterSpec] = {}
    if isinstance(raw_routes, dict):
        for route_name, block in raw_routes.items():
            spec = _route_spec(str(route_name), block, issues, lines)
            if spec is not None:
                routes[str(route_name)] = spec
        _compose(routes, {str(n) for n in raw_routes}, issues, lines)
    _cross_check(data, config, routes, issues, warnings, lines, env)
    if issues or config is None:
        raise ConfigError(issues, name)
    return LoadedConfig(config, routes, name, base_dir, warnings, data)


def _presets(data: dict[str, Any], issues: list[ConfigIssue], warnings: list[ConfigIssue], lines: _Lines) -> set[str]:
    """Expands target presets in place; returns the targets whose preset could not be resolved."""
    targets = data.get("targets")
    if not isinstance(targets, dict) or not any(isinstance(t, dict) and "preset" in t for t in targets.values()):
        return set()  # nothing to expand: the preset tables (and vLLM profiles) stay unloaded
    from switchyard.config.presets import apply_presets

    found, failed = apply_presets(data)
    for item in found:
        issue = ConfigIssue(format_path(item.path), item.message, lines.line(item.path), item.severity)
        (warnings if item.severity == "warning" else issues).append(issue)
    return failed


def _under_target(path: str, targets: set[str]) -> bool:
    return any(path.startswith(f"targets.{t}.") for t in targets)


def _compose(routes: dict[str, RouterSpec], raw_names: set[str], issues: list[ConfigIssue], lines: _Lines) -> None:
    """Validates inline router specs (cascade stages, ``subagents``) and resolves the routes
    stages name; a route left incomplete is dropped (its problems are reported)."""

    def report(path: PathT, message: str) -> None:
        issues.append(ConfigIssue(format_path(path), message, lines.line(path)))

    def validate(path: PathT, block: Any) -> RouterSpec | None:
        return _spec_at(path, block, issues, lines)

    incomplete = {n for n, spec in routes.items() if not nested.attach_inline(spec, ("routes", n), validate, report)}
    # References are resolved (and cycles found) among incomplete routes too, so one run
    # reports every problem; then the routes that cannot be used are left out.
    for name in incomplete | nested.resolve_routes(routes, raw_names, report):
        routes.pop(name, None)


def _route_spec(name: str, block: Any, issues: list[ConfigIssue], lines: _Lines) -> RouterSpec | None:
    return _spec_at(("routes", name), block, issues, lines)


def _spec_at(prefix: PathT, block: Any, issues: list[ConfigIssue], lines: _Lines) -> RouterSpec | None:
    if not isinstance(block, dict):
        issues.append(ConfigIssue(format_path(prefix), "a route must be a mapping with a 'type'", lines.line(prefix)))
        return None
    kind = block.get("type")
    if not isinstance(kind, str):
        issues.append(
            ConfigIssue(
                format_path((*prefix, "type")),
                f"required key is missing; one of: {', '.join(router_types())}",
                lines.line(prefix),
            )
        )
        return None
    try:
        spec_cls = spec_for(kind)
    except KeyError:
        close = difflib.get_close_matches(kind, router_types(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; known types: {', '.join(router_types())}"
        issues.append(
            ConfigIssue(
                format_path((*prefix, "type")), f"unknown route type {kind!r}{hint}", lines.line((*prefix, "type"))
            )
        )
        return None
    except LookupError as exc:
        issues.append(ConfigIssue(format_path((*prefix, "type")), str(exc), lines.line((*prefix, "type"))))
        return None
    spec_cls = spec_cls.variant_for(block)
    try:
        return spec_cls.model_validate(block)
    except ValidationError as exc:
        issues.extend(_pydantic_issues(exc, prefix, lines, spec_cls))
        return None


def _names(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _cross_check(
    data: dict[str, Any],
    config: SwitchyardConfig | None,
    routes: dict[str, RouterSpec],
    issues: list[ConfigIssue],
    warnings: list[ConfigIssue],
    lines: _Lines,
    env: Mapping[str, str],
) -> None:
    clients, targets = _names(data, "llm_clients"), _names(data, "targets")
    for tname, target in targets.items():
        client = target.get("client") if isinstance(target, dict) else None
        if isinstance(client, str) and client not in clients:
            path: PathT = ("targets", tname, "client")
            issues.append(ConfigIssue(format_path(path), _unknown("client", client, clients), lines.line(path)))
    for rname, spec in routes.items():
        refs = [
            *spec.checked_target_refs(),
            *spec.auxiliary_refs(),
            *((f"fallbacks[{i}]", t) for i, t in enumerate(spec.fallbacks)),
        ]
        called_only = _auxiliary_paths(spec)
        refs += _verify_refs(rname, spec, issues, lines)
        for below, problem in experiment_problems(spec):
            at: PathT = ("routes", rname, *below)
            issues.append(ConfigIssue(format_path(at), problem, lines.line(at)))
        for sub, tname in refs:
            parts = ("routes", rname, *nested.split(sub))
            if tname not in targets:
                issues.append(ConfigIssue(format_path(parts), _unknown("target", tname, targets), lines.line(parts)))
            elif sub not in called_only and _client_format(clients, targets[tname]) == "system_one":
                issues.append(ConfigIssue(format_path(parts), _decision_only(tname), lines.line(parts)))
    # Names are checked on the raw sections, so a typo is reported in the same run as a schema
    # error elsewhere (say in `server:`) instead of only after that one is fixed.
    _check_route_names(data, issues, lines)
    if config is None:
        return
    for cname, cfg in config.llm_clients.items():
        if cfg.api_key_env and not env.get(cfg.api_key_env):
            path = ("llm_clients", cname, "api_key_env")
            warnings.append(
                ConfigIssue(
                    format_path(path),
                    f"environment variable {cfg.api_key_env} is not set; calls to this client will fail",
                    lines.line(path),
                    "warning",
                )
            )
    if config.state.backend == "redis" and not config.state.url:
        issues.append(ConfigIssue("state.url", "required when state.backend is 'redis'", lines.line(("state",))))
    elif config.state.backend == "redis" and not str(config.state.url).startswith(("redis://", "rediss://", "unix://")):
        issues.append(
            ConfigIssue("state.url", "must start with redis://, rediss:// or unix://", lines.line(("state", "url")))
        )
    if not config.routes:
        warnings.append(ConfigIssue("routes", "no routes are configured; every request will get 404", None, "warning"))
    _check_labels(config, routes, warnings, lines)
    for where, message in tenant_problems(config.server.api_keys, config.server.tenants):
        path = ("server", *where)
        issues.append(ConfigIssue(format_path(path), message, lines.line(path)))


def _auxiliary_paths(spec: RouterSpec) -> set[str]:
    """Sub-paths of the targets a route only calls (judges, decision models), its sub-agent
    policy's included: the rest are targets it may serve an answer from."""
    paths = {sub for sub, _ in spec.auxiliary_refs()}
    policy = spec.subagent_spec()
    if policy is not None:
        paths |= {f"subagents.{sub}" for sub in _auxiliary_paths(policy)}
    return paths


def _client_format(clients: dict[str, Any], target: Any) -> Any:
    name = target.get("client") if isinstance(target, dict) else None
    client = clients.get(name) if isinstance(name, str) else None
    return client.get("format") if isinstance(client, dict) else None


def _decision_only(target: str) -> str:
    return (
        f"target {target!r} is a decision model (its client has format 'system_one'): it answers typed "
        "choices, not chat turns, so no route can serve from it; name it as a decision_model route's "
        "decision_target"
    )


def _verify_refs(rname: str, spec: RouterSpec, issues: list[ConfigIssue], lines: _Lines) -> list[tuple[str, str]]:
    """The targets of a ``verify:`` block; an issue when the route has no tiers to default to."""
    if spec.verify is None:
        return []
    from switchyard.config.verify_build import verify_tiers

    refs: list[tuple[str, str]] = []
    tiers = verify_tiers(spec)
    if tiers[0] is not None and tiers[0] == tiers[1]:
        at: PathT = ("routes", rname, "verify")
        message = f"efficient and capable are both {tiers[0]!r}"
        issues.append(ConfigIssue(format_path(at), message, lines.line(at)))
    for key, name in zip(("efficient", "capable"), tiers, strict=True):
        if name is None:
            path: PathT = ("routes", rname, "verify")
            message = f"set verify.{key}: route type {spec.type!r} has no {key} tier to default to"
            issues.append(ConfigIssue(format_path(path), message, lines.line(path)))
        else:
            refs.append((f"verify.{key}", name))
    return refs


def _check_labels(
    config: SwitchyardConfig, routes: dict[str, RouterSpec], warnings: list[ConfigIssue], lines: _Lines
) -> None:
    """Warns about required labels that no target carries: every request they apply to fails."""
    carried = {label for t in config.targets.values() for label in t.labels}
    wanted: list[tuple[PathT, list[str]]] = [
        (("server", "api_keys", i, "require_labels"), k.require_labels) for i, k in enumerate(config.server.api_keys)
    ]
    for rname, spec in routes.items():
        wanted += [(("routes", rname, "restrict", i, "require"), r.require) for i, r in enumerate(spec.restrict)]
    for path, labels in wanted:
        missing = [label for label in labels if label not in carried]
        if missing:
            message = f"no target carries label(s) {', '.join(missing)}: every request this applies to is refused"
            warnings.append(ConfigIssue(format_path(path), message, lines.line(path), "warning"))


def _check_route_names(data: dict[str, Any], issues: list[ConfigIssue], lines: _Lines) -> None:
    """Route (and target) names in ``default_route``, ``accounting`` and ``server``, read from
    the raw sections (entries of the wrong type are the schema's to report)."""
    routes, targets = _names(data, "routes"), _names(data, "targets")
    default = data.get("default_route")
    if isinstance(default, str) and default not in routes:
        issues.append(ConfigIssue("default_route", _unknown("route", default, routes), lines.line(("default_route",))))
    accounting = data.get("accounting")
    baseline = accounting.get("baseline") if isinstance(accounting, dict) else None
    for route, target in baseline.items() if isinstance(baseline, dict) else ():
        path: PathT = ("accounting", "baseline", route)
        if route not in routes:
            issues.append(ConfigIssue(format_path(path), _unknown("route", route, routes), lines.line(path)))
        elif isinstance(target, str) and target not in targets:
            issues.append(ConfigIssue(format_path(path), _unknown("target", target, targets), lines.line(path)))
    server = data.get("server")
    keys = server.get("api_keys") if isinstance(server, dict) else None
    for i, key in enumerate(keys if isinstance(keys, list) else ()):
        allowed = key.get("routes") if isinstance(key, dict) else None
        # The proxy compares a key's routes with the resolved route name: a typo (or an alias)
        # would answer every request of that key with 403.
        for j, route in enumerate(allowed if isinstance(allowed, list) else ()):
            path = ("server", "api_keys", i, "routes", j)
            if isinstance(route, str) and route != "*" and route not in routes:
                issues.append(ConfigIssue(format_path(path), _unknown("route", route, routes), lines.line(path)))


def _unknown(kind: str, name: str, known: Mapping[str, Any]) -> str:
    msg = f"unknown {kind} {name!r}"
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        return msg + f" (did you mean {close[0]!r}?)"
    return msg + (f"; defined: {', '.join(known)}" if known else f"; no {kind}s are defined")
