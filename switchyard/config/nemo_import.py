"""Converting a NeMo Switchyard 0.3 TOML config (``switchyard-server --config``) into our YAML.

Layer: ``config``. Used by ``switchyard config import``.

NVIDIA's format (``schema_version = 1``, ``[llm_clients.*]``, ``[targets.*]``, ``[routes.*]``)
maps onto ours almost key for key; the differences handled here:

* a target's ``id`` is our ``model`` and its ``llm_client`` our ``client``;
* a route's public ``id`` (the model name clients send) becomes our route *name*;
* ``llm_classifier`` escalation settings live in an ``[escalation]`` table there and flat here,
  and a custom-mode ``response_schema`` is a JSON *string* there and a mapping here;
* ``stage_router`` targets are ``capable_target``/``efficient_target`` there; imported stage
  routers get ``compat: nvidia`` so they decide as NVIDIA's 0.3.0 does, and their classifier is
  asked on every ambiguous request (NVIDIA ignores ``classify_trigger`` there).

* ``advisor`` routes use the same key names here (docs/advisor.md); ``subagents`` blocks
  (a passthrough or a custom-mode classifier there) become the same inline policy here
  (docs/subagents.md);
* a ``composite`` route (0.3.0: a judge at each user turn sets the stage router's fall-open
  tier) becomes a ``cascade``: its stage router first (it abstains when no tool signal is
  decisive), then its classifier as a capability judge between the stage's two targets, then
  the efficient target — NVIDIA's tier before any verdict (docs/cascade.md).

* ``rlcd`` and ``type_safe_classifier`` routes (0.4) become ``decision_model`` routes
  (docs/decision-model.md): each candidate target is a label of the same name (sanitised to
  ``A-Z a-z 0-9 _ -``), and the deployment-wide ``[type_safe_client]`` becomes a ``system_one``
  client with one decision target; a TypeSafe route's ``base_threshold`` becomes
  ``min_probability``.

Every key without a counterpart is reported as a :class:`Dropped` entry (never dropped
silently): ``noop``, ``plan_execute``, ``auto`` and ``prefill_router`` routes, ``forward_auth``,
the advertising-only ``tool_calling`` and ``reasoning`` flags.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

from switchyard._dataclass import dataclass
from switchyard.config.load import load_config


class TomlImportError(ValueError):
    """The TOML cannot be converted (not TOML, or not a NeMo Switchyard config)."""


@dataclass(frozen=True, slots=True)
class Dropped:
    """A key of the TOML that has no counterpart in the converted config.

    Attributes:
        path: Where it was, as a dotted TOML path (``routes.agent.subagents``).
        reason: Why it could not be carried over, and what to do instead when there is something.
    """

    path: str
    reason: str


@dataclass(slots=True)
class Converted:
    """The result of a conversion.

    Attributes:
        config: The converted config, as a mapping.
        dropped: Keys that were not carried over.
        yaml: The config as YAML text, with the dropped keys listed in a header comment.
    """

    config: dict[str, Any]
    dropped: list[Dropped] = field(default_factory=list)
    yaml: str = ""


_ADVERTISED = "advertising-only flag (NVIDIA reports it on /v1/models and never enforces it); no counterpart"

# Key tables: a tuple lists keys spelled the same in both formats, a mapping renames them.
_CLIENT_KEYS = ("format", "base_url", "api_key_env", "max_retries")
_COMMON_ROUTE = ("context_window",)
_CLASSIFIER_SHARED = ("classifier_target", "max_output_tokens", "response_format_type", "prompt")
_CAPABILITY = (
    "strong_target",
    "weak_target",
    "base_threshold",
    "threshold_step",
    "classify_trigger",
    "message_hash_fallback",
    "recent_turn_window",
)
_ESCALATION_TABLE = ("confirmations", "recent_turn_window", "window_message_chars", "recovery_confirmations")
_CUSTOM = ("targets", "default_target", "classify_trigger", "message_hash_fallback", "recent_turn_window")
_STAGE = {
    "capable_target": "capable",
    "efficient_target": "efficient",
    "picker": "picker",
    "confidence_threshold": "confidence_threshold",
    "recent_turn_window": "recent_turn_window",
    "capable_system_prompt": "capable_system_prompt",
    "efficient_system_prompt": "efficient_system_prompt",
}
_STAGE_CLASSIFIER = (
    "target",
    "base_threshold",
    "threshold_step",
    "recent_turn_window",
    "prompt",
    "response_format_type",
    "max_output_tokens",
)
_ADVISOR_KEYS = (
    "executor_target",
    "advisor_target",
    "gate_trigger",
    "gate_trigger_pattern",
    "max_reviews",
    "gate_stall_turns",
    "gate_min_tool_results",
    "advisor_max_tokens",
    "advisor_temperature",
    "transcript_max_chars",
    "fail_open",
    "reviewer_system_prompt",
    "redo_feedback_prefix",
)
"""``type: advisor`` keys: the same names (and defaults) here."""
_COMPOSITE_JUDGE = {
    "target": "classifier_target",
    "base_threshold": "base_threshold",
    "threshold_step": "threshold_step",
    "classify_trigger": "classify_trigger",
    "message_hash_fallback": "message_hash_fallback",
    "recent_turn_window": "recent_turn_window",
    "prompt": "prompt",
    "response_format_type": "response_format_type",
    "max_output_tokens": "max_output_tokens",
}
_TOOL_CATEGORY = {"observe": "read", "mutate": "edit", "plan": "plan", "new": "write"}
"""NVIDIA's tool categories (0.3.0 ``tool_semantics``) in the stage router's vocabulary here."""
_HANDOFF = ("escalation_note", "deescalation_note", "only_on_wrong_signal_escalation")
_TYPE_SAFE = {
    "base_threshold": "min_probability",
    "question": "question",
    "classify_trigger": "classify_trigger",
    "message_hash_fallback": "message_hash_fallback",
    "recent_turn_window": "recent_turn_window",
}
"""``type_safe_classifier`` keys that carry over to a ``decision_model`` route (renamed)."""


def _free_name(name: str, taken: Mapping[str, Any]) -> str:
    found, n = name, 1
    while found in taken:
        n += 1
        found = f"{name}_{n}"
    return found


def _labels(targets: Iterable[Any], described: Mapping[str, str]) -> dict[str, Any]:
    """A label per candidate target: the target's name, made a valid label, unique."""
    out: dict[str, Any] = {}
    for target in targets:
        name = str(target)
        label = _free_name(re.sub(r"[^A-Za-z0-9_-]", "_", name)[:60] or "target", out)
        out[label] = {"target": name, "description": described[name]} if name in described else name
    return out


