"""The engine: the one request path shared by the proxy, the drop-in clients and the library API.

Layer: ``engine`` — imports ``protocol``, ``wire``, ``routers`` and ``state``.
"""

from switchyard.engine.core import Completion, Engine, EventStream, Route, Target
from switchyard.engine.records import DecisionRecord, DecisionSink, JsonlSink, log_sink
from switchyard.engine.reply import Reply

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
