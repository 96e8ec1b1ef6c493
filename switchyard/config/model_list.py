"""``GET /v1/models/{id}``: one route (or alias) described, in the caller's API family.

Layer: ``config`` — builds on :func:`switchyard.config.build.describe_routes`.

Agents look a model up before they use it: Hermes Agent reads its context length there, the
Anthropic SDK's ``models.retrieve`` expects Anthropic's shape. A route or alias answers with its
``/v1/models`` entry; with a ``default_route`` any other id is served by that route and is
described as such; otherwise the id is unknown (404). Target names and upstream model ids are
not listed on their own: a request naming one would not select a route.
"""

from __future__ import annotations

from typing import Any

from switchyard.config.build import describe_routes
from switchyard.engine.core import Engine

_EPOCH = "1970-01-01T00:00:00Z"


def describe_model(engine: Engine, model_id: str) -> dict[str, Any] | None:
    """The OpenAI-style entry for ``model_id``, or ``None`` when no route serves it."""
    entries = {e["id"]: e for e in describe_routes(engine)}
    if model_id in entries:
        return entries[model_id]
    default = engine.default_route
    if default is not None and default in entries:
        return {**entries[default], "id": model_id, "alias_of": default}
    return None


def anthropic_shape(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry in Anthropic's ``ModelInfo`` shape (``models.retrieve`` of the Anthropic SDK)."""
    out: dict[str, Any] = {
        "type": "model",
        "id": entry["id"],
        "display_name": entry.get("description") or entry["id"],
        "created_at": _EPOCH,
    }
    for key in ("context_window", "max_model_len", "router", "targets", "alias_of"):
        if key in entry:
            out[key] = entry[key]
    return out
