"""Package attributes that load on first use (PEP 562's module ``__getattr__``).

A package ``__init__`` names what it re-exports and where each name lives; importing the package
then imports none of those modules, so ``import switchyard.server.app`` pulls in only what it
uses (tests/test_import_light.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_attributes(
    package: str, table: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps each lazy name to the module
    that defines it; a name is imported on first access and then kept in ``namespace`` (the
    package's ``globals()``), so the hook runs once per name.

    Example:
        >>> __getattr__ = lazy_attributes(__name__, {"HttpBackend": "switchyard.clients.backend"}, globals())
    """

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
