"""Session state stores behind :class:`~switchyard.protocol.session.StateStore`.

Layer: ``state`` — imports ``protocol`` only.
"""

from switchyard.protocol.session import NamespacedStore
from switchyard.state.memory import MemoryStore

__all__ = ["MemoryStore", "NamespacedStore"]
