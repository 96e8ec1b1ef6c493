"""Which model id a reply names: the one the caller asked for, or the upstream's.

Layer: ``engine``.

Agents compare the reply's ``model`` with the model they asked for. Claude Code, for one, keeps
the signed thinking blocks of a turn in the history it sends back only when the reply's
``model`` is the model it requested; with another id it drops them, and the next tool turn
fails at Anthropic ("a final assistant message must start with a thinking block"). So replies
name the requested model (the route id or alias) by default. The served target is always in
the ``x-switchyard-selected-model`` header and the decision record.
"""

from __future__ import annotations

from typing import Literal

ReplyModel = Literal["requested", "upstream"]
"""``requested``: the model id the caller sent; ``upstream``: the served target's model id."""

DEFAULT: ReplyModel = "requested"


def reply_model(setting: ReplyModel, requested: str, upstream: str | None) -> str:
    """The model id to put in a reply.

    Args:
        setting: The route's (or the config's) ``reply_model``.
        requested: The ``model`` of the caller's request.
        upstream: The served target's model id, when one served.
    """
    if setting == "upstream" and upstream:
        return upstream
    return requested or upstream or ""
