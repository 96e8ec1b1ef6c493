"""Fast JSON helpers shared by the codecs.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from typing import Any

import orjson

from switchyard.protocol.errors import InvalidRequestError


def dumps(obj: Any) -> bytes:
    """Serialises to compact UTF-8 JSON."""
    return orjson.dumps(obj)


def loads(data: bytes | str) -> Any:
    """Parses JSON (raises ``orjson.JSONDecodeError``)."""
    return orjson.loads(data)


def load_object(body: bytes, what: str = "request body") -> dict[str, Any]:
    """Parses a JSON object sent by a caller, raising a 400-class error when it is not one."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"malformed JSON in {what}: {exc}", code="invalid_json") from exc
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{what} must be a JSON object", code="invalid_json")
    return value
