"""Escaping request-derived text for log lines (CWE-117: a logged value cannot forge a line).

Layer: ``server`` — imports nothing of ours, so the app and the access log can both use it.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every control or separator character (CR, LF, ESC, NUL, DEL, U+2028 …)
    written as a ``\\xNN`` / ``\\uNNNN`` escape, so a logged value stays on its line and cannot
    steer a terminal. Printable text — nearly every call — is returned as is after one C-level scan.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
