"""Fast JSON helpers shared by the codecs.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

import orjson

from switchyard.protocol.errors import InvalidRequestError


def dumps(obj: Any) -> bytes:
    """Serialises to compact UTF-8 JSON."""
    return orjson.dumps(obj)


def loads(data: bytes | str) -> Any:
    """Parses JSON (raises ``orjson.JSONDecodeError``)."""
    return orjson.loads(data)


MAX_DEPTH = 128
"""The deepest a caller's JSON may nest (objects and arrays within each other).

orjson parses up to 1,024 levels but writes at most 254: a body nested 255 to 1,024 deep would be
accepted here and then fail when it is encoded for the upstream. Checked once, at decode
(:func:`load_object`), with room below orjson's limit for the levels a translation adds."""

_ENCODER_DEPTH = 254  # the deepest orjson.dumps writes


class _DepthProbe(threading.local):
    """Arrays nested ``_ENCODER_DEPTH - MAX_DEPTH`` deep around one slot: a value put in the slot
    encodes only when it nests at most :data:`MAX_DEPTH` deep. Per thread, as large bodies are
    decoded on worker threads."""

    def __init__(self) -> None:
        self.slot: list[Any] = [None]
        top: list[Any] = self.slot
        for _ in range(_ENCODER_DEPTH - MAX_DEPTH - 1):
            top = [top]
        self.top = top


_probe = _DepthProbe()


def too_deep(value: Any) -> bool:
    """Whether ``value`` nests deeper than :data:`MAX_DEPTH` (one pass of orjson's encoder)."""
    probe = _probe
    probe.slot[0] = value
    try:
        orjson.dumps(probe.top)
    except orjson.JSONEncodeError as exc:
        return "Recursion" in str(exc)
    finally:
        probe.slot[0] = None
    return False


def load_object(body: bytes, what: str = "request body") -> dict[str, Any]:
    """Parses a JSON object sent by a caller, raising a 400-class error when it is not one (or
    nests deeper than :data:`MAX_DEPTH`)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"malformed JSON in {what}: {exc}", code="invalid_json") from exc
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{what} must be a JSON object", code="invalid_json")
    if len(body) > 2 * MAX_DEPTH and too_deep(value):  # deeper needs an opening and a closing byte per level
        raise InvalidRequestError(
            f"{what} nests JSON objects and arrays more than {MAX_DEPTH} levels deep (the limit)",
            code="json_too_deep",
        )
    return value


_CHUNK = 2000


def dumps_in_pieces(obj: dict[str, Any]) -> bytes:
    """:func:`dumps` of an object, its long top-level lists serialised ``_CHUNK`` items at a time.

    The bytes are the same; what changes is that no single serialiser call runs for long. On a
    worker thread that matters: one call holds the GIL throughout (tens of ms for a 5 MB
    request), which stalls the event loop; between pieces the loop gets its turn.
    """
    long = [k for k, v in obj.items() if isinstance(v, list) and len(v) > _CHUNK]
    if not long:
        return orjson.dumps(obj)
    # Placeholders a caller cannot guess (so cannot have put in a string value before them).
    slots = {k: f"\x00{secrets.token_hex(16)}\x00" for k in long}
    out = orjson.dumps({k: slots.get(k, v) for k, v in obj.items()})
    for key, slot in slots.items():
        items: list[Any] = obj[key]
        pieces = [orjson.dumps(items[i : i + _CHUNK])[1:-1] for i in range(0, len(items), _CHUNK)]
        out = out.replace(orjson.dumps(slot), b"[" + b",".join(pieces) + b"]", 1)
    return out
