"""Target presets: named bundles of defaults for ``targets.<name>`` (``preset: nemotron-3.5-lightning``).

Layer: ``config`` — applied by :func:`switchyard.config.load.load_config` to the raw YAML
mapping, after ``${ENV}`` interpolation and before validation, so every key a preset fills in
is validated like a hand-written one.

Precedence: keys the user writes under the target win over the preset's defaults, at every
nesting level (``extra_body.chat_template_kwargs.enable_thinking`` set by hand beats the
preset's ``reasoning`` option, while the preset's other ``extra_body`` keys stay).

Two spellings::

    targets:
      efficient: {client: lightning, preset: nemotron-3.5-lightning}
      thinker:
        client: lightning
        preset: {name: nemotron-3.5-lightning, reasoning: on}
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.serving.vllm_profiles import SERVED_MODEL_NAME

PathT = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class PresetOption:
    """One option of a preset (``preset: {name: …, <option>: <value>}``).

    Attributes:
        name: Option key.
        parse: Turns the YAML value into the canonical one; raises ``ValueError`` with the message
            to show when the value is not accepted.
        default: Canonical value used when the option is absent.
        doc: One line for docs and errors.
    """

    name: str
    parse: Callable[[Any], Any]
    default: Any
    doc: str


@dataclass(frozen=True, slots=True)
class Preset:
    """A named set of target defaults.

    Attributes:
        name: What ``preset:`` names.
        description: One line.
        options: Accepted options.
        defaults: Builds the target keys from the canonical option values.
    """

    name: str
    description: str
    options: tuple[PresetOption, ...]
    defaults: Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class PresetIssue:
    """A problem found while applying presets (``load_config`` adds the YAML line)."""

    path: PathT
    message: str
    severity: str = "error"


def _on_off(value: Any) -> bool:
    # YAML 1.1 reads a bare on/off as a boolean; quoted strings arrive as text.
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("on", "true", "yes"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("off", "false", "no"):
        return False
    raise ValueError(f"must be on or off (got {value!r})")


def _lightning_defaults(options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        # The id every `switchyard vllm-command` profile serves under (--served-model-name).
        "model": SERVED_MODEL_NAME,
        # The Nemotron chat template reads enable_thinking; an execution model answers without a
        # thinking phase unless asked, which keeps latency and output tokens low.
        "extra_body": {"chat_template_kwargs": {"enable_thinking": bool(options["reasoning"])}},
        # vLLM reports the served --max-model-len in GET /v1/models.
        "probe_context_window": True,
    }


NEMOTRON_LIGHTNING = Preset(
    name="nemotron-3.5-lightning",
    description="NVIDIA Nemotron 3.5 Lightning on vLLM (switchyard vllm-command), as the execution model",
    options=(
        PresetOption(
            "reasoning",
            _on_off,
            False,
            "on|off: sets extra_body.chat_template_kwargs.enable_thinking (default off)",
        ),
    ),
    defaults=_lightning_defaults,
)

PRESETS: dict[str, Preset] = {p.name: p for p in (NEMOTRON_LIGHTNING,)}
"""Every known preset by name."""


def deep_merge(defaults: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` with ``override`` laid on top; nested mappings merge, anything else is replaced."""
    out: dict[str, Any] = dict(defaults)
    for key, value in override.items():
        base = out.get(key)
        if isinstance(value, Mapping) and isinstance(base, Mapping):
            out[key] = deep_merge(base, value)
        else:
            out[key] = value
    return out


def _resolve(tname: str, raw: Any, issues: list[PresetIssue]) -> tuple[Preset | None, dict[str, Any], set[str]]:
    """The preset a target names, its canonical options and the options the user set."""
    at: PathT = ("targets", tname, "preset")
    if isinstance(raw, str):
        name, given = raw, {}
    elif isinstance(raw, Mapping):
        if not isinstance(raw.get("name"), str):
            issues.append(PresetIssue((*at, "name"), "required key is missing (the preset's name)"))
            return None, {}, set()
        name, given = raw["name"], {k: v for k, v in raw.items() if k != "name"}
    else:
        issues.append(PresetIssue(at, "must be a preset name or a mapping with `name` and options"))
        return None, {}, set()
    preset = PRESETS.get(name)
    if preset is None:
        close = difflib.get_close_matches(name, list(PRESETS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        issues.append(PresetIssue(at, f"unknown preset {name!r}{hint}; known presets: {', '.join(PRESETS)}"))
        return None, {}, set()
    known = {o.name: o for o in preset.options}
    options = {o.name: o.default for o in preset.options}
    for key, value in given.items():
        option = known.get(str(key))
        if option is None:
            allowed = ", ".join(f"{o.name} ({o.doc})" for o in preset.options) or "none"
            issues.append(PresetIssue((*at, str(key)), f"unknown option of preset {name!r}; options: {allowed}"))
            continue
        try:
            options[option.name] = option.parse(value)
        except ValueError as exc:
            issues.append(PresetIssue((*at, option.name), str(exc)))
    return preset, options, {str(k) for k in given if str(k) in known}


def apply_presets(data: dict[str, Any]) -> tuple[list[PresetIssue], set[str]]:
    """Expands ``targets.<name>.preset`` in a raw config mapping, in place.

    After this, each such target holds the preset's defaults under the user's keys and
    ``preset`` holds the preset's name.

    Returns:
        The problems and warnings found, and the names of targets whose preset could not be
        resolved (their later "required key" errors are noise and are dropped by the loader).
    """
    issues: list[PresetIssue] = []
    failed: set[str] = set()
    targets = data.get("targets")
    if not isinstance(targets, dict):
        return issues, failed
    for tname, target in targets.items():
        if not isinstance(target, dict) or target.get("preset") is None:
            continue
        name = str(tname)
        before = len(issues)
        preset, options, explicit = _resolve(name, target["preset"], issues)
        if preset is None:
            failed.add(name)
            target.pop("preset")
            continue
        user = {k: v for k, v in target.items() if k != "preset"}
        merged = deep_merge(preset.defaults(options), user)
        merged["preset"] = preset.name
        targets[tname] = merged
        if len(issues) == before:
            issues.extend(_advice(name, preset, options, explicit, user))
    return issues, failed


def _advice(
    tname: str, preset: Preset, options: Mapping[str, Any], explicit: set[str], user: Mapping[str, Any]
) -> list[PresetIssue]:
    out: list[PresetIssue] = []
    if preset is NEMOTRON_LIGHTNING:
        body = user.get("extra_body")
        kwargs = body.get("chat_template_kwargs") if isinstance(body, dict) else None
        thinking = kwargs.get("enable_thinking") if isinstance(kwargs, dict) else None
        if "reasoning" in explicit and thinking is not None and bool(thinking) != bool(options["reasoning"]):
            out.append(
                PresetIssue(
                    ("targets", tname, "extra_body", "chat_template_kwargs", "enable_thinking"),
                    f"overrides the preset option reasoning: {'on' if options['reasoning'] else 'off'} "
                    "(keys set on the target win)",
                    "warning",
                )
            )
        if "price" not in user:
            out.append(
                PresetIssue(
                    ("targets", tname, "price"),
                    "not set: cost records will show $0 for this target. The preset sets no price because "
                    "self-hosted cost is GPU time and public hosted prices disagree (docs/lightning.md)",
                    "warning",
                )
            )
    return out


__all__ = ["NEMOTRON_LIGHTNING", "PRESETS", "Preset", "PresetIssue", "PresetOption", "apply_presets", "deep_merge"]
