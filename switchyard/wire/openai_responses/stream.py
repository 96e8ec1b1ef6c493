"""OpenAI Responses streams ⇄ IR stream events.

Layer: ``wire`` — imports ``protocol`` only.

Invariants of the encoder (what Codex and the openai SDK's stream helper require):
``sequence_number`` starts at 0 and increases by one per event; ``response.created`` then
``response.in_progress`` come first; every output item is announced by
``response.output_item.added`` before its deltas and finished by ``response.output_item.done``
carrying the complete item, at the ``output_index`` it has in the final ``output``; the stream
always ends with exactly one of ``response.completed``, ``response.incomplete`` or
``response.failed``; never ``[DONE]``. Every event has an ``event:`` line equal to its ``type``.
"""

from __future__ import annotations

import time
from dataclasses import field
from typing import Any, Literal

import orjson

from switchyard._dataclass import dataclass
from switchyard.protocol.errors import ErrorInfo, UpstreamProtocolError
from switchyard.protocol.messages import ReasoningPart, ToolCallPart
from switchyard.protocol.response import Usage
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
from switchyard.wire.ids import new_id
from switchyard.wire.openai_responses.response import (
    FORMAT,
    call_item,
    decode_usage,
    message_item,
    reasoning_item,
    reasoning_part,
    response_object,
    status_for,
    stop_from_status,
)
from switchyard.wire.sse import SSEEvent, frame
from switchyard.wire.stream_decode import TemplateDecoder, event_json, learn

# -- decoding -------------------------------------------------------------------------------


