"""Tool definitions and tool choice.

Layer: ``protocol`` — imports nothing of ours.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class ToolDefinition(BaseModel):
    """A tool the model may call.

    Attributes:
        name: Tool name.
        description: What the tool does.
        parameters: JSON Schema of the arguments (``function`` tools); ``None`` means any object.
        strict: OpenAI ``strict`` flag, forwarded where the upstream understands it.
        kind: ``function`` (JSON arguments) or ``custom`` (free-form text input, e.g. Codex's
            ``apply_patch``).
        format: Grammar/format description of a ``custom`` tool, kept verbatim.
        cache_control: Anthropic prompt-cache marker, kept verbatim.
        native: Keys of the caller's tool definition the IR has no slot for (e.g. Anthropic's
            ``defer_loading`` for tool search), sent back only to an upstream of the caller's
            own format.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    kind: Literal["function", "custom"] = "function"
    format: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None
    native: dict[str, Any] | None = None


class ToolChoice(BaseModel):
    """How the model must use tools.

    Attributes:
        mode: ``auto`` (model decides), ``none`` (no tools), ``required`` (some tool), or
            ``tool`` (the tool called ``name``).
        name: Tool name when ``mode == "tool"``.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    mode: Literal["auto", "none", "required", "tool"] = "auto"
    name: str | None = None
