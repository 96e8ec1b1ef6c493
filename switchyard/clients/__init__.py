"""Upstream clients: the one layer that imports ``httpx``.

Layer: ``clients`` — imports ``protocol`` and ``wire``.

The names below load on first use: importing one client module (``clients.retry``) does not
import the HTTP backend and the codecs it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switchyard.clients.backend import HttpBackend, Timeouts

_LAZY = {"HttpBackend": "switchyard.clients.backend", "Timeouts": "switchyard.clients.backend"}

__all__ = ["HttpBackend", "Timeouts"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