class ResponsesStreamDecoder(TemplateDecoder):
    """Decodes a Responses event stream (OpenAI's named events or vLLM's ``data:``-only ones)."""

    def __init__(self) -> None:
        super().__init__()
        self._ordinals: dict[str, int] = {}  # item id -> tool call ordinal
        self._kinds: dict[str, Literal["function", "custom"]] = {}
        # item id -> the text/arguments already emitted, in pieces (joined once, when the item ends)
        self._streamed: dict[str, list[str]] = {}
        self._summary_index: dict[str, int] = {}
        self._has_calls = False
        self._template_item = ""  # the item the learned template's text belongs to

    def feed(self, sse: SSEEvent) -> list[StreamEvent]:
        template = self._template
        if template is not None:
            text = template.text(sse.data)
            if text is not None:
                item_id = self._template_item
                self._streamed.setdefault(item_id, []).append(text)
                return [TextDelta(text=text)] if text else []
        if sse.data.startswith("[DONE]"):
            return self.finish()
        data = event_json(sse.data)
        kind = str(data.get("type") or sse.event or "")
        if kind == "response.created":
            resp = data.get("response") or {}
            created = resp.get("created_at")
            return [
                MessageStart(
                    id=str(resp.get("id") or ""),
                    model=str(resp.get("model") or ""),
                    created=int(created) if isinstance(created, int | float) else 0,
                )
            ]
        if kind == "response.output_item.added":
            return self._item_added(data.get("item") or {})
        if kind == "response.output_item.done":
            return self._item_done(data.get("item") or {})
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = str(data.get("delta") or "")
            item_id = str(data.get("item_id") or "")
            self._streamed.setdefault(item_id, []).append(delta)
            if template is None and data.get("type") and type(data.get("delta")) is str:
                self._learn(sse.data, delta, item_id)
            return [TextDelta(text=delta)] if delta else []
        if kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            return self._tool_delta(str(data.get("item_id") or ""), str(data.get("delta") or ""))
        if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            return self._reasoning_delta(data, summary=kind.endswith("summary_text.delta"))
        if kind in ("response.completed", "response.incomplete"):
            resp = data.get("response") or {}
            self._done = True
            return [
                UsageDelta(usage=decode_usage(resp.get("usage"))),
                MessageStop(stop_reason=stop_from_status(resp, self._has_calls)),
            ]
        if kind in ("response.failed", "error"):
            self._done = True
            return [StreamError(error=_error_info(data))]
        return []

    def _learn(self, data: str, text: str, item_id: str) -> None:
        """Keeps ``data``, a text delta of ``item_id``, as the fast path's template: such an event
        means its type, its item and its text, nothing else (``sequence_number`` is not read)."""
        self._template = learn(data, '"delta":', text, number='"sequence_number":')
        self._template_item = item_id

    def _item_added(self, item: dict[str, Any]) -> list[StreamEvent]:
        kind = item.get("type")
        if kind not in ("function_call", "custom_tool_call"):
            return []
        item_id = str(item.get("id") or item.get("call_id") or "")
        ordinal = len(self._ordinals)
        self._ordinals[item_id] = ordinal
        self._has_calls = True
        tool_kind: Literal["function", "custom"] = "custom" if kind == "custom_tool_call" else "function"
        self._kinds[item_id] = tool_kind
        initial = str(item.get("input" if tool_kind == "custom" else "arguments") or "")
        self._streamed[item_id] = [initial]
        return [
            ToolCallDelta(
                index=ordinal,
                id=str(item.get("call_id") or ""),
                name=str(item.get("name") or ""),
                arguments=initial,
                kind=tool_kind,
            )
        ]

    def _tool_delta(self, item_id: str, delta: str) -> list[StreamEvent]:
        if item_id not in self._ordinals or not delta:
            return []
        self._streamed[item_id].append(delta)
        kind = self._kinds[item_id]
        return [ToolCallDelta(index=self._ordinals[item_id], arguments=delta, kind=kind)]

    def _reasoning_delta(self, data: dict[str, Any], *, summary: bool) -> list[StreamEvent]:
        item_id = str(data.get("item_id") or "")
        delta = str(data.get("delta") or "")
        if summary:
            index = data.get("summary_index", 0)
            last = self._summary_index.get(item_id)
            if last is not None and index != last:
                delta = "\n\n" + delta
            self._summary_index[item_id] = index if isinstance(index, int) else 0
        self._streamed.setdefault(item_id, []).append(delta)
        return [ReasoningDelta(text=delta, item_id=item_id, provider=FORMAT)] if delta else []

    def _item_done(self, item: dict[str, Any]) -> list[StreamEvent]:
        kind = item.get("type")
        item_id = str(item.get("id") or item.get("call_id") or "")
        seen = "".join(self._streamed.get(item_id, ()))
        if kind in ("function_call", "custom_tool_call"):
            if item_id not in self._ordinals:
                self._item_added({**item, "arguments": "", "input": ""})
                seen = ""
            full = str(item.get("input" if kind == "custom_tool_call" else "arguments") or "")
            rest = full[len(seen) :] if full.startswith(seen) else ""
            return self._tool_delta(item_id, rest) if rest else []
        if kind == "message":
            text = "".join(
                str(c.get("text") or c.get("refusal") or "") for c in item.get("content") or [] if isinstance(c, dict)
            )
            return [TextDelta(text=text)] if text and not seen else []
        if kind == "reasoning":
            part = reasoning_part(item)
            out: list[StreamEvent] = []
            if part.text and not seen:
                out.append(ReasoningDelta(text=part.text, item_id=item_id, provider=part.provider))
            if part.encrypted is not None or part.signature is not None or part.redacted is not None or not out:
                out.append(
                    ReasoningDelta(
                        item_id=item_id,
                        provider=part.provider,
                        encrypted=part.encrypted,
                        signature=part.signature,
                        redacted=part.redacted,
                    )
                )
            return out
        return []

    def finish(self) -> list[StreamEvent]:
        if self._done:
            return []
        self._done = True
        raise UpstreamProtocolError("upstream Responses stream closed before response.completed")


