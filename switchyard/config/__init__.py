"""YAML config → validated models → a built engine.

Layer: ``config``.

The names below load on first use: importing one config module (``config.server``) does not
build the loader, the engine builder or their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchyard._lazy import lazy_attributes

if TYPE_CHECKING:
    from switchyard.config.build import build_engine, describe_routes
    from switchyard.config.load import ConfigError, ConfigIssue, LoadedConfig, load_config
    from switchyard.config.schema import SwitchyardConfig

_LAZY = {
    "build_engine": "switchyard.config.build",
    "describe_routes": "switchyard.config.build",
    "ConfigError": "switchyard.config.load",
    "ConfigIssue": "switchyard.config.load",
    "LoadedConfig": "switchyard.config.load",
    "load_config": "switchyard.config.load",
    "SwitchyardConfig": "switchyard.config.schema",
}

__all__ = [
    "ConfigError",
    "ConfigIssue",
    "LoadedConfig",
    "SwitchyardConfig",
    "build_engine",
    "describe_routes",
    "load_config",
]


__getattr__ = lazy_attributes(__name__, _LAZY, globals())
