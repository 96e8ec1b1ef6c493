"""What the request path's stages hand each other: the prepared request and the engine's parts.

Layer: ``engine``. Reads nothing and changes nothing: types only.

The stages (``intake`` → ``identify`` → ``restrict`` → ``decide`` → ``attempt`` (with ``verify``)
→ ``answer`` → ``book``; docs/architecture.md draws them) are functions in their own modules.
:class:`~switchyard.engine.core.Engine` composes them; each reads what it needs of the engine
through :class:`Serving`, so no stage imports the engine, and no stage reaches into another's
private names. :class:`Prepared` is the hand-off from the stages that decide to the stages that
answer: built once per request, changed only where its fields say.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Protocol

from switchyard._dataclass import dataclass
from switchyard.engine.timeouts import Budget
from switchyard.engine.windows import PromptSize
from switchyard.protocol.call import CallOptions
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.wire.openai_chat.plain_answer import PlainAnswer

if TYPE_CHECKING:
    from switchyard.engine.fallback import FirstAttempt
    from switchyard.engine.health import Health
    from switchyard.engine.records import DecisionRecord
    from switchyard.engine.restriction import Restriction
    from switchyard.engine.target import Route, Target
    from switchyard.protocol.session import StateStore
    from switchyard.routers.base import Decision

Answer = ChatResponse | PlainAnswer
"""An answer call's result: the IR, or a plain Chat answer relayed without it (the plain lane)."""

Emit = Callable[["DecisionRecord"], None]
"""Hands a finished decision record to the sinks."""


class Serving(Protocol):
    """The parts of the engine the stages read: fixed after start-up except for their contents
    (breaker states, session state), which the stages change through their own methods."""

    @property
    def targets(self) -> Mapping[str, Target]:
        """Targets by name."""

    @property
    def health(self) -> Health:
        """Circuit breakers and reliability counters."""

    @property
    def store(self) -> StateStore:
        """The session state store (threads, stored responses, routers' state)."""

    def emit(self, record: DecisionRecord) -> None:
        """Masks ``record`` and hands it to every sink."""


@dataclass(slots=True)
class Prepared:
    """One request, decided: what the answering stages read.

    Built by :meth:`Engine.prepare <switchyard.engine.core.Engine.prepare>`; the answering
    stages change only ``options`` (a buffered stream drops its raw body), ``first`` (the relay
    lane's attempt) and the record.
    """

    route: Route
    request: ChatRequest
    """The request the answer call sends: the router's rewrite when it made one."""
    decision: Decision
    record: DecisionRecord
    candidates: list[str]
    """The targets to try, in order, after the route's order, the restriction and thread checks."""
    options: CallOptions
    t0: float
    """``time.perf_counter()`` when the request arrived."""
    headers: Mapping[str, str] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    body_bytes: int | None = None
    """The caller's body size, when the request sent upstream is that body unchanged."""
    restriction: Restriction | None = None
    """The labels the request requires (``None``: unrestricted)."""
    decode: Callable[[], ChatRequest] | None = None
    """The full decode of a plain Chat stand-in (``engine/plain_chat.py``), run only if asked."""
    first: FirstAttempt | None = None
    """An attempt the relay lane made, for the fallback walk to judge (``engine/relay.py``)."""


def prompt_size(prep: Prepared) -> PromptSize:
    """The size of ``prep``'s prompt, computed when first asked (a plain stand-in is decoded then)."""
    return PromptSize(prep.decode or prep.request, prep.body_bytes)
