"""Upstream clients: the one layer that imports ``httpx``.

Layer: ``clients`` — imports ``protocol`` and ``wire``.
"""

from switchyard.clients.backend import HttpBackend, Timeouts

__all__ = ["HttpBackend", "Timeouts"]