class _Converter:
    def __init__(self) -> None:
        self.dropped: list[Dropped] = []
        self.descriptions: dict[str, str] = {}  # target name -> its ``routing_description``
        self.type_safe_target: str | None = None  # the decision target made of [type_safe_client]

    def drop(self, path: str, reason: str) -> None:
        self.dropped.append(Dropped(path, reason))

    def copy(self, src: Mapping[str, Any], keys: Mapping[str, str] | Iterable[str], out: dict[str, Any]) -> None:
        """Copies ``keys`` present in ``src``: renamed by a mapping, as they are otherwise."""
        pairs = keys.items() if isinstance(keys, Mapping) else ((k, k) for k in keys)
        for theirs, ours in pairs:
            if theirs in src:
                out[ours] = src[theirs]

    def rest(self, src: Mapping[str, Any], handled: set[str], at: str) -> None:
        """Reports every key of ``src`` that no rule handled."""
        for key in src:
            if key not in handled:
                self.drop(
                    f"{at}.{key}" if at else key, "unknown to NeMo Switchyard 0.3 and to Switchyard; not carried over"
                )

    # -- sections ------------------------------------------------------------------------------

    def client(self, name: str, src: Mapping[str, Any]) -> dict[str, Any]:
        at = f"llm_clients.{name}"
        out: dict[str, Any] = {}
        self.copy(src, _CLIENT_KEYS, out)
        if src.get("extra_headers"):
            out["headers"] = dict(src["extra_headers"])
        if "timeout_ms" in src:
            # NVIDIA's per-client deadline for one upstream call: our ``timeout.total``.
            out["timeout"] = {"total": float(src["timeout_ms"]) / 1000}
        if src.get("forward_auth"):
            self.drop(
                f"{at}.forward_auth",
                "Switchyard does not forward the caller's credentials upstream; set api_key_env to the "
                "variable holding this upstream's key",
            )
        self.rest(src, {*_CLIENT_KEYS, "extra_headers", "forward_auth", "timeout_ms"}, at)
        return out

    def target(self, name: str, src: Mapping[str, Any]) -> dict[str, Any]:
        at = f"targets.{name}"
        out: dict[str, Any] = {}
        self.copy(src, {"llm_client": "client", "id": "model", "extra_body": "extra_body"}, out)
        if "system_prompt" in src:
            self.drop(
                f"{at}.system_prompt",
                "targets carry no system prompt here; a stage_router route has capable_system_prompt and "
                "efficient_system_prompt",
            )
        if "reasoning_effort" in src:
            self.drop(
                f"{at}.reasoning_effort",
                f"no per-target reasoning setting; set it in extra_body in the upstream's own terms "
                f"(e.g. reasoning_effort: {src['reasoning_effort']!r} for OpenAI Chat)",
            )
        if isinstance(src.get("routing_description"), str):
            self.descriptions[name] = src["routing_description"]
        self.rest(
            src, {"llm_client", "id", "extra_body", "system_prompt", "reasoning_effort", "routing_description"}, at
        )
        return out

    def type_safe_client(self, src: Mapping[str, Any], out: dict[str, Any]) -> None:
        """``[type_safe_client]``: one ``system_one`` client and its decision target."""
        client, target = (
            _free_name("type_safe", out.get("llm_clients", {})),
            _free_name("type_safe_judge", out["targets"]),
        )
        block: dict[str, Any] = {"format": "system_one", "base_url": src.get("base_url") or "https://api.typesafe.ai"}
        self.copy(src, ("api_key_env",), block)
        out.setdefault("llm_clients", {})[client] = block
        out["targets"][target] = {"client": client, "model": src.get("model") or "jev-latest"}
        self.type_safe_target = target
        self.rest(src, {"api_key_env", "base_url", "model"}, "type_safe_client")

    def route(self, name: str, src: Mapping[str, Any]) -> dict[str, Any] | None:
        at = f"routes.{name}"
        kind = src.get("type")
        handled = {"id", "type", "tool_calling", "reasoning", *_COMMON_ROUTE}
        for flag in ("tool_calling", "reasoning"):
            if flag in src:
                self.drop(f"{at}.{flag}", _ADVERTISED)
        build: dict[str, Callable[[str, Mapping[str, Any], dict[str, Any]], set[str]]] = {
            "passthrough": self._passthrough,
            "random": self._random,
            "llm_classifier": self._llm_classifier,
            "stage_router": self._stage,
            "advisor": self._advisor,
            "composite": self._composite,
            "rlcd": self._rlcd,
            "type_safe_classifier": self._type_safe,
        }
        if kind == "noop":
            self.drop(at, "noop routes (answer 'OK' without a model) have no counterpart; the route was left out")
            return None
        converter = build.get(str(kind))
        if converter is None:
            self.drop(at, f"route type {kind!r} is not supported by the importer; the route was left out")
            return None
        out: dict[str, Any] = {"type": kind}
        handled |= converter(at, src, out)
        self.copy(src, _COMMON_ROUTE, out)
        if "subagents" in src:
            handled.add("subagents")
            policy = self.subagents(f"{at}.subagents", src["subagents"])
            if policy is not None:
                out["subagents"] = policy
        self.rest(src, handled, at)
        return out

    def subagents(self, at: str, src: Mapping[str, Any]) -> dict[str, Any] | None:
        """A ``subagents`` block: NVIDIA allows a passthrough or a custom-mode classifier."""
        kind = src.get("type")
        out: dict[str, Any] = {"type": kind}
        if kind == "passthrough":
            handled = {"type"} | self._passthrough(at, src, out)
        elif kind == "llm_classifier":
            handled = {"type"} | self._llm_classifier(at, src, out)
        else:
            self.drop(
                at,
                f"sub-agent policy type {kind!r} is not one NVIDIA allows; delegated work is routed like the parent's",
            )
            return None
        self.rest(src, handled, at)
        return out

    # -- route types ---------------------------------------------------------------------------

    def _passthrough(self, at: str, src: Mapping[str, Any], out: dict[str, Any]) -> set[str]:
        self.copy(src, ("target",), out)
        return {"target"}

    def _random(self, at: str, src: Mapping[str, Any], out: dict[str, Any]) -> set[str]:
        keys = ("targets", "weights", "seed")
        self.copy(src, keys, out)
        return set(keys)

    def _llm_classifier(self, at: str, src: Mapping[str, Any], out: dict[str, Any]) -> set[str]:
        mode = src.get("mode") or ("escalation" if "escalation" in src else "capability")
        out["mode"] = mode
        self.copy(src, _CLASSIFIER_SHARED, out)
        handled = {"mode", *_CLASSIFIER_SHARED}
        if mode == "capability":
            self.copy(src, _CAPABILITY, out)
            return handled | set(_CAPABILITY)
        if mode == "escalation":
            self.copy(src, ("strong_target", "weak_target"), out)
            table = src.get("escalation") or {}
            self.copy(table, _ESCALATION_TABLE, out)
            self.rest(table, set(_ESCALATION_TABLE), f"{at}.escalation")
            return handled | {"strong_target", "weak_target", "escalation"}
        self.copy(src, _CUSTOM, out)
        if "models" in src:  # the 0.3.0 wheel's spelling: label -> list of targets
            out["targets"] = {}
            for label, names in dict(src["models"]).items():
                names = [names] if isinstance(names, str) else list(names)
                out["targets"][label] = names[0] if names else ""
                if len(names) > 1:
                    self.drop(f"{at}.models.{label}", f"only the first target of a label is used here ({names[0]!r})")
        raw_schema = src.get("response_schema")
        if isinstance(raw_schema, str):
            try:
                out["response_schema"] = json.loads(raw_schema)
            except json.JSONDecodeError as exc:
                raise TomlImportError(f"{at}.response_schema is not valid JSON: {exc}") from exc
        elif raw_schema is not None:
            out["response_schema"] = raw_schema
        policy = src.get("policy") or {}
        if "selector" in policy:
            out["selector"] = policy["selector"]
        self.rest(policy, {"type", "selector"}, f"{at}.policy")
        return handled | set(_CUSTOM) | {"response_schema", "policy", "models"}

    def _rlcd(self, at: str, src: Mapping[str, Any], out: dict[str, Any]) -> set[str]:
        # NVIDIA's options are the targets' model ids; here they are labels named after the targets.
        out.update(
            type="decision_model",
            decision_target=src.get("classifier_target"),
            labels=_labels(src.get("targets") or [], {}),
            default_target=src.get("default_target"),
        )
        return {"classifier_target", "targets", "default_target"}

    def _type_safe(self, at: str, src: Mapping[str, Any], out: dict[str, Any]) -> set[str]:
        if self.type_safe_target is None:
            raise TomlImportError(f"{at}: a type_safe_classifier route needs the [type_safe_client] table")
        described = {**self.descriptions, **dict(src.get("candidate_descriptions") or {})}
        out.update(
            type="decision_model",
            decision_target=self.type_safe_target,
            labels=_labels(src.get("candidates") or [], described),
            default_target=src.get("default_target"),
        )
        self.copy(src, _TYPE_SAFE, out)
        return {"candidates", "candidate_descriptions", "default_target", *_TYPE_SAFE}

    def _advisor(self, at: str, src: Mapping[str, Any], out: dict[str, Any]) -> set[str]:
        self.copy(src, _ADVISOR_KEYS, out)
        return set(_ADVISOR_KEYS)

    def _composite(self, at: str, src: Mapping[str, Any], out: dict[str, Any]) -> set[str]:
        # NVIDIA's composite: the stage router decides on decisive tool signals; otherwise the
        # tier its classifier set at the last user turn serves (efficient before any verdict).
        # The cascade here asks the same two in the same order and ends on the efficient target.
        stage_src = src.get("stage") or {}
        judge_src = src.get("classifier") or {}
        stage: dict[str, Any] = {"type": "stage_router"}
        handled = self._stage(f"{at}.stage", stage_src, stage)
        self.rest(stage_src, handled, f"{at}.stage")
        judge: dict[str, Any] = {"type": "llm_classifier", "mode": "capability"}
        self.copy(judge_src, _COMPOSITE_JUDGE, judge)
        judge["strong_target"] = stage.get("capable")
        judge["weak_target"] = stage.get("efficient")
        self.rest(judge_src, set(_COMPOSITE_JUDGE), f"{at}.classifier")
        out.clear()
        out.update(type="cascade", stages=[stage, judge], default=stage.get("efficient"))
        return {"stage", "classifier"}

    def _stage(self, at: str, src: Mapping[str, Any], out: dict[str, Any]) -> set[str]:
        self.copy(src, _STAGE, out)
        handled = {*_STAGE, "handoff_notes", "classifier", "tool_semantics", "capable_hold_turns"}
        semantics = src.get("tool_semantics") or {}
        if semantics:
            out["tool_semantics"] = {}
            for category, names in semantics.items():
                ours = _TOOL_CATEGORY.get(category)
                if ours is None:
                    self.drop(f"{at}.tool_semantics.{category}", "unknown tool category; not carried over")
                    continue
                for tool in names:
                    out["tool_semantics"][tool] = ours
        if "capable_hold_turns" in src:
            out["hold_turns"] = {"capable": src["capable_hold_turns"]}
        notes = src.get("handoff_notes")
        if notes:
            out["handoff_notes"] = {k: notes[k] for k in _HANDOFF if k in notes}
            self.rest(notes, set(_HANDOFF), f"{at}.handoff_notes")
        judge = src.get("classifier")
        if judge:
            converted: dict[str, Any] = {}
            self.copy(judge, _STAGE_CLASSIFIER, converted)
            # NVIDIA asks the stage router's classifier on every ambiguous turn and ignores these.
            converted["classify_trigger"] = "every_request"
            for key, same in (("classify_trigger", "every_request"), ("message_hash_fallback", False)):
                if key in judge and judge[key] != same:
                    self.drop(
                        f"{at}.classifier.{key}",
                        "ignored by NVIDIA's stage router (it asks on every ambiguous turn); "
                        "imported as classify_trigger: every_request, which does the same",
                    )
            self.rest(judge, {*_STAGE_CLASSIFIER, "classify_trigger", "message_hash_fallback"}, f"{at}.classifier")
            out["classifier"] = converted
        out["compat"] = "nvidia"
        return handled