def _error_info(data: dict[str, Any]) -> ErrorInfo:
    if data.get("type") == "response.failed":
        err = (data.get("response") or {}).get("error") or {}
    else:
        err = data.get("error") if isinstance(data.get("error"), dict) else data
    code = err.get("code") if isinstance(err, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    status = 429 if code == "rate_limit_exceeded" else 503 if code == "server_is_overloaded" else 502
    return ErrorInfo(status=status, type="api_error", code=str(code) if code else None, message=str(message or ""))


# -- encoding -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Item:
    kind: str  # message | reasoning | function_call | custom_tool_call
    output_index: int
    id: str
    text: str = ""
    ordinal: int = -1
    call_id: str = ""
    name: str = ""
    provider: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    part_open: bool = False
    sealed: bool = False  # a reasoning item whose signature arrived


class ResponsesStreamEncoder:
    """Encodes IR stream events as a Responses event stream (see the module invariants)."""

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._id = new_id("resp_")
        self._created = int(time.time())
        self._seq = 0
        self._started = False
        self._finished = False
        self._output: list[dict[str, Any]] = []
        self._cur: _Item | None = None
        self._usage = Usage()

    def _emit(self, payload: dict[str, Any]) -> bytes:
        payload["sequence_number"] = self._seq
        self._seq += 1
        return frame(orjson.dumps(payload), str(payload["type"]))

    def _response(self, status: str, **kwargs: Any) -> dict[str, Any]:
        return response_object(response_id=self._id, model=self._model, created=self._created, status=status, **kwargs)

    def _start(self) -> bytes:
        self._started = True
        snapshot = self._response("in_progress", output=[], usage=None)
        return self._emit({"type": "response.created", "response": snapshot}) + self._emit(
            {"type": "response.in_progress", "response": dict(snapshot)}
        )

    def _open(self, kind: str, prefix: str, item: dict[str, Any], **attrs: Any) -> bytes:
        out = self._close()
        item_id = attrs.pop("id", None) or new_id(prefix)
        self._cur = _Item(kind=kind, output_index=len(self._output), id=item_id, **attrs)
        out += self._emit(
            {
                "type": "response.output_item.added",
                "output_index": self._cur.output_index,
                "item": {"id": item_id, "type": kind, **item},
            }
        )
        return out

    def _close(self, status: str = "completed") -> bytes:
        cur, self._cur = self._cur, None
        if cur is None:
            return b""
        base = {"item_id": cur.id, "output_index": cur.output_index}
        out = b""
        if cur.kind == "message":
            part = {"type": "output_text", "text": cur.text, "annotations": [], "logprobs": []}
            out += self._emit({"type": "response.output_text.done", **base, "content_index": 0, "text": cur.text})
            out += self._emit({"type": "response.content_part.done", **base, "content_index": 0, "part": part})
            item = message_item(cur.text, cur.id)
        elif cur.kind == "reasoning":
            out += self._close_reasoning_part(cur, base)
            thought = ReasoningPart(text=cur.text, provider=cur.provider, **cur.extras)
            item = reasoning_item(thought, cur.id)
        else:
            call = ToolCallPart(
                id=cur.call_id,
                name=cur.name,
                arguments=cur.text,
                kind="custom" if cur.kind == "custom_tool_call" else "function",
            )
            if cur.kind == "custom_tool_call":
                out += self._emit({"type": "response.custom_tool_call_input.done", **base, "input": cur.text})
            else:
                if not cur.text:
                    # A call without arguments still carries a JSON document, as in non-streamed answers.
                    cur.text = call.arguments = "{}"
                    out += self._emit({"type": "response.function_call_arguments.delta", **base, "delta": "{}"})
                done = {"type": "response.function_call_arguments.done", **base, "name": cur.name}
                out += self._emit({**done, "arguments": cur.text})
            item = call_item(call, cur.id)
        if status != "completed" and "status" in item:
            # A stream that fails mid-item must not call the item finished (issue 16).
            item = {**item, "status": status}
        self._output.append(item)
        return out + self._emit({"type": "response.output_item.done", "output_index": cur.output_index, "item": item})

    def _close_reasoning_part(self, cur: _Item, base: dict[str, Any]) -> bytes:
        if not cur.part_open:
            return b""
        part = {"type": "summary_text", "text": cur.text}
        out = self._emit({"type": "response.reasoning_summary_text.done", **base, "summary_index": 0, "text": cur.text})
        return out + self._emit(
            {"type": "response.reasoning_summary_part.done", **base, "summary_index": 0, "part": part}
        )

    def encode(self, ev: StreamEvent) -> bytes:
        if self._finished:
            return b""
        out = b"" if self._started else self._start()
        if isinstance(ev, MessageStart):
            return out
        if isinstance(ev, UsageDelta):
            self._usage = merge_usage(self._usage, ev.usage)
            return out
        if isinstance(ev, TextDelta):
            return out + self._text(ev.text)
        if isinstance(ev, ReasoningDelta):
            return out + self._reasoning(ev)
        if isinstance(ev, ToolCallDelta):
            return out + self._tool(ev)
        if isinstance(ev, MessageStop):
            out += self._close()
            self._finished = True
            status = status_for(ev.stop_reason)
            kind = "response.completed" if status == "completed" else "response.incomplete"
            final = self._response(status, output=list(self._output), usage=self._usage, stop=ev.stop_reason)
            return out + self._emit({"type": kind, "response": final})
        if isinstance(ev, StreamError):
            return out + self._fail(ev.error)
        return out

    def _fail(self, error: ErrorInfo) -> bytes:
        out = self._close("incomplete")
        self._finished = True
        final = self._response("failed", output=list(self._output), usage=self._usage, error=error)
        return out + self._emit({"type": "response.failed", "response": final})

    def _text(self, text: str) -> bytes:
        if not text:
            return b""
        out = b""
        if self._cur is None or self._cur.kind != "message":
            out += self._open("message", "msg_", {"status": "in_progress", "role": "assistant", "content": []})
            assert self._cur is not None
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out += self._emit(
                {
                    "type": "response.content_part.added",
                    "item_id": self._cur.id,
                    "output_index": self._cur.output_index,
                    "content_index": 0,
                    "part": part,
                }
            )
        cur = self._cur
        assert cur is not None
        cur.text += text
        delta = {"item_id": cur.id, "output_index": cur.output_index, "content_index": 0, "delta": text}
        return out + self._emit({"type": "response.output_text.delta", **delta, "logprobs": []})

    def _reasoning(self, ev: ReasoningDelta) -> bytes:
        out = b""
        cur = self._cur
        new_item = (
            cur is None
            or cur.kind != "reasoning"
            or cur.sealed
            or ev.redacted is not None
            or (ev.item_id is not None and cur.extras.get("item_id") not in (None, ev.item_id))
        )
        if new_item:
            provider = ev.provider
            own_id = ev.item_id if provider == FORMAT and ev.item_id else None
            item: dict[str, Any] = {"summary": []}
            if provider != FORMAT:
                item["content"] = []
            out += self._open("reasoning", "rs_", item, id=own_id, provider=provider)
            cur = self._cur
            assert cur is not None
        assert cur is not None
        for key in ("encrypted", "item_id", "redacted"):
            value = getattr(ev, key)
            if value is not None:
                cur.extras[key] = value
        if ev.provider is not None and cur.provider is None:
            cur.provider = ev.provider
        if ev.text:
            out += self._reasoning_text(cur, ev.text)
        if ev.signature is not None:
            cur.extras["signature"] = cur.extras.get("signature", "") + ev.signature
            cur.sealed = True
        if ev.redacted is not None:
            cur.sealed = True
        return out

    def _reasoning_text(self, cur: _Item, text: str) -> bytes:
        # Every provider's reasoning streams as summary events, which Responses clients render
        # (OpenAI's own is a summary; Claude's and vLLM's keep their full text as
        # `reasoning_text` content in the finished item, see reasoning_item).
        base = {"item_id": cur.id, "output_index": cur.output_index}
        out = b""
        if not cur.part_open:
            cur.part_open = True
            part = {"type": "summary_text", "text": ""}
            out += self._emit(
                {"type": "response.reasoning_summary_part.added", **base, "summary_index": 0, "part": part}
            )
        cur.text += text
        return out + self._emit(
            {"type": "response.reasoning_summary_text.delta", **base, "summary_index": 0, "delta": text}
        )

    def _tool(self, ev: ToolCallDelta) -> bytes:
        out = b""
        cur = self._cur
        if cur is None or cur.kind not in ("function_call", "custom_tool_call") or cur.ordinal != ev.index:
            call_id = ev.id or new_id("call_")
            if ev.kind == "custom":
                item = {"status": "in_progress", "call_id": call_id, "name": ev.name or "", "input": ""}
                out += self._open(
                    "custom_tool_call", "ctc_", item, ordinal=ev.index, call_id=call_id, name=ev.name or ""
                )
            else:
                item = {"status": "in_progress", "call_id": call_id, "name": ev.name or "", "arguments": ""}
                out += self._open("function_call", "fc_", item, ordinal=ev.index, call_id=call_id, name=ev.name or "")
            cur = self._cur
            assert cur is not None
        if ev.arguments:
            cur.text += ev.arguments
            kind = (
                "response.custom_tool_call_input.delta"
                if cur.kind == "custom_tool_call"
                else "response.function_call_arguments.delta"
            )
            out += self._emit(
                {"type": kind, "item_id": cur.id, "output_index": cur.output_index, "delta": ev.arguments}
            )
        return out

    def finish(self) -> bytes:
        if self._finished:
            return b""
        out = b"" if self._started else self._start()
        return out + self._fail(ErrorInfo(status=502, message="upstream stream ended before the answer was complete"))


def stream_error(error: ErrorInfo) -> bytes:
    """A complete failed stream (``created`` → ``in_progress`` → ``failed``) for an error that
    happens before any event was sent."""
    encoder = ResponsesStreamEncoder(model="")
    return encoder.encode(StreamError(error=error))
