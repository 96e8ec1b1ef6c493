"""YAML config → validated models → a built engine.

Layer: ``config``.
"""

from switchyard.config.build import build_engine, describe_routes
from switchyard.config.load import ConfigError, ConfigIssue, LoadedConfig, load_config
from switchyard.config.schema import SwitchyardConfig

__all__ = [
    "ConfigError",
    "ConfigIssue",
    "LoadedConfig",
    "SwitchyardConfig",
    "build_engine",
    "describe_routes",
    "load_config",
]
