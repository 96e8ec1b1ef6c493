"""``GET /v1/models`` and ``GET /v1/models/{id}``: routes described in the caller's API family.

Layer: ``config`` — builds on :func:`switchyard.config.build.describe_routes`.

Agents look a model up before they use it: Hermes Agent reads its context length there, the
Anthropic SDK's ``models.retrieve`` expects Anthropic's shape. A route or alias answers with its
``/v1/models`` entry; with a ``default_route`` any other id is served by that route and is
described as such; otherwise the id is unknown (404). Target names and upstream model ids are
not listed on their own: a request naming one would not select a route.

The list is OpenAI's ``{"object": "list", "data": [...]}`` unless the caller is an Anthropic
client (it sends ``anthropic-version``): then it is Anthropic's page — ``data`` of ``ModelInfo``,
``first_id``, ``last_id``, ``has_more`` — honouring ``limit`` (1-1000, default 20), ``after_id``
and ``before_id`` as Anthropic's List Models does, so the Anthropic SDK's ``models.list()``
(which pages with ``after_id``) reads every route.
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
    if "context_window" in entry:
        out["max_input_tokens"] = entry["context_window"]
    for key in ("context_window", "max_model_len", "router", "targets", "alias_of"):
        if key in entry:
            out[key] = entry[key]
    return out


def anthropic_page(entries: list[dict[str, Any]], query: str) -> dict[str, Any]:
    """Anthropic's List Models page over ``entries`` for a query string.

    Raises:
        ValueError: A bad ``limit`` (not an integer in 1-1000) or an unknown cursor id; the
            message names the parameter.
    """
    from urllib.parse import parse_qs

    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    raw = params.get("limit", "20")
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= 1000:
        raise ValueError(f"limit: must be an integer from 1 to 1000, got {raw!r}")
    ids = [e["id"] for e in entries]
    start, stop = 0, len(entries)
    for key in ("after_id", "before_id"):
        if key in params and params[key] not in ids:
            raise ValueError(f"{key}: no model {params[key]!r}")
    if "before_id" in params:
        stop = ids.index(params["before_id"])
        start = max(0, stop - limit)
        more = start > 0
    else:
        if "after_id" in params:
            start = ids.index(params["after_id"]) + 1
        stop = min(len(entries), start + limit)
        more = stop < len(entries)
    page = [anthropic_shape(e) for e in entries[start:stop]]
    return {
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": more,
    }
