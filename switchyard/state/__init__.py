"""Session state stores behind :class:`~switchyard.protocol.session.StateStore`.

Layer: ``state`` — imports ``protocol`` only.
"""

from switchyard.state.memory import MemoryStore, NamespacedStore

__all__ = ["MemoryStore", "NamespacedStore"]
