"""The regular-expression check of router config keys (``pattern``, ``plan_patterns``).

Layer: ``routers``. A field validator calls it, so the error names the key's YAML path and line.
"""

from __future__ import annotations

import re


def checked_pattern(value: str, where: str | None = None) -> str:
    """``value``, once it compiles as a Python regular expression.

    Args:
        value: The pattern.
        where: The item it is in a list key (``plan_patterns[2]``), named in the error.

    Raises:
        ValueError: ``[where ]is not a valid regular expression: why`` (without ``where``:
            ``not a valid regular expression: why``; the key is in the error's path).
    """
    try:
        re.compile(value)
    except re.error as exc:
        prefix = f"{where} is " if where else ""
        raise ValueError(f"{prefix}not a valid regular expression: {exc}") from None
    return value
