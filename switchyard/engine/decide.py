"""Stage 4, decide: which targets answer, in which order — or the router's own answer.

Layer: ``engine``. Reads the request, its session, the route's router and the route's state
of the session (a route's experiment — shadow mode, a control group — may serve its baseline
instead: ``engine/experiment.py``); the router may change that state, make model calls of its own (judges,
advisors, a weak-first answer: booked on the record through
:class:`~switchyard.engine.router_call.RouterCall`) and rewrite the request. Changes the
decision record (the router's source, reason, score and details) and, when the router answered
itself, the thread record of that answer.

Before the router runs, a thread's ``continue`` and a Responses ``previous_response_id`` are
checked against what the route can serve and the caller's tenant may read
(``ThreadNotFoundError``, ``PreviousResponseNotFoundError``). After it, the candidates are put in
the route's order, narrowed by the restriction, and to the targets that can continue the
request's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial

from switchyard.engine import stored_responses, threads
from switchyard.engine.handoff import Serving
from switchyard.engine.records import DecisionRecord
from switchyard.engine.restriction import Restriction
from switchyard.engine.router_call import RouterCall
from switchyard.engine.state_watch import watched
from switchyard.engine.target import Route, Target
from switchyard.engine.timeouts import Budget
from switchyard.protocol.errors import RouterError, SwitchyardError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import NamespacedStore, SessionInfo, StateStore
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.static import PassthroughRouter
from switchyard.state.memory import MemoryStore

logger = logging.getLogger("switchyard.engine")


async def decided(
    serving: Serving,
    route: Route,
    request: ChatRequest,
    session: SessionInfo,
    headers: Mapping[str, str],
    record: DecisionRecord,
    limits: Budget | None,
    restriction: Restriction | None,
    forwarded: Mapping[str, str],
    infos: Mapping[str, TargetInfo],
    *,
    inherited: list[str] | None = None,
    answerers: tuple[str, ...] | None = None,
    plain: bool = False,
    warned: set[str],
) -> tuple[Decision, list[str]]:
    """The router's decision on ``request`` and the candidates left to answer it, in order.

    Args:
        serving: The engine's targets, health and store.
        route: The request's route.
        request: The request (the identify stage's session is ``session``).
        session: Its session.
        headers: Its headers, lower-cased.
        record: Its decision record.
        limits: Its time budget (``None``: the defaults).
        restriction: The restrict stage's (``None``: unrestricted).
        forwarded: The caller's headers that go upstream with every call.
        infos: The route's targets and fallbacks, described (the router's context).
        inherited: The labels a continued thread required (``None``: an unknown thread).
        answerers: The route's targets and fallbacks (the thread check's; default: the route's).
        plain: A plain Chat stand-in (it continues no thread and names no stored response).
        warned: Routes already warned of stateful routing without session ids (added to).

    Raises:
        ThreadNotFoundError: A ``continue`` the route's targets cannot serve.
        PreviousResponseNotFoundError: Another tenant's stored response.
        RouterError: The router failed or chose unknown targets.
        RestrictedError: No target the router chose may see the request.
    """
    targets = serving.targets
    if not plain:  # before routing
        known = inherited is not None or (not route.restrict and session.tenant is None)
        threads.check_route(request, answerers or (*route.targets, *route.fallbacks), targets, known=known)
        await stored_responses.check(serving.store, request, session.tenant)  # another tenant's response
    args = (serving, route, request, session, headers, record, limits, restriction, forwarded, infos, warned)
    if route.experiment is None:
        decision = await routed(*args)
    else:  # shadow mode or a control group (engine/experiment.py)
        decision = await route.experiment.decide(session, record, partial(routed, *args))
    candidates = route.order(decision.candidates)
    if restriction is not None:
        candidates = restriction.narrow(route.name, decision, candidates, record)
    if decision.response is not None:  # a router's own answer can be continued as well
        await threads.remember_answer(serving.store, request, decision, targets, session, restriction)
    elif not plain:  # a stand-in continues no thread
        candidates = threads.servable(decision.request or request, candidates, targets)
    return decision, candidates


async def routed(
    serving: Serving,
    route: Route,
    request: ChatRequest,
    session: SessionInfo,
    headers: Mapping[str, str],
    record: DecisionRecord,
    limits: Budget | None,
    restriction: Restriction | None,
    forwarded: Mapping[str, str],
    infos: Mapping[str, TargetInfo],
    warned: set[str],
) -> Decision:
    """The route's router's decision, noted on ``record`` (see :func:`decided`)."""
    if route.stateful and session.key is None and route.name not in warned:
        warned.add(route.name)
        logger.warning(
            "route %r keeps per-session state but requests carry no session id "
            "(send x-switchyard-session-id); each request is routed on its own",
            route.name,
        )
    targets: Mapping[str, Target] = serving.targets
    # A passthrough reads nothing of the request or its context: no context is built for it.
    decision = route.router.fixed() if isinstance(route.router, PassthroughRouter) else None
    router_call: RouterCall | None = None
    if decision is None:  # the router's context, its session's state and its model calls
        store: StateStore
        if session.key is None:
            store = MemoryStore(max_entries=64)
        else:
            assert route.store is not None
            # The session's slot of the route (watched when POST /v1/decision reports changes).
            store = watched(NamespacedStore(route.store, f"{session.key}:"))
        ctx = RouteContext(route.name, session, infos, store, headers, route.store)
        router_call = RouterCall(targets, serving.health, record, limits, restriction, route.name, forwarded)
        try:
            decision = await route.router.route(request, ctx, router_call)
        except SwitchyardError:
            raise
        except Exception as exc:
            logger.exception("router of route %r failed", route.name)
            raise RouterError(f"router of route {route.name!r} failed: {type(exc).__name__}: {exc}") from exc
    unknown = [c for c in decision.candidates if c not in targets]
    if unknown:
        raise RouterError(f"router of route {route.name!r} chose unknown target(s) {unknown}")
    if decision.response is not None and router_call is not None:
        answer_ms = router_call.unbook(decision.response)
        if answer_ms is not None:
            record.details["answer_elapsed_ms"] = answer_ms
    record.source = decision.source
    record.reason = decision.reason
    record.score, record.confidence = decision.score, decision.confidence
    if decision.details:
        record.details.update(decision.details)
    return decision
