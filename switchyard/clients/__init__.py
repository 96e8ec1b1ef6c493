"""Upstream clients: the one layer that imports ``httpx``.

Layer: ``clients`` — imports ``protocol`` and ``wire``.

The names below load on first use: importing one client module (``clients.retry``) does not
import the HTTP backend and the codecs it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchyard._lazy import lazy_attributes

if TYPE_CHECKING:
    from switchyard.clients.backend import HttpBackend, Timeouts

_LAZY = {"HttpBackend": "switchyard.clients.backend", "Timeouts": "switchyard.clients.backend"}

__all__ = ["HttpBackend", "Timeouts"]


__getattr__ = lazy_attributes(__name__, _LAZY, globals())
