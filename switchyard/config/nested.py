"""Router specs inside router specs: cascade stages and ``subagents`` policies.

Layer: ``config``.

An inline block is validated exactly like a route block, at its own YAML path
(``routes.agent.stages[2].base_threshold``); route-level keys (``fallbacks``, ``aliases`` …) are
refused there because only a route has them. A stage that names a route is resolved after every
route is validated: an unknown name and a cycle (``a`` → ``b`` → ``a``) are errors at the path of
the reference.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from switchyard.routers.base import RouterSpec

PathT = tuple[str | int, ...]
Validate = Callable[[PathT, Any], "RouterSpec | None"]
Report = Callable[[PathT, str], None]


def split(sub: str) -> PathT:
    """``"stages[1].target"`` → ``("stages", 1, "target")``."""
    parts: list[str | int] = []
    for piece in re.findall(r"[^.\[\]]+|\[\d+\]", sub):
        parts.append(int(piece[1:-1]) if piece.startswith("[") else piece)
    return tuple(parts)


def attach_inline(spec: RouterSpec, prefix: PathT, validate: Validate, report: Report) -> bool:
    """Validates and attaches every inline block under ``spec`` (recursively).

    Returns:
        Whether every inline block validated.
    """
    complete = True
    for sub, block in spec.inline_blocks():
        path = (*prefix, *split(sub))
        if not isinstance(block, Mapping):
            report(path, "an inline router must be a mapping with a 'type'")
            complete = False
            continue
        misplaced = [k for k in RouterSpec.ROUTE_KEYS if k in block]
        for key in misplaced:
            where = "on the route itself" if key != "subagents" else "on the route, not inside a stage or policy"
            report((*path, key), f"'{key}' belongs {where}")
        child = validate(path, dict(block))
        if child is None or misplaced:
            complete = False
            continue
        if not attach_inline(child, path, validate, report):
            complete = False
            continue
        spec.attach(sub, child)
    return complete


def _inline_children(spec: RouterSpec) -> Iterator[tuple[str, RouterSpec]]:
    for sub, _ in spec.inline_blocks():
        try:
            yield sub, spec.nested(sub)
        except KeyError:
            continue


def route_refs(spec: RouterSpec, prefix: PathT = ()) -> Iterator[tuple[PathT, RouterSpec, str, str]]:
    """Every route reference in ``spec``'s tree: ``(path, owning spec, sub-path, route name)``."""
    for sub, name in spec.route_refs():
        yield (*prefix, *split(sub)), spec, sub, name
    for sub, child in _inline_children(spec):
        yield from route_refs(child, (*prefix, *split(sub)))


def resolve_routes(routes: Mapping[str, RouterSpec], raw_names: set[str], report: Report) -> set[str]:
    """Attaches the spec of every route a stage names; reports unknown names and cycles.

    Args:
        routes: Routes that validated.
        raw_names: Every route name in the file (a reference to a route that failed validation
            is not reported again).
        report: Receives ``(yaml path, message)``.

    Returns:
        Names of routes left unresolved (their errors are reported; leave them out).
    """
    broken: set[str] = set()
    edges: dict[str, list[tuple[PathT, str]]] = {}
    for name, spec in routes.items():
        for path, owner, sub, target in route_refs(spec, ("routes", name)):
            edges.setdefault(name, []).append((path, target))
            if target in routes:
                owner.attach(sub, routes[target])
                continue
            broken.add(name)
            if target not in raw_names:
                close = difflib.get_close_matches(target, list(raw_names), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f"; routes: {', '.join(sorted(raw_names))}"
                report(path, f"unknown route {target!r}{hint}")
    for cycle_path, cycle in _cycles(edges):
        report(cycle_path, "routes refer to each other in a cycle: " + " → ".join(cycle))
        broken.update(cycle)
    return broken


def _cycles(edges: Mapping[str, list[tuple[PathT, str]]]) -> list[tuple[PathT, list[str]]]:
    """Each cycle once, reported at the reference that closes it."""
    found: list[tuple[PathT, list[str]]] = []
    seen_cycles: set[frozenset[str]] = set()
    done: set[str] = set()

    def visit(node: str, stack: list[str], on_stack: set[str]) -> None:
        for path, nxt in edges.get(node, []):
            if nxt in on_stack:
                cycle = [*stack[stack.index(nxt) :], nxt]
                key = frozenset(cycle)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    found.append((path, cycle))
            elif nxt not in done and nxt in edges:
                stack.append(nxt)
                on_stack.add(nxt)
                visit(nxt, stack, on_stack)
                on_stack.discard(nxt)
                stack.pop()
        done.add(node)

    for start in list(edges):
        if start not in done:
            visit(start, [start], {start})
    return found
