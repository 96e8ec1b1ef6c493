"""Switchyard: route every LLM call of an agent to the model that should serve it.

``import switchyard`` is light: the engine, config and SDK wrappers load on first use.

Example:
    >>> import switchyard
    >>> sy = switchyard.Switchyard.from_config("router.yaml")
    >>> client = switchyard.OpenAI(config="router.yaml")   # the real openai SDK, routed in-process
    >>> claude = switchyard.Anthropic(config="router.yaml")  # the real anthropic SDK, likewise
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchyard._lazy import lazy_attributes
from switchyard._version import __version__

if TYPE_CHECKING:
    from switchyard.api import Switchyard
    from switchyard.config.load import ConfigError, load_config
    from switchyard.dropin import Anthropic, AsyncAnthropic, AsyncOpenAI, OpenAI
    from switchyard.engine.core import Completion, EventStream
    from switchyard.engine.records import DecisionRecord

_LAZY = {
    "Switchyard": "switchyard.api",
    "ConfigError": "switchyard.config.load",
    "load_config": "switchyard.config.load",
    "OpenAI": "switchyard.dropin",
    "AsyncOpenAI": "switchyard.dropin",
    "Anthropic": "switchyard.dropin",
    "AsyncAnthropic": "switchyard.dropin",
    "Completion": "switchyard.engine.core",
    "EventStream": "switchyard.engine.core",
    "DecisionRecord": "switchyard.engine.records",
}

__all__ = [
    "Anthropic",
    "AsyncAnthropic",
    "AsyncOpenAI",
    "Completion",
    "ConfigError",
    "DecisionRecord",
    "EventStream",
    "OpenAI",
    "Switchyard",
    "__version__",
    "load_config",
]


__getattr__ = lazy_attributes(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
