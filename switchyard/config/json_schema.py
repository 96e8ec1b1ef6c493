"""The JSON Schema of the YAML config, generated from the pydantic models.

Layer: ``config``. One source of truth: the top-level keys come from
:class:`~switchyard.config.schema.SwitchyardConfig` and each route ``type`` from its
:class:`~switchyard.routers.base.RouterSpec` subclass (third-party route types registered through
the ``switchyard.routers`` entry point included). What pydantic cannot see is added here, each
rule with its reason:

* ``routes.<name>`` is checked by its ``type`` (and, for ``llm_classifier``, by its ``mode``),
  because the loader validates routes in a second pass (:mod:`switchyard.config.load`);
* a cascade's inline ``stages``, a ``profiles`` route's ``choose`` and every ``subagents`` policy
  are router blocks themselves
  (checked by their own ``type``, recursively, without the route-level keys), because the loader
  validates them as routes at their own YAML path (:mod:`switchyard.config.nested`) while the
  spec models only see mappings;
* a target may name a ``preset`` (a name, or a mapping with ``name`` and options) instead of a
  ``model``, because presets are expanded before validation (:mod:`switchyard.config.presets`);
* an enum that contains ``off``/``on`` also accepts booleans, because YAML 1.1 readers (PyYAML,
  which the loader uses) read a bare ``off`` as ``false`` and the models accept that.

``${ENV}`` references are interpolated before validation; the schema describes the values after
interpolation, so a reference in a non-string field (``ttl_s: ${TTL}``) is flagged by editors
although the loader accepts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from switchyard.config.presets import PRESETS
from switchyard.config.schema import SwitchyardConfig
from switchyard.routers.base import RouterSpec
from switchyard.routers.llm_classifier import MODES as LLM_CLASSIFIER_MODES
from switchyard.routers.registry import router_types, spec_for

SCHEMA_ID = "urn:switchyard-router:config"
"""The ``$id`` of the exported schema (a name, not a location)."""

_MODED = {"llm_classifier": LLM_CLASSIFIER_MODES}
"""Route types whose keys depend on ``mode``, with their modes (the first is the default)."""

_INLINE_LISTS = {"cascade": "stages"}
_INLINE_KEYS = {"profiles": "choose"}
"""Route types with a key that holds a route name or one inline router block."""
"""Route types with a list whose items are route names or inline router blocks, by key."""

_ROUTE = {"$ref": "#/$defs/Route"}
_INLINE = {"$ref": "#/$defs/InlineRouter"}


def _route_variants() -> dict[str, dict[str | None, type[RouterSpec]]]:
    """Every route type with its spec class per mode (``None`` for types without modes)."""
    out: dict[str, dict[str | None, type[RouterSpec]]] = {}
    for kind in router_types():
        try:
            spec = spec_for(kind)
        except (KeyError, LookupError, ImportError, TypeError):
            continue  # a planned or broken plug-in type: the loader reports it, not the schema
        modes = _MODED.get(kind)
        if modes is None:
            out[kind] = {None: spec.variant_for({"type": kind})}
        else:
            out[kind] = {m: spec.variant_for({"type": kind, "mode": m}) for m in modes}
    return out


def _ref(model: type[BaseModel], refs: Mapping[Any, Any]) -> dict[str, Any]:
    return dict(refs[(model, "validation")])


def _route_schema(variants: dict[str, dict[str | None, type[RouterSpec]]], refs: Any) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    for kind, by_mode in variants.items():
        is_kind = {"properties": {"type": {"const": kind}}, "required": ["type"]}
        if None in by_mode:
            rules.append({"if": is_kind, "then": _ref(by_mode[None], refs)})
            continue
        modes = list(by_mode)
        default = modes[0]
        mode_rules: list[dict[str, Any]] = []
        for mode in modes:
            chosen: dict[str, Any] = {"properties": {"mode": {"const": mode}}, "required": ["mode"]}
            if mode == default:
                chosen = {"anyOf": [{"not": {"required": ["mode"]}}, chosen]}
            mode_rules.append({"if": chosen, "then": _ref(by_mode[mode], refs)})
        mode_rules.append({"properties": {"mode": {"enum": modes}}})
        rules.append({"if": is_kind, "then": {"allOf": mode_rules}})
    return {
        "type": "object",
        "description": "A route: clients name it as their model. Its keys depend on its type.",
        "required": ["type"],
        "properties": {"type": {"enum": list(variants), "description": "The router kind."}},
        "allOf": rules,
    }


def _nest(defs: dict[str, Any], variants: dict[str, dict[str | None, type[RouterSpec]]], refs: Any) -> None:
    """Points ``subagents`` and a cascade's ``stages`` at the inline-router schema."""
    defs["InlineRouter"] = {
        "description": "A router inside a route (a cascade stage, a subagents policy): any route type "
        "with its keys, without the route-level keys.",
        "allOf": [_ROUTE],
        "not": {"anyOf": [{"required": [key]} for key in RouterSpec.ROUTE_KEYS]},
    }
    for kind, by_mode in variants.items():
        for model in by_mode.values():
            props = defs[_ref(model, refs)["$ref"].rsplit("/", 1)[-1]].get("properties", {})
            if "subagents" in props:
                props["subagents"] = {
                    "description": "The policy for sub-agents' delegated calls (docs/subagents.md).",
                    "anyOf": [_INLINE, {"type": "null"}],
                }
            listed = _INLINE_LISTS.get(kind)
            if listed in props:
                props[listed]["items"] = {"anyOf": [{"type": "string", "minLength": 1}, _INLINE]}
            single = _INLINE_KEYS.get(kind)
            if single in props:
                props[single] = {**props[single], "anyOf": [{"type": "string", "minLength": 1}, _INLINE]}


