"""Identifiers the codecs generate or must normalise.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

import re
import uuid

_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def _hex() -> str:
    return uuid.uuid4().hex[:24]


def new_id(prefix: str) -> str:
    """A fresh id such as ``msg_3f…`` (prefix plus 24 hex digits)."""
    return f"{prefix}{_hex()}"


def anthropic_tool_id(raw: str) -> str:
    """A ``tool_use.id`` Anthropic accepts (``^[a-zA-Z0-9_-]+$``) for any call id.

    Valid ids are kept as they are; other characters become ``_``, so the same input always
    maps to the same output and a tool result still finds its call. An empty id gets a fresh one.
    """
    if _ANTHROPIC_ID.match(raw):
        return raw
    cleaned = _INVALID.sub("_", raw)
    return cleaned or new_id("toolu_sy")
