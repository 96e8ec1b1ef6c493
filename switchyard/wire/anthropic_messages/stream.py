"""Anthropic Messages streams ⇄ IR stream events.

Layer: ``wire`` — imports ``protocol`` only.

The stream grammar both sides keep (and the SDK relies on): one ``message_start`` first; per
content block a ``content_block_start``, its deltas and one ``content_block_stop``, with block
indexes 0, 1, 2 …; one or more ``message_delta`` (stop reason, cumulative usage); one
``message_stop`` last. Every event has an ``event:`` line equal to its JSON ``type`` — the SDK
dispatches on the event name and ignores unnamed events.
"""

from __future__ import annotations

from typing import Any

import orjson

from switchyard.protocol.errors import ErrorInfo, UpstreamProtocolError
from switchyard.protocol.messages import ReasoningPart
from switchyard.protocol.response import StopReason, Usage
from switchyard.protocol.stream import (
    MessageStart,
    MessageStop,
    ReasoningDelta,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
    merge_usage,
)
from switchyard.wire import custom_tools, reasoning
from switchyard.wire.anthropic_messages.response import (
    FORMAT,
    STOP_TO_ANTHROPIC,
    decode_usage,
    encode_error,
    encode_usage,
    status_for_type,
    stop_reason,
)
from switchyard.wire.ids import anthropic_tool_id, new_id
from switchyard.wire.sse import SSEEvent, frame
from switchyard.wire.stream_decode import TemplateDecoder, event_json, learn
from switchyard.wire.text_run import TextRun

PING = frame(b'{"type":"ping"}', "ping")
"""A ``ping`` event (keep-alive the SDK skips)."""


def event(payload: dict[str, Any]) -> bytes:
    """One named SSE event whose name is the payload's ``type``."""
    return frame(orjson.dumps(payload), str(payload["type"]))


class AnthropicStreamDecoder(TemplateDecoder):
    """Decodes an Anthropic event stream.

    Tool-use blocks are numbered 0, 1, … in order of appearance (``ToolCallDelta.index``).
    A stream that ends without ``message_stop`` is incomplete and raises
    ``UpstreamProtocolError`` — unless a ``message_delta`` already gave the stop reason.
    """

    def __init__(self) -> None:
        super().__init__()
        self._started = False
        self._blocks: dict[int, str] = {}  # block index -> kind
        self._tool_ordinal: dict[int, int] = {}  # block index -> tool call ordinal
        self._tool_args: dict[int, bool] = {}  # block index -> any argument fragment seen
        self._stop: StopReason | None = None
        self._stop_sequence: str | None = None

    def feed(self, sse: SSEEvent) -> list[StreamEvent]:
        template = self._template
        if template is not None:
            text = template.text(sse.data)
            if text is not None:
                return [TextDelta(text=text)] if text else []
        if sse.data.startswith("[DONE]"):
            return self.finish()
        data = event_json(sse.data)
        kind = data.get("type") or sse.event
        handler = _HANDLERS.get(str(kind))
        if handler is None:
            return []
        out = handler(self, data)
        if template is None and kind == "content_block_delta" and len(out) == 1 and type(out[0]) is TextDelta:
            # Only an event that names its own type: the event's name is not part of a template.
            if data.get("type"):
                self._learn(sse.data, out[0].text)
        return out

    def _learn(self, data: str, text: str) -> None:
        """Keeps ``data``, a text delta, as the fast path's template: such an event means its
        block index and its text, nothing else."""
        self._template = learn(data, '"text":', text)

    def _message_start(self, data: dict[str, Any]) -> list[StreamEvent]:
        msg = data.get("message") or {}
        self._started = True
        out: list[StreamEvent] = [MessageStart(id=str(msg.get("id") or ""), model=str(msg.get("model") or ""))]
        usage = decode_usage(msg.get("usage"))
        if usage != Usage():
            out.append(UsageDelta(usage=usage))
        return out

    def _block_start(self, data: dict[str, Any]) -> list[StreamEvent]:
        index = _index(data)
        block = data.get("content_block") or {}
        kind = str(block.get("type"))
        self._blocks[index] = kind
        if kind == "text":
            text = block.get("text")
            return [TextDelta(text=text)] if isinstance(text, str) and text else []
        if kind == "thinking":
            return [ReasoningDelta(text=str(block.get("thinking") or ""), provider=FORMAT)]
        if kind == "redacted_thinking":
            return [ReasoningDelta(redacted=str(block.get("data") or ""), provider=FORMAT)]
        if kind == "tool_use":
            ordinal = len(self._tool_ordinal)
            self._tool_ordinal[index] = ordinal
            initial = block.get("input")
            args = orjson.dumps(initial).decode() if isinstance(initial, dict) and initial else ""
            self._tool_args[index] = bool(args)
            return [
                ToolCallDelta(
                    index=ordinal, id=str(block.get("id") or ""), name=str(block.get("name") or ""), arguments=args
                )
            ]
        return []

    def _block_delta(self, data: dict[str, Any]) -> list[StreamEvent]:
        index = _index(data)
        delta = data.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text") or "")
            return [TextDelta(text=text)] if text else []
        if kind == "thinking_delta":
            return [ReasoningDelta(text=str(delta.get("thinking") or ""), provider=FORMAT)]
        if kind == "signature_delta":
            return [ReasoningDelta(signature=str(delta.get("signature") or ""), provider=FORMAT)]
        if kind == "input_json_delta" and index in self._tool_ordinal:
            fragment = str(delta.get("partial_json") or "")
            if not fragment:
                return []
            self._tool_args[index] = True
            return [ToolCallDelta(index=self._tool_ordinal[index], arguments=fragment)]
        return []

    def _block_stop(self, data: dict[str, Any]) -> list[StreamEvent]:
        index = _index(data)
        if index in self._tool_ordinal and not self._tool_args.get(index):
            # A tool without arguments still needs a JSON document for Chat/Responses callers.
            self._tool_args[index] = True
            return [ToolCallDelta(index=self._tool_ordinal[index], arguments="{}")]
        return []

    def _message_delta(self, data: dict[str, Any]) -> list[StreamEvent]:
        delta = data.get("delta") or {}
        if delta.get("stop_reason") is not None:
            self._stop = stop_reason(delta.get("stop_reason"))
            sequence = delta.get("stop_sequence")
            self._stop_sequence = sequence if isinstance(sequence, str) else None
        usage = decode_usage(data.get("usage"))
        return [UsageDelta(usage=usage)] if usage != Usage() else []

    def _message_stop(self, data: dict[str, Any]) -> list[StreamEvent]:
        self._done = True
        return [MessageStop(stop_reason=self._stop or "end_turn", stop_sequence=self._stop_sequence)]

    def _error(self, data: dict[str, Any]) -> list[StreamEvent]:
        err = data.get("error") or {}
        kind = str(err.get("type") or "api_error")
        self._done = True
        info = ErrorInfo(status=status_for_type(kind), type=kind, code=kind, message=str(err.get("message") or ""))
        return [StreamError(error=info)]

    def finish(self) -> list[StreamEvent]:
        if self._done:
            return []
        self._done = True
        if self._stop is not None:
            return [MessageStop(stop_reason=self._stop, stop_sequence=self._stop_sequence)]
        raise UpstreamProtocolError("upstream Anthropic stream ended before message_stop")


