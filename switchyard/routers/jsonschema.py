"""A small JSON Schema checker for judge verdicts, and RFC 6901 JSON Pointers.

Layer: ``routers`` — imports nothing of ours.

Judges answer with one JSON object that must match a schema: the packaged schemas of the
capability and escalation judges, or the user's schema of a ``custom`` classifier. Providers
that honour ``response_format: json_schema`` still send invalid output now and then, and in
``json_object`` mode nothing but us checks the shape, so every verdict is validated here.

The checker covers the keywords structured-output APIs accept (the subset OpenAI's strict mode
documents) so that a schema that works upstream also validates locally. An unsupported keyword
is an error at config load (:func:`check_schema`), never a silent pass at run time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "$schema", "$id", "format", "deprecated", "strict"}
)
_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "anyOf",
        "allOf",
        "$ref",
        "$defs",
        "definitions",
    }
)


def check_schema(schema: Any, path: str = "") -> None:
    """Checks that ``schema`` uses only keywords this module can enforce.

    Raises:
        ValueError: The first problem, naming the schema path (e.g. ``/properties/route``).
    """
    where = path or "/"
    if not isinstance(schema, Mapping):
        raise ValueError(f"schema at {where} must be an object, got {type(schema).__name__}")
    unknown = sorted(set(schema) - _KEYWORDS - _ANNOTATIONS)
    if unknown:
        raise ValueError(f"schema at {where} uses unsupported keyword(s) {unknown}")
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    for k in kinds:
        if k not in _TYPES:
            raise ValueError(f"schema at {where} has unknown type {k!r}")
    if "required" in schema and not (
        isinstance(schema["required"], list) and all(isinstance(x, str) for x in schema["required"])
    ):
        raise ValueError(f"schema at {where}: 'required' must be a list of strings")
    if "enum" in schema and not (isinstance(schema["enum"], list) and schema["enum"]):
        raise ValueError(f"schema at {where}: 'enum' must be a non-empty list")
    if "pattern" in schema:
        try:
            re.compile(str(schema["pattern"]))
        except re.error as exc:
            raise ValueError(f"schema at {where}: invalid pattern: {exc}") from None
    _check_children(schema, path, where)


def _check_children(schema: Mapping[str, Any], path: str, where: str) -> None:
    for key in ("properties", "$defs", "definitions"):
        members = schema.get(key, {})
        if not isinstance(members, Mapping):
            raise ValueError(f"schema at {where}: {key!r} must be an object")
        for name, sub in members.items():
            check_schema(sub, f"{path}/{key}/{name}")
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if sub is not None and not isinstance(sub, bool):
            check_schema(sub, f"{path}/{key}")
    for key in ("anyOf", "allOf"):
        subs = schema.get(key)
        if subs is not None:
            if not isinstance(subs, list) or not subs:
                raise ValueError(f"schema at {where}: {key!r} must be a non-empty list")
            for i, sub in enumerate(subs):
                check_schema(sub, f"{path}/{key}/{i}")
    ref = schema.get("$ref")
    if ref is not None and not (isinstance(ref, str) and ref.startswith("#")):
        raise ValueError(f"schema at {where}: only local '$ref' (starting with '#') is supported")


def validate(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Validates ``instance`` against ``schema`` (checked with :func:`check_schema`).

    Returns:
        Problems as ``"<json pointer>: message"`` strings; empty when valid.
    """
    errors: list[str] = []
    _validate(instance, schema, schema, "", errors)
    return errors


def _is_type(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool):  # JSON booleans are not numbers
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def _validate(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], at: str, errors: list[str]) -> None:
    where = at or "/"
    if "$ref" in schema:
        target = resolve_pointer(root, str(schema["$ref"])[1:])
        if not isinstance(target, Mapping):
            errors.append(f"{where}: unresolvable $ref {schema['$ref']!r}")
            return
        _validate(value, target, root, at, errors)
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is_type(value, k) for k in kinds):
            errors.append(f"{where}: expected {' or '.join(kinds)}, got {_json_type(value)}")
            return
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        errors.append(f"{where}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and not _same(value, schema["const"]):
        errors.append(f"{where}: must equal {schema['const']!r}")
    if isinstance(value, dict):
        _object(value, schema, root, at, errors)
    elif isinstance(value, list):
        _array(value, schema, root, at, errors)
    elif isinstance(value, str):
        _string(value, schema, where, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _number(value, schema, where, errors)
    for sub in schema.get("allOf", ()):
        _validate(value, sub, root, at, errors)
    if "anyOf" in schema:
        for sub in schema["anyOf"]:
            trial: list[str] = []
            _validate(value, sub, root, at, trial)
            if not trial:
                break
        else:
            errors.append(f"{where}: matches none of the 'anyOf' alternatives")


def _object(
    value: dict[str, Any], schema: Mapping[str, Any], root: Mapping[str, Any], at: str, errors: list[str]
) -> None:
    props: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            errors.append(f"{at or '/'}: missing required property {name!r}")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        child = f"{at}/{_escape(name)}"
        if name in props:
            _validate(item, props[name], root, child, errors)
        elif extra is False:
            errors.append(f"{at or '/'}: unexpected property {name!r}")
        elif isinstance(extra, Mapping):
            _validate(item, extra, root, child, errors)


def _array(value: list[Any], schema: Mapping[str, Any], root: Mapping[str, Any], at: str, errors: list[str]) -> None:
    where = at or "/"
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{where}: needs at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{where}: allows at most {schema['maxItems']} items")
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _validate(item, items, root, f"{at}/{i}", errors)


def _string(value: str, schema: Mapping[str, Any], where: str, errors: list[str]) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{where}: shorter than {schema['minLength']} characters")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where}: longer than {schema['maxLength']} characters")
    if "pattern" in schema and re.search(str(schema["pattern"]), value) is None:
        errors.append(f"{where}: does not match pattern {schema['pattern']!r}")


def _number(value: float, schema: Mapping[str, Any], where: str, errors: list[str]) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        errors.append(f"{where}: must be finite")
        return
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value} is below the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{where}: {value} is above the maximum {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        errors.append(f"{where}: {value} must be above {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        errors.append(f"{where}: {value} must be below {schema['exclusiveMaximum']}")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _json_type(value: Any) -> str:
    for kind in ("null", "boolean", "object", "array", "string", "integer", "number"):
        if _is_type(value, kind):
            return kind
    return type(value).__name__


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


_MISSING = object()


def check_pointer(pointer: str) -> str:
    """Checks an RFC 6901 JSON Pointer (``""`` is the whole document; others start with ``/``).

    Raises:
        ValueError: Malformed pointer.
    """
    if pointer and not pointer.startswith("/"):
        raise ValueError(f"JSON Pointer {pointer!r} must be empty or start with '/'")
    if re.search(r"~[^01]|~$", pointer):
        raise ValueError(f"JSON Pointer {pointer!r} has an invalid '~' escape (use ~0 for '~', ~1 for '/')")
    return pointer


def resolve_pointer(document: Any, pointer: str, default: Any = None) -> Any:
    """The value ``pointer`` names in ``document``, or ``default`` when there is none."""
    if pointer == "":
        return document
    current = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, Mapping):
            current = current.get(token, _MISSING)
        elif isinstance(current, list) and token.isdigit() and (token == "0" or not token.startswith("0")):
            index = int(token)
            current = current[index] if index < len(current) else _MISSING
        else:
            return default
        if current is _MISSING:
            return default
    return current
