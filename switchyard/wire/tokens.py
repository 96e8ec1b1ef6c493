"""Prompt-size estimates for upstreams that cannot count tokens themselves.

Layer: ``wire`` — imports ``protocol`` only.

The estimate is deliberately simple and documented (``docs/translation.md``): about four
characters per token over everything the model reads — system text, message text, tool-call
names and arguments, tool results, reasoning kept in the history, and each tool definition's
JSON — plus four tokens of framing per message and 1,600 tokens per image (Anthropic's figure
for a ~1.15 megapixel image; the real cost depends on the image size, which is not known here).
"""

from __future__ import annotations

import orjson

from switchyard.protocol.messages import ImagePart, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest

CHARS_PER_TOKEN = 4
PER_MESSAGE = 4
PER_IMAGE = 1600


def estimate_input_tokens(request: ChatRequest) -> int:
    """Approximate prompt tokens of ``request`` (see the module docstring for the method)."""
    chars = 0
    images = 0
    for msg in request.messages:
        for part in msg.content:
            if isinstance(part, TextPart | ReasoningPart):
                chars += len(part.text)
            elif isinstance(part, ToolCallPart):
                chars += len(part.name) + len(part.arguments)
            elif isinstance(part, ToolResultPart):
                chars += len(part.text)
                images += sum(isinstance(c, ImagePart) for c in part.content)
            elif isinstance(part, ImagePart):
                images += 1
    for tool in request.tools:
        chars += len(orjson.dumps(tool.model_dump(exclude_none=True)))
    text_tokens = (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    return text_tokens + PER_MESSAGE * len(request.messages) + PER_IMAGE * images
