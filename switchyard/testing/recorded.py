"""A fake upstream that answers from recorded agent runs, for a deployment replayed through ``serve``.

Each session is one recorded run of the efficient model (OpenAI Chat messages) and, optionally,
the capable model's run of the same task. A request names its session in the OpenAI Chat
``user`` field (which ``serve`` passes upstream, as providers document it: an end-user id) and
its turn by the assistant messages it carries; the answer is the **served model's recorded next
assistant message**, with the token usage that turn had:

* the efficient model, before any capable turn of the session: the efficient run's turn;
* the capable model's first turn of the session is the *switch* at turn ``k``: from there on
  the capable run's turns are answered, continuing from the efficient context at ``k`` (the
  agent suite's latch counterfactual, docs/agent-suite.md) — or, with no capable run (a stand-in
  run), the same run's next turn;
* after the switch every request is answered from that continuation, whichever model it names
  (a router that does not latch may send a later turn back to the efficient model: there is
  no recording of that model going on from there, and :attr:`RecordedUpstream.unlatched` counts
  such requests).

Usage is the suite's cache pricing (:mod:`switchyard.eval.cache_cost`): ``prompt_tokens`` is the
turn's estimated input; when the session's previous answer came from the same model, the
previous prompt is reported as read from cache (``prompt_tokens_details.cached_tokens``) and the
rest as written (``cache_write_tokens``); after a change of model the whole prompt is written.
Priced with the targets' ``cached_input_per_mtok`` and ``cache_write_per_mtok``, the answers of
a session cost what the suite's tables say. After a switch at ``k > 1`` each capable turn carries
the efficient context at ``k`` in place of the capable run's own first prompt.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from switchyard._dataclass import dataclass
from switchyard.eval.cache_cost import TurnTokens, turn_tokens
from switchyard.testing.fake_common import http_body


@dataclass(slots=True, frozen=True)
class RecordedRun:
    """One session's recordings.

    Attributes:
        efficient: The efficient model's run (OpenAI Chat messages, assistant turns included).
        capable: The capable model's run of the same task; ``None``: after a switch the same
            run goes on (a stand-in run: the recorded model is not the efficient one).
    """

    efficient: Sequence[Mapping[str, Any]]
    capable: Sequence[Mapping[str, Any]] | None = None


@dataclass(slots=True)
class _State:
    switch: int | None = None
    last_model: str | None = None
    last_input: float = 0.0


class RecordedUpstream:
    """An ASGI app speaking OpenAI Chat Completions (JSON) from recorded runs.

    Args:
        runs: Session id (the request's ``user``) → its recordings.
        efficient_model: The model id the efficient target sends.
        capable_model: The model id the capable target sends.
    """

    def __init__(self, runs: Mapping[str, RecordedRun], *, efficient_model: str, capable_model: str) -> None:
        self.runs = dict(runs)
        self.models = (efficient_model, capable_model)
        self._state: dict[str, _State] = {}
        self._tokens: dict[tuple[str, bool], list[TurnTokens]] = {}
        self.unlatched = 0
        """Requests for the efficient model after the session's switch."""

    def switch_of(self, session: str) -> int | None:
        """The 0-based turn at which ``session`` was first answered by the capable model."""
        state = self._state.get(session)
        return None if state is None else state.switch

    def answer(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON body answering one Chat Completions request ``body``."""
        session, model, messages = body.get("user"), body.get("model"), body.get("messages")
        if not isinstance(session, str) or session not in self.runs:
            return _error(400, f"user: no recorded run named {session!r}", "user")
        if model not in self.models:
            return _error(404, f"The model {model!r} does not exist", "model", "model_not_found")
        if not isinstance(messages, list):
            return _error(400, "messages: required", "messages")
        run = self.runs[session]
        turn = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
        state = self._state.setdefault(session, _State())
        capable = model == self.models[1]
        if capable and state.switch is None:
            state.switch = turn
        if not capable and state.switch is not None:
            self.unlatched += 1
        found = self._turn(session, run, state.switch, turn)
        if found is None:
            return _error(400, f"messages: turn {turn + 1} is past the end of run {session!r}", "messages")
        message, tokens = found
        cached = min(state.last_input, tokens.input) if state.last_model == model else 0.0
        state.last_model, state.last_input = str(model), tokens.input
        prompt, read = round(tokens.input), round(cached)
        out = {k: message[k] for k in ("content", "tool_calls") if message.get(k) is not None}
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{session[-24:]}-{turn}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": out.get("content"), **out},
                    "finish_reason": "tool_calls" if out.get("tool_calls") else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": round(tokens.output),
                "total_tokens": prompt + round(tokens.output),
                "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": prompt - read},
            },
        }
        return 200, answer

    def _turn(
        self, session: str, run: RecordedRun, switch: int | None, turn: int
    ) -> tuple[Mapping[str, Any], TurnTokens] | None:
        """The recorded assistant message answering ``turn`` (0-based) and its tokens."""
        efficient = self._tokens_of(session, run, capable=False)
        if switch is None or run.capable is None:
            return _nth(run.efficient, turn, efficient)
        capable = self._tokens_of(session, run, capable=True)
        j = turn - switch
        found = _nth(run.capable, j, capable)
        if found is None or switch == 0:
            return found
        message, own = found
        handed = efficient[switch].input if switch < len(efficient) else efficient[-1].input
        return message, TurnTokens(own.input - capable[0].input + handed, own.output)

    def _tokens_of(self, session: str, run: RecordedRun, *, capable: bool) -> list[TurnTokens]:
        key = (session, capable)
        if key not in self._tokens:
            source = run.capable if capable and run.capable is not None else run.efficient
            self._tokens[key] = turn_tokens(source)
        return self._tokens[key]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await http_body(scope, receive, send)
        if raw is None:
            return
        path, method = scope["path"], scope["method"]
        if method == "GET" and path in ("/health", "/v1/health"):
            status, obj = 200, {"status": "ok"}
        elif method == "POST" and path.rstrip("/").endswith("/chat/completions"):
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                status, obj = _error(400, "the body is not JSON", None)
            else:
                if not isinstance(body, dict):
                    status, obj = _error(400, "the body must be a JSON object", None)
                elif body.get("stream"):
                    status, obj = _error(400, "stream: this upstream answers JSON only", "stream")
                else:
                    status, obj = self.answer(body)
        else:
            status, obj = _error(404, f"no route {method} {path}", None, "not_found")
        payload = orjson.dumps(obj)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _nth(
    messages: Sequence[Mapping[str, Any]], n: int, tokens: list[TurnTokens]
) -> tuple[Mapping[str, Any], TurnTokens] | None:
    if n < 0:
        return None
    seen = 0
    for m in messages:
        if m.get("role") == "assistant":
            if seen == n:
                return m, tokens[n]
            seen += 1
    return None


def _error(status: int, message: str, param: str | None, code: str | None = None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


__all__ = ["RecordedRun", "RecordedUpstream"]