def _index(data: dict[str, Any]) -> int:
    index = data.get("index")
    if not isinstance(index, int):
        raise UpstreamProtocolError("upstream Anthropic stream event without a block index")
    return index


_HANDLERS = {
    "message_start": AnthropicStreamDecoder._message_start,
    "content_block_start": AnthropicStreamDecoder._block_start,
    "content_block_delta": AnthropicStreamDecoder._block_delta,
    "content_block_stop": AnthropicStreamDecoder._block_stop,
    "message_delta": AnthropicStreamDecoder._message_delta,
    "message_stop": AnthropicStreamDecoder._message_stop,
    "error": AnthropicStreamDecoder._error,
}


class AnthropicStreamEncoder:
    """Encodes IR stream events as an Anthropic event stream.

    ``message_start`` is held back until the first content event so that it can carry the
    input usage an upstream reports at its start; the final ``message_delta`` repeats all
    usage counts (cumulative, as Anthropic does).
    """

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._id = new_id("msg_")
        self._usage = Usage()
        self._started = False
        self._finished = False
        self._next_index = 0
        self._open: str | None = None  # kind of the open block
        self._pending_reasoning: dict[str, Any] = {}
        self._tool_index: int | None = None  # IR ordinal of the open tool block
        self._tool_kind = "function"

    def _start(self) -> bytes:
        self._started = True
        message: dict[str, Any] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": encode_usage(self._usage),
        }
        return event({"type": "message_start", "message": message})

    def _open_block(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close_block()
        self._open = kind
        out += event({"type": "content_block_start", "index": self._next_index, "content_block": block})
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return event({"type": "content_block_delta", "index": self._next_index, "delta": delta})

    def _close_block(self) -> bytes:
        if self._open is None:
            return b""
        out = b""
        if self._open == "thinking":
            out += self._delta({"type": "signature_delta", "signature": self._signature()})
        elif self._open == "tool_use" and self._tool_kind == "custom":
            out += self._delta({"type": "input_json_delta", "partial_json": '"}'})
        out += event({"type": "content_block_stop", "index": self._next_index})
        self._open = None
        self._next_index += 1
        self._pending_reasoning = {}
        return out

    def _signature(self) -> str:
        pending = self._pending_reasoning
        if pending.get("provider") == FORMAT and pending.get("signature") is not None:
            return str(pending["signature"])
        return reasoning.pack(
            ReasoningPart(
                text=pending.get("text", ""),
                provider=pending.get("provider"),
                encrypted=pending.get("encrypted"),
                item_id=pending.get("item_id"),
                signature=pending.get("signature"),
            )
        )

    def encode(self, ev: StreamEvent | TextRun) -> bytes:
        if type(ev) is TextRun:
            return self._run(ev)
        if self._finished:
            return b""
        if isinstance(ev, MessageStart):
            if ev.id.startswith("msg_"):
                self._id = ev.id
            return b""
        if isinstance(ev, UsageDelta):
            self._usage = merge_usage(self._usage, ev.usage)
            return b""
        if isinstance(ev, StreamError):
            self._finished = True
            return stream_error(ev.error)
        out = b"" if self._started else self._start()
        if isinstance(ev, TextDelta):
            if not ev.text:
                return out
            if self._open != "text":
                out += self._open_block("text", {"type": "text", "text": ""})
            return out + self._delta({"type": "text_delta", "text": ev.text})
        if isinstance(ev, ReasoningDelta):
            return out + self._reasoning(ev)
        if isinstance(ev, ToolCallDelta):
            return out + self._tool(ev)
        if isinstance(ev, MessageStop):
            out += self._close_block()
            self._finished = True
            usage = encode_usage(self._usage)
            delta = {
                "stop_reason": STOP_TO_ANTHROPIC[ev.stop_reason],
                "stop_sequence": ev.stop_sequence if ev.stop_reason == "stop_sequence" else None,
            }
            out += event({"type": "message_delta", "delta": delta, "usage": usage})
            return out + event({"type": "message_stop"})
        return out

    def _run(self, run: TextRun) -> bytes:
        """The events of ``run``'s texts: those ``encode`` writes for one ``TextDelta`` each
        (the deltas of an open text block from their fixed parts: the bytes of ``event``)."""
        texts = run.texts
        out = b""
        if not (self._started and not self._finished and self._open == "text"):
            out = self.encode(TextDelta(text=texts[0])) if texts else b""  # opens the message, the block
            texts = texts[1:]
            if self._finished or self._open != "text":
                return out + b"".join([self.encode(TextDelta(text=text)) for text in texts])
        head = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,' % self._next_index
        head += b'"delta":{"type":"text_delta","text":'
        return out + b"".join([head + orjson.dumps(text) + b"}}\n\n" for text in texts])

    def _reasoning(self, ev: ReasoningDelta) -> bytes:
        out = b""
        if ev.redacted is not None and ev.provider == FORMAT:
            out += self._close_block()
            out += event(
                {
                    "type": "content_block_start",
                    "index": self._next_index,
                    "content_block": {"type": "redacted_thinking", "data": ev.redacted},
                }
            )
            out += event({"type": "content_block_stop", "index": self._next_index})
            self._next_index += 1
            return out
        new_item = ev.item_id is not None and self._pending_reasoning.get("item_id") not in (None, ev.item_id)
        if self._open != "thinking" or new_item:
            out += self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
        pending = self._pending_reasoning
        for key in ("provider", "encrypted", "item_id", "redacted"):
            value = getattr(ev, key)
            if value is not None:
                pending[key] = value
        if ev.text:
            pending["text"] = pending.get("text", "") + ev.text
            out += self._delta({"type": "thinking_delta", "thinking": ev.text})
        if ev.signature is not None:
            pending["signature"] = pending.get("signature", "") + ev.signature
            if ev.provider == FORMAT:
                # Anthropic sends the signature last: the block is complete.
                out += self._close_block()
        return out

    def _tool(self, ev: ToolCallDelta) -> bytes:
        out = b""
        if self._open != "tool_use" or self._tool_index != ev.index:
            self._tool_kind = ev.kind
            block = {
                "type": "tool_use",
                "id": anthropic_tool_id(ev.id or ""),
                "name": ev.name or "",
                "input": {},
            }
            out += self._open_block("tool_use", block)
            self._tool_index = ev.index
            if ev.kind == "custom":
                out += self._delta({"type": "input_json_delta", "partial_json": '{"' + custom_tools.PARAM + '": "'})
        if ev.arguments:
            fragment = orjson.dumps(ev.arguments).decode()[1:-1] if self._tool_kind == "custom" else ev.arguments
            out += self._delta({"type": "input_json_delta", "partial_json": fragment})
        return out

    def finish(self) -> bytes:
        if self._finished:
            return b""
        self._finished = True
        return stream_error(ErrorInfo(status=502, message="upstream stream ended before the answer was complete"))


def stream_error(error: ErrorInfo) -> bytes:
    """An ``error`` event (the Anthropic SDK raises on it)."""
    return event(encode_error(error, details=False))