def convert(toml_text: str, *, source: str = "routes.toml") -> Converted:
    """Converts NeMo Switchyard 0.3 TOML text into a Switchyard config.

    Args:
        toml_text: The TOML document.
        source: Its name, for messages and the header comment.

    Returns:
        The converted config, the keys not carried over, and the YAML text.

    Raises:
        TomlImportError: Not TOML, or not a NeMo Switchyard config.
        switchyard.config.load.ConfigError: The converted config does not load (e.g. a route
            names a target that does not exist); the message names the YAML path.
    """
    try:
        data = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlImportError(f"not valid TOML: {exc}") from exc
    if "routes" not in data:
        raise TomlImportError("no [routes] table: not a NeMo Switchyard server config")
    conv = _Converter()
    version = data.get("schema_version", 1)
    if version != 1:
        raise TomlImportError(f"schema_version = {version!r}: only version 1 (NeMo Switchyard 0.3) is understood")
    out: dict[str, Any] = {}
    clients = data.get("llm_clients") or {}
    if clients:
        out["llm_clients"] = {name: conv.client(name, block) for name, block in clients.items()}
    out["targets"] = {name: conv.target(name, block) for name, block in (data.get("targets") or {}).items()}
    if isinstance(data.get("type_safe_client"), dict):
        conv.type_safe_client(data["type_safe_client"], out)
    routes: dict[str, Any] = {}
    for name, block in (data.get("routes") or {}).items():
        converted = conv.route(name, block)
        if converted is None:
            continue
        public = str(block.get("id") or name)
        if public in routes:
            raise TomlImportError(f"routes.{name}: public id {public!r} is used by two routes")
        routes[public] = converted
    out["routes"] = routes
    conv.rest(data, {"schema_version", "llm_clients", "targets", "routes", "type_safe_client"}, "")
    # The converted config must load: prove it before anyone writes it to disk.
    load_config(out)
    return Converted(out, conv.dropped, _render(out, conv.dropped, source))


def convert_file(path: str | Path) -> Converted:
    """Reads and converts a TOML file (see :func:`convert`)."""
    file = Path(path)
    return convert(file.read_text(encoding="utf-8"), source=file.name)


def _render(config: dict[str, Any], dropped: list[Dropped], source: str) -> str:
    lines = [
        f"# Converted from {source} (NeMo Switchyard 0.3) by `switchyard config import`.",
        "# Check it with `switchyard validate FILE`; every key is documented in docs/configuration.md.",
    ]
    if dropped:
        lines.append("# Not carried over:")
        lines.extend(f"#   {d.path}: {d.reason}" for d in dropped)
    body = yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=100)
    return "\n".join(lines) + "\n" + body


__all__ = ["Converted", "Dropped", "TomlImportError", "convert", "convert_file"]
