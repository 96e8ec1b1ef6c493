"""OpenAI Chat Completions streams ⇄ IR stream events.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

import re
import time
from typing import Any

import orjson

from switchyard.protocol.errors import ErrorInfo, UpstreamProtocolError
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
from switchyard.wire import diagnostics
from switchyard.wire.openai_chat.response import (
    STOP_TO_FINISH,
    decode_error,
    decode_usage,
    encode_error,
    encode_usage,
    stop_reason,
)
from switchyard.wire.sse import DONE, SSEEvent, SSEParser, frame
from switchyard.wire.stream_decode import TemplateDecoder, event_json, learn
from switchyard.wire.text_run import TextRun

_MARK = '"delta":{"content":'
# The string of a plain text chunk, as bytes on one line (``ChatStreamDecoder.read``).
_LITERAL = rb'"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"'  # a JSON string on one line, escapes included
_TEXT_LITERAL = re.compile(rb'"delta":\{"content":(' + _LITERAL + rb")\}")
_ONE_LITERAL = re.compile(_LITERAL)  # one such string, alone
_PLAIN_ROOT = frozenset({"id", "object", "created", "model", "choices", "system_fingerprint", "service_tier", "usage"})
_PLAIN_CHOICE = frozenset({"index", "delta", "finish_reason", "logprobs", "stop_reason"})


def _add_texts(out: list[StreamEvent | TextRun], texts: list[str]) -> None:
    """Adds the non-empty ``texts`` to the run ending ``out`` (a new run if none does)."""
    run = out[-1] if out else None
    if type(run) is not TextRun:
        run = TextRun([])
        out.append(run)
    run.texts += [text for text in texts if text]
    if not run.texts:
        out.pop()


class ChatStreamDecoder(TemplateDecoder):
    """Decodes ``chat.completion.chunk`` events.

    Tool-call indexes are renumbered into contiguous ordinals: a delta whose ``id`` differs from
    the call last seen at its ``index`` starts a new call (servers that reuse ``index: 0`` for
    every parallel call), and a delta without ``index`` continues the latest call.

    Nearly every chunk of an answer is the previous one with other text: the same ``id``,
    ``created``, ``model`` and ``index``, ``delta: {"content": ...}``, ``finish_reason: null``.
    Once such a chunk has been decoded in full, its text before and after the content string is
    kept as a template (:class:`~switchyard.wire.stream_decode.TextTemplate`, the fast path all
    three stream decoders share): a later chunk that is that template around one JSON string
    means exactly what the template meant with that text, so only the string is parsed (a third
    of the cost of parsing the chunk whole). Anything else is decoded in full.
    """

    guards_itself = True
    """``feed`` raises ``UpstreamProtocolError`` for any malformed chunk (see ``wire/guard.py``)."""

    def __init__(self) -> None:
        super().__init__()
        self._row_head = b""  # an event of the template up to its string (``read``), when it has one line
        self._row_tail = b""  # ... and after it, the blank line included
        self._row_joint = b""  # the two, between two events of a row
        self._started = False
        self._stop: StopReason | None = None
        self._stop_sequence: str | None = None
        self._slots: dict[int, tuple[int, str | None]] = {}  # upstream index -> (ordinal, id)
        self._next_ordinal = 0
        self._last_ordinal = -1

    @property
    def _prefix(self) -> str | None:
        """The learned template up to its content string; ``None`` until one is learned."""
        return self._template.prefix if self._template is not None else None

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        try:
            return self._feed(event)
        except UpstreamProtocolError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
            # A chunk of an unexpected shape is the upstream's fault: a typed error, never a crash.
            raise UpstreamProtocolError(f"malformed upstream stream chunk: {type(exc).__name__}: {exc}") from exc

    def gather(
        self, events: list[SSEEvent | bytes]
    ) -> tuple[list[StreamEvent | TextRun], UpstreamProtocolError | None]:
        """The events of one upstream read (``events``: ``SSEParser.feed_raw``'s, up to the end
        of the answer) as :meth:`feed` gives them, except that the texts of consecutive plain
        text chunks come as one :class:`~switchyard.wire.text_run.TextRun` — the plain Chat
        lane's batch — and the error that stopped them, if one did: what was decoded before a
        malformed chunk still goes out first, as it would event by event.

        An event given undecoded (``bytes``) is matched as bytes against the learned template:
        the same text as matching it decoded, since a template is valid UTF-8 and the string
        between must parse; anything else is decoded (invalid UTF-8 replaced) and fed whole.
        """
        out: list[StreamEvent | TextRun] = []
        try:
            self._gather(events, out)
        except UpstreamProtocolError as exc:
            return out, exc
        return out, None

    def read(self, parser: SSEParser, chunk: bytes) -> tuple[list[StreamEvent | TextRun], UpstreamProtocolError | None]:
        """:meth:`gather` of ``parser.feed_raw(chunk)``, without splitting the template's events
        into lines: once a template is learned, a row of events that are each ``data: `` + the
        template around one JSON string + a blank line is read straight from ``chunk`` — the
        strings are found in one pass and parsed in one call — and only what is not such a row
        goes through ``parser``, an event at a time, so the row can start wherever the template
        was learned. The same events and errors as :meth:`gather`, however ``chunk`` is cut."""
        out: list[StreamEvent | TextRun] = []
        i, n, slow = 0, len(chunk), 0
        try:
            while i < n and not self._done:
                if self._row_head and parser.idle and chunk.startswith(self._row_head, i):
                    got = self._row(chunk, i, out)
                    if got > i:
                        i, slow = got, 0
                        continue
                if slow > (3 if self._template is not None else 7):
                    # Event by event costs more than the rest at once: after a few events that
                    # were not a row (or taught no template), the parser takes the rest whole.
                    end = n
                else:
                    end = chunk.find(b"\n\n", i)
                    end = n if end < 0 else end + 2
                self._gather(parser.feed_raw(chunk[i:end] if i or end < n else chunk), out)
                i, slow = end, slow + 1
        except UpstreamProtocolError as exc:
            return out, exc
        return out, None

    def _row(self, chunk: bytes, i: int, out: list[StreamEvent | TextRun]) -> int:
        """Reads the template's events from ``i`` (where one starts) into ``out``'s run; returns
        where they end, or ``i`` when none of them parses as one JSON string each.

        The strings after ``"delta":{"content":`` are found in one pass; the row is the longest
        run of them that, put back between the template's parts, gives the bytes at ``i``
        exactly — so each of its events is ``data: `` + template + string + blank line, and
        nothing else in ``chunk`` can be mistaken for one."""
        head, tail, joint = self._row_head, self._row_tail, self._row_joint
        end = len(chunk) - len(tail)
        if chunk.endswith(tail) and _ONE_LITERAL.fullmatch(chunk, i + len(head), end) is not None:
            # The read is one event of the template (a stream that arrives an event per read):
            # what lies between its parts is one string literal — the template's head holds
            # quotes, so two events never pass for one.
            try:
                text = orjson.loads(chunk[i + len(head) : end])
            except orjson.JSONDecodeError:
                return i  # a control character or broken UTF-8: decoded event by event
            _add_texts(out, [text])
            return len(chunk)
        literals = _TEXT_LITERAL.findall(chunk, i)
        good, bad = 0, len(literals) + 1  # a run of ``good`` events is there; one of ``bad`` is not
        while bad - good > 1:
            k = bad - 1 if bad > len(literals) else (good + bad) // 2  # all of them first: the usual case
            row = joint.join(literals[:k])  # compared in place: no copy of the read with the parts around it
            if chunk.startswith(row, i + len(head)) and chunk.startswith(tail, i + len(head) + len(row)):
                good = k
            else:
                bad = k
        if not good:
            return i
        literals = literals[:good]
        try:
            texts = orjson.loads(b"[" + b",".join(literals) + b"]")
        except orjson.JSONDecodeError:
            return i  # a control character or broken UTF-8 in one: decoded event by event
        _add_texts(out, texts)
        return i + good * len(joint) + sum(map(len, literals))  # ``joint`` is one event's head and tail

    def _gather(self, events: list[SSEEvent | bytes], out: list[StreamEvent | TextRun]) -> None:
        """Decodes ``events`` onto ``out`` (see :meth:`gather`), continuing a run that ends it."""
        last = out[-1] if out else None
        texts = last.texts if type(last) is TextRun else None  # the texts of the run ending ``out``
        template = self._template
        prefix, suffix = (template.raw_prefix, template.raw_suffix) if template is not None else (b"", b"")
        for event in events:
            text: Any = None
            if type(event) is bytes:
                if prefix and event.startswith(prefix) and event.endswith(suffix):
                    try:
                        text = orjson.loads(event[len(prefix) : len(event) - len(suffix)])
                    except orjson.JSONDecodeError:
                        pass  # not one string after all: decoded in full below
                if type(text) is not str:
                    text = None
                    event = SSEEvent(None, event.decode("utf-8", errors="replace"))
            if text is None:
                text = self._template_text(event.data)  # type: ignore[union-attr]
            if text is None:
                decoded = self.feed(event)  # type: ignore[arg-type]
                if decoded:
                    out.extend(decoded)
                    texts = None
                if template is None and self._template is not None:  # learned
                    template = self._template
                    prefix, suffix = template.raw_prefix, template.raw_suffix
                if self._done:
                    break
            elif text:
                if texts is None:
                    texts = []
                    out.append(TextRun(texts))
                texts.append(text)

    def _template_text(self, data: str) -> str | None:
        """The text of a chunk that is the learned template around one JSON string, else ``None``."""
        template = self._template
        return template.text(data) if template is not None else None

    def _feed(self, event: SSEEvent) -> list[StreamEvent]:
        data = event.data
        template = self._template
        if template is not None:
            # ``template.text(data)`` inline: the call alone costs 2-3% of a Chat stream's decode.
            prefix, suffix = template.prefix, template.suffix
            if data.startswith(prefix) and data.endswith(suffix):
                try:
                    text = orjson.loads(data[len(prefix) : len(data) - len(suffix)])
                except orjson.JSONDecodeError:
                    text = None  # not one string after all: decoded in full
                if type(text) is str:
                    return [TextDelta(text=text)] if text else []
        if data.startswith("[DONE]"):
            self._done = True
            return self._stop_events()
        chunk = event_json(data)
        out: list[StreamEvent] = []
        get = chunk.get
        if get("error"):
            info = decode_error(chunk, 502)
            if info.status < 400:
                info.status = 502
            self._done = True
            return [StreamError(error=info)]
        if not self._started:
            self._started = True
            out.append(
                MessageStart(
                    id=str(get("id") or ""),
                    model=str(get("model") or ""),
                    created=int(get("created") or 0),
                )
            )
        for choice in get("choices") or ():
            if type(choice) is not dict or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if type(delta) is dict and len(delta) == 1 and "content" in delta:
                # Nearly every chunk of an answer: one piece of text, nothing else to look for.
                content = delta["content"]
                if isinstance(content, str) and content:
                    out.append(TextDelta(text=content))
                    if self._template is None:
                        self._learn(data, chunk)
            else:
                self._delta(delta, out)
            finish = choice.get("finish_reason")
            if finish is not None:
                self._stop = stop_reason(finish, choice.get("stop_reason"))
                if self._stop == "stop_sequence":
                    self._stop_sequence = choice.get("stop_reason")
        usage = get("usage")
        if type(usage) is dict:
            out.append(UsageDelta(usage=decode_usage(usage)))
        return out

    def _learn(self, data: str, chunk: dict[str, Any]) -> None:
        """Keeps ``data`` as the template of plain text chunks when it is one: no key but the
        usual ones, one choice (index 0, no finish, no logprobs), no usage, and the delta's
        content string right after ``"delta":{"content":`` and right before its closing brace."""
        if not chunk.keys() <= _PLAIN_ROOT or chunk.get("usage") is not None:
            return
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1:
            return
        choice = choices[0]
        if not choice.keys() <= _PLAIN_CHOICE or choice.get("index", 0) != 0:
            return
        if any(choice.get(k) is not None for k in ("finish_reason", "logprobs", "stop_reason")):
            return
        # The content string closes its delta: a row of events is matched by ``_TEXT_LITERAL``.
        template = learn(data, _MARK, choice["delta"]["content"], then="}")
        if template is None:
            return
        self._template = template
        if not any(c in data for c in "\r\n"):  # lines joined: no row of one-line events to read
            self._row_head = b"data: " + template.raw_prefix
            self._row_tail = template.raw_suffix + b"\n\n"
            self._row_joint = self._row_tail + self._row_head

    def _delta(self, delta: Any, out: list[StreamEvent]) -> None:
        """The events of one choice's ``delta``: reasoning, text, refusal, tool calls."""
        reasoning = delta.get("reasoning") or delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out.append(ReasoningDelta(text=reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.append(TextDelta(text=content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            out.append(TextDelta(text=refusal))
        for tc in delta.get("tool_calls") or []:
            if isinstance(tc, dict):
                out.append(self._tool_delta(tc))

    def _tool_delta(self, tc: dict[str, Any]) -> ToolCallDelta:
        call_id = tc.get("id") or None
        raw_index = tc.get("index")
        if raw_index is None:
            ordinal = self._last_ordinal if call_id is None and self._last_ordinal >= 0 else self._new_slot(-1, call_id)
        else:
            slot = self._slots.get(int(raw_index))
            if slot is None or (call_id is not None and slot[1] is not None and call_id != slot[1]):
                ordinal = self._new_slot(int(raw_index), call_id)
            else:
                ordinal = slot[0]
        self._last_ordinal = ordinal
        if tc.get("type") == "custom" or "custom" in tc:
            spec = tc.get("custom") or {}
            return ToolCallDelta(
                index=ordinal,
                id=call_id,
                name=spec.get("name") or None,
                arguments=str(spec.get("input") or ""),
                kind="custom",
            )
        fn = tc.get("function") or {}
        return ToolCallDelta(
            index=ordinal, id=call_id, name=fn.get("name") or None, arguments=str(fn.get("arguments") or "")
        )

    def _new_slot(self, raw_index: int, call_id: str | None) -> int:
        ordinal = self._next_ordinal
        self._next_ordinal += 1
        self._slots[raw_index] = (ordinal, call_id)
        return ordinal

    def _stop_events(self) -> list[StreamEvent]:
        if self._stop is None:
            raise UpstreamProtocolError("upstream stream ended without a finish_reason")
        stop, self._stop = self._stop, None
        return [MessageStop(stop_reason=stop, stop_sequence=self._stop_sequence)]

    def finish(self) -> list[StreamEvent]:
        if self._done:
            return []
        # Some servers omit ``[DONE]``; a finish_reason is then enough to call it complete.
        self._done = True
        return self._stop_events()


class ChatStreamEncoder:
    """Encodes IR stream events as ``chat.completion.chunk`` SSE frames.

    Usage is held back and sent as the final ``choices: []`` chunk when the caller asked for it
    (``stream_options.include_usage``); every earlier chunk then carries ``usage: null``.
    """

    def __init__(self, *, model: str, include_usage: bool) -> None:
        self._model = model
        self._include_usage = include_usage
        self._id = "chatcmpl-switchyard"
        self._created = int(time.time())
        self._started = False
        self._finished = False
        self._usage = Usage()
        self._tool_started: set[int] = set()
        self._head_key: tuple[str, int] | None = None
        self._head = b""
        self._end = b"}" if not include_usage else b',"usage":null}'
        self._text_head = b""  # a text chunk up to its content string (set with ``_head``)
        self._text_joint = b""  # what comes between two text chunks' strings (set with ``_head``)
        self._text_seam = b""  # the same with the quotes around it
        self._text_tail = b'},"finish_reason":null,"logprobs":null}]' + self._end + b"\n\n"

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        # The same bytes as ``orjson.dumps`` of the whole chunk (orjson writes keys in insertion
        # order, without spaces), with the part that is fixed for the stream serialised once.
        key = (self._id, self._created)
        if key != self._head_key:
            self._head_key = key
            fixed = {"id": self._id, "object": "chat.completion.chunk", "created": self._created, "model": self._model}
            self._head = b"data: " + orjson.dumps(fixed)[:-1] + b',"choices":[{"index":0,"delta":'
            self._text_head = self._head + b'{"content":'
            self._text_joint = self._text_tail + self._text_head
            self._text_seam = b'"' + self._text_joint + b'"'
        reason = b',"finish_reason":null' if finish is None else b',"finish_reason":' + orjson.dumps(finish)
        return self._head + orjson.dumps(delta) + reason + b',"logprobs":null}]' + self._end + b"\n\n"

    def _start(self, event: MessageStart | None = None) -> bytes:
        self._started = True
        if event is not None:
            self._id = event.id or self._id
            self._created = event.created or self._created
        return self._chunk({"role": "assistant", "content": ""})

    def encode(self, event: StreamEvent | TextRun) -> bytes:
        if type(event) is TextDelta and self._started and not self._finished:
            # Most events: the chunk ``_chunk({"content": text})`` writes, from its fixed parts
            # (``id`` and ``created`` no longer change once the stream has started).
            return self._text_head + orjson.dumps(event.text) + self._text_tail if event.text else b""
        if type(event) is TextRun:
            return self._run(event)
        if self._finished:
            return b""
        if isinstance(event, MessageStart):
            return b"" if self._started else self._start(event)
        prefix = b"" if self._started or isinstance(event, UsageDelta | StreamError) else self._start()
        if isinstance(event, TextDelta):
            return prefix + (self._chunk({"content": event.text}) if event.text else b"")
        if isinstance(event, ReasoningDelta):
            if event.signature or event.encrypted or event.redacted:
                diagnostics.report(
                    "openai_chat.reasoning_signature_dropped",
                    "Chat has no field for reasoning signatures/encrypted reasoning; only the text is streamed",
                )
            return prefix + (self._chunk({"reasoning": event.text}) if event.text else b"")
        if isinstance(event, ToolCallDelta):
            return prefix + self._chunk({"tool_calls": [self._tool_delta(event)]})
        if isinstance(event, UsageDelta):
            # Merged, never replaced: an Anthropic upstream reports the input count at
            # message_start and only output counts in its last message_delta.
            self._usage = merge_usage(self._usage, event.usage)
            return prefix
        if isinstance(event, MessageStop):
            out = prefix + self._chunk({}, STOP_TO_FINISH[event.stop_reason])
            if self._include_usage:
                out += frame(
                    orjson.dumps(
                        {
                            "id": self._id,
                            "object": "chat.completion.chunk",
                            "created": self._created,
                            "model": self._model,
                            "choices": [],
                            "usage": encode_usage(self._usage),
                        }
                    )
                )
            return out
        if isinstance(event, StreamError):
            self._finished = True
            return prefix + stream_error(event.error)
        return prefix

    def _run(self, run: TextRun) -> bytes:
        """The chunks of ``run``'s texts: those ``encode`` writes for one ``TextDelta`` each."""
        if self._started and not self._finished and run.texts:
            whole = orjson.dumps(run.texts)
            if b'\\"' not in whole:
                # No quote inside a text (nor a backslash before a closing quote): every ``","``
                # is where one string ends and the next begins, so the run is one serialisation
                # with the chunk between two strings put in at each (a third of dumping each).
                return self._text_head + whole[1:-1].replace(b'","', self._text_seam) + self._text_tail
            dumped = [orjson.dumps(text) for text in run.texts]
            dumped[0] = self._text_head + dumped[0]
            dumped[-1] += self._text_tail
            return self._text_joint.join(dumped)  # one copy of the run's bytes, not three
        return b"".join([self.encode(TextDelta(text=text)) for text in run.texts])

    def _tool_delta(self, event: ToolCallDelta) -> dict[str, Any]:
        first = event.index not in self._tool_started
        if event.kind == "custom":
            custom: dict[str, Any] = {"input": event.arguments}
            entry: dict[str, Any] = {"index": event.index, "custom": custom}
            if first:
                self._tool_started.add(event.index)
                entry["id"] = event.id or f"call_{event.index}"
                entry["type"] = "custom"
                custom["name"] = event.name or ""
            return entry
        fn: dict[str, Any] = {"arguments": event.arguments}
        entry = {"index": event.index, "function": fn}
        if first:
            self._tool_started.add(event.index)
            entry["id"] = event.id or f"call_{event.index}"
            entry["type"] = "function"
            fn["name"] = event.name or ""
        return entry

    def finish(self) -> bytes:
        if self._finished:
            return b""
        self._finished = True
        return DONE


def stream_error(error: ErrorInfo) -> bytes:
    """Ends a Chat stream with an in-band error event, then ``[DONE]``.

    openai-python raises ``APIError`` on the error event, so the caller never mistakes the
    truncated stream for a complete answer.
    """
    return frame(orjson.dumps(encode_error(error))) + DONE
