"""Messages and content parts of the provider-neutral IR.

Layer: ``protocol`` — imports nothing of ours (stdlib and pydantic only).

Every wire format decodes into these types and encodes from them. The shapes follow the
union of what OpenAI Chat Completions, Anthropic Messages and OpenAI Responses can say, so
that a conversation survives a trip between any two of them; where a format cannot say
something, its codec reports a diagnostic instead of dropping it silently.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "developer", "user", "assistant", "tool"]
"""Who wrote a message. ``tool`` messages carry tool results."""


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class TextPart(_Part):
    """Plain text.

    Attributes:
        text: The text.
        cache_control: Anthropic prompt-cache marker carried through unchanged, if any.
    """

    type: Literal["text"] = "text"
    text: str
    cache_control: dict[str, Any] | None = None


class ImagePart(_Part):
    """An image given by URL or inline base64 data.

    Attributes:
        url: An ``http(s)`` URL (``data:`` URIs are split into ``data``/``media_type`` on decode).
        data: Base64 payload when the image is inline.
        media_type: MIME type of inline data, e.g. ``image/png``.
        detail: OpenAI's ``detail`` hint (``low``/``high``/``auto``), kept when present.
    """

    type: Literal["image"] = "image"
    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: str | None = None
    cache_control: dict[str, Any] | None = None

    def as_data_uri(self) -> str | None:
        """Returns the image as a ``data:`` URI when it is inline, else ``None``."""
        if self.data is None:
            return None
        return f"data:{self.media_type or 'image/png'};base64,{self.data}"


class ToolCallPart(_Part):
    """A call the assistant made to a tool.

    Attributes:
        id: The call id; tool results refer to it.
        name: The tool's name.
        arguments: For ``function`` tools the arguments as a JSON document (a string, as
            OpenAI sends it); for ``custom`` (free-form) tools the raw input text.
        kind: ``function`` for JSON-argument tools, ``custom`` for free-form ones.
    """

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: str = "{}"
    kind: Literal["function", "custom"] = "function"


class ToolResultPart(_Part):
    """The result of one tool call, given back to the model.

    Attributes:
        call_id: Id of the :class:`ToolCallPart` this answers.
        content: Text and image parts of the result.
        is_error: Whether the tool reported a failure (Anthropic ``is_error``).
        kind: Mirrors the call's kind so a free-form tool's output stays free-form.
    """

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    content: list[TextPart | ImagePart] = Field(default_factory=list)
    is_error: bool = False
    kind: Literal["function", "custom"] = "function"
    cache_control: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """Concatenated text of the result."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


class ReasoningPart(_Part):
    """Reasoning (thinking) the model produced.

    Attributes:
        text: The reasoning text (may be empty when a provider redacts it).
        signature: An opaque signature issued by the provider that produced the block.
        provider: Which wire format issued ``signature``/``encrypted`` (``anthropic_messages``,
            ``openai_responses``); signatures are only ever sent back to that provider.
        redacted: Anthropic ``redacted_thinking`` data, passed back verbatim.
        encrypted: OpenAI Responses ``encrypted_content``, passed back verbatim.
        item_id: Responses reasoning item id, kept for verbatim replay.
    """

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    signature: str | None = None
    provider: str | None = None
    redacted: str | None = None
    encrypted: str | None = None
    item_id: str | None = None


ContentPart = Annotated[
    TextPart | ImagePart | ToolCallPart | ToolResultPart | ReasoningPart,
    Field(discriminator="type"),
]
"""Any content part; discriminated on ``type``."""


class Message(BaseModel):
    """One message of a conversation.

    Attributes:
        role: Who wrote it.
        content: Ordered content parts.
        name: Optional participant name (OpenAI ``name``).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    role: Role
    content: list[ContentPart] = Field(default_factory=list)
    name: str | None = None

    @property
    def text(self) -> str:
        """Concatenated text parts (not tool results or reasoning)."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """Tool calls in this message, in order."""
        return [p for p in self.content if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """Tool results in this message, in order."""
        return [p for p in self.content if isinstance(p, ToolResultPart)]

    @classmethod
    def of(cls, role: Role, text: str) -> Message:
        """Builds a message holding one text part."""
        return cls(role=role, content=[TextPart(text=text)])


def message_chars(message: Message) -> int:
    """Characters a message adds to a context: its text and reasoning, each tool call's name and
    arguments, each tool result's text (images count nothing). The trajectory router's context
    feature and the engine's prompt-size check both count with it."""
    n = 0
    for part in message.content:
        kind = type(part)  # exact types: cheaper than isinstance on a union (runs per request)
        if kind is TextPart or kind is ReasoningPart or kind is ToolResultPart:
            n += len(part.text)  # type: ignore[union-attr]  # a tool result's text: its text parts
        elif kind is ToolCallPart:
            n += len(part.name) + len(part.arguments)  # type: ignore[union-attr]
    return n