def _preset_schema() -> dict[str, Any]:
    names = list(PRESETS)
    options: dict[str, Any] = {}
    for preset in PRESETS.values():
        for option in preset.options:
            options[option.name] = {"description": option.doc}
    return {
        "description": "A named bundle of target defaults (keys written under the target win).",
        "anyOf": [
            {"enum": names},
            {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"enum": names}, **options},
                "additionalProperties": False,
            },
        ],
    }


def _allow_yaml_booleans(node: Any) -> None:
    """Lets enums holding ``off``/``on`` also take the booleans YAML 1.1 reads them as."""
    if isinstance(node, dict):
        enum = node.get("enum")
        if isinstance(enum, list) and ("off" in enum or "on" in enum):
            node.pop("type", None)
            node["enum"] = [*enum, *(v for v in (False, True) if v not in enum)]
        for value in node.values():
            _allow_yaml_booleans(value)
    elif isinstance(node, list):
        for value in node:
            _allow_yaml_booleans(value)


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a Switchyard YAML config.

    Returns:
        A JSON-serialisable mapping; ``switchyard config schema`` prints it.
    """
    variants = _route_variants()
    models: list[type[BaseModel]] = [SwitchyardConfig]
    for by_mode in variants.values():
        models.extend(m for m in by_mode.values() if m not in models)
    refs, top = models_json_schema([(m, "validation") for m in models], ref_template="#/$defs/{model}")
    defs: dict[str, Any] = top.get("$defs", {})
    root_name = _ref(SwitchyardConfig, refs)["$ref"].rsplit("/", 1)[-1]
    root = defs.pop(root_name)
    defs["Route"] = _route_schema(variants, refs)
    _nest(defs, variants, refs)
    root["properties"]["routes"] = {"type": "object", "description": "Routes by name.", "additionalProperties": _ROUTE}
    target_name = root["properties"]["targets"]["additionalProperties"]["$ref"].rsplit("/", 1)[-1]
    target = defs[target_name]
    target["properties"]["preset"] = _preset_schema()
    target["required"] = [r for r in target.get("required", []) if r != "model"]
    target["anyOf"] = [{"required": ["model"]}, {"required": ["preset"]}]
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Switchyard config",
        **root,
        "$defs": defs,
    }
    _allow_yaml_booleans(schema)
    return schema


__all__ = ["SCHEMA_ID", "config_json_schema"]
