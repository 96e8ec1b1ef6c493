"""The engine: the one request path shared by the proxy, the drop-in clients and the library API.

Layer: ``engine`` — imports ``protocol``, ``wire``, ``routers`` and ``state``.

The names below load on first use: importing one engine module (``engine.records``,
``engine.reply``) does not import the whole engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchyard._lazy import lazy_attributes

if TYPE_CHECKING:
    from switchyard.engine.core import Completion, Engine, EventStream, Route, Target
    from switchyard.engine.records import DecisionRecord, DecisionSink, JsonlSink, log_sink
    from switchyard.engine.reply import Reply

_LAZY = {
    "Completion": "switchyard.engine.core",
    "Engine": "switchyard.engine.core",
    "EventStream": "switchyard.engine.core",
    "Route": "switchyard.engine.core",
    "Target": "switchyard.engine.core",
    "DecisionRecord": "switchyard.engine.records",
    "DecisionSink": "switchyard.engine.records",
    "JsonlSink": "switchyard.engine.records",
    "log_sink": "switchyard.engine.records",
    "Reply": "switchyard.engine.reply",
}

__all__ = [
    "Completion",
    "DecisionRecord",
    "DecisionSink",
    "Engine",
    "EventStream",
    "JsonlSink",
    "Reply",
    "Route",
    "Target",
    "log_sink",
]


__getattr__ = lazy_attributes(__name__, _LAZY, globals())
