"""The plain Chat Completions request, read without decoding it into the IR.

Layer: ``engine`` — imports ``protocol`` and ``wire``.

Decoding a Chat request into :class:`~switchyard.protocol.request.ChatRequest` (a validated
model per message and content part) was about a ninth of the proxy's CPU per JSON request on
``../shared/bench`` (docs/benchmarks.md). A same-format passthrough route never reads the IR:
its router ignores the body and the caller's body goes upstream verbatim (``raw_body`` replay).
For such a route the engine takes a *stand-in*: a ``ChatRequest`` that carries only what the
engine reads of a request it relays (model, streaming flags, origin), and the session the body
names, read straight from the JSON.

A body qualifies only when its shape is one the decoder is certain to accept unchanged: known
fields of the exact JSON types the IR declares, messages of the roles ``system``,
``developer``, ``user``, ``assistant`` and ``tool`` with text content (a string, null, or text
parts), function tool calls with string arguments, no reasoning. Anything else, including every
body the decoder would refuse, takes the full decode, so callers get the same answers and the
same errors either way (``tests/engine/test_plain_chat.py`` checks that on randomised bodies).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pydantic import ConfigDict

from switchyard.engine.restriction import HEADER_REQUIRE
from switchyard.engine.session import body_session, headerless, names_no_one, opening_key
from switchyard.engine.target import Route, Target
from switchyard.protocol.access import required_labels
from switchyard.protocol.errors import SwitchyardError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.routers.static import PassthroughRouter
from switchyard.wire import strict

_FORMAT = "openai_chat"
_TOKENS = ("max_tokens", "max_completion_tokens")

_INTS = ("max_tokens", "max_completion_tokens", "seed")
_NUMBERS = ("temperature", "top_p")
_OBJECTS = ("response_format", "metadata")
_TEXT_ROLES = frozenset(("system", "developer", "user"))
_TOOL_CHOICES = frozenset(("auto", "none", "required"))


def _is_int(value: Any) -> bool:
    return type(value) is int  # bool is an int subclass the IR refuses for these fields


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or kind is float


def _text(content: Any) -> str | None:
    """The text of plain ``content`` (a string, null or text parts), ``None`` when not plain."""
    if type(content) is str:
        return content
    if content is None:
        return ""
    if type(content) is not list:
        return None
    pieces = []
    for part in content:
        if type(part) is not dict or part.get("type") != "text" or type(part.get("text")) is not str:
            return None
        if part.keys() - {"type", "text"}:
            return None  # cache_control and the like: the decoder's business
        pieces.append(part["text"])
    return "".join(pieces)


def _plain_calls(calls: Any) -> bool:
    if calls is None:
        return True
    if type(calls) is not list:
        return False
    for call in calls:
        if type(call) is not dict or call.get("type", "function") != "function" or type(call.get("id", "")) is not str:
            return False
        fn = call.get("function")
        if type(fn) is not dict or type(fn.get("name")) is not str or type(fn.get("arguments", "{}")) is not str:
            return False
    return True


def _plain_message(msg: Any) -> bool:
    if type(msg) is not dict:
        return False
    role = msg.get("role")
    name = msg.get("name")
    if name is not None and type(name) is not str:
        return False
    if role in _TEXT_ROLES:
        return _text(msg.get("content")) is not None
    if role == "assistant":
        if msg.get("reasoning") or msg.get("reasoning_content") or msg.get("refusal"):
            return False
        return _text(msg.get("content")) is not None and _plain_calls(msg.get("tool_calls"))
    if role == "tool":
        return type(msg.get("tool_call_id")) is str and _text(msg.get("content")) is not None
    return False


def _plain_tools(tools: Any) -> bool:
    if tools is None:
        return True
    if type(tools) is not list:
        return False
    for tool in tools:
        if type(tool) is not dict or tool.get("type", "function") != "function":
            return False
        fn = tool.get("function")
        if type(fn) is not dict or type(fn.get("name")) is not str:
            return False
        description, parameters, strict_flag = fn.get("description"), fn.get("parameters"), fn.get("strict")
        if description is not None and type(description) is not str:
            return False
        if parameters is not None and type(parameters) is not dict:
            return False
        if strict_flag is not None and type(strict_flag) is not bool:
            return False
    return True


def _plain_fields(body: dict[str, Any]) -> bool:
    if "reasoning_effort" in body:
        return False  # the one field the decoder models that a plain body leaves out
    for key in _INTS:
        value = body.get(key)
        if value is not None and not _is_int(value):
            return False
    for key in _NUMBERS:
        value = body.get(key)
        if value is not None and not _is_number(value):
            return False
    for key in _OBJECTS:
        value = body.get(key)
        if value is not None and type(value) is not dict:
            return False
    user, stop = body.get("user"), body.get("stop")
    if user is not None and type(user) is not str:
        return False
    if stop is not None and type(stop) is not str and not (type(stop) is list and all(type(s) is str for s in stop)):
        return False
    parallel, choice = body.get("parallel_tool_calls"), body.get("tool_choice")
    if parallel is not None and type(parallel) is not bool:
        return False
    if choice is not None and (type(choice) is not str or choice not in _TOOL_CHOICES):
        return False
    return _plain_tools(body.get("tools") or None)


def standin(body: dict[str, Any]) -> ChatRequest | None:
    """A stand-in for the decoded ``body`` when it is a plain Chat request, else ``None``.

    The stand-in has the body's ``model``, ``stream`` and ``include_usage`` and the Chat origin;
    no messages, tools or sampling fields (the body is replayed as it came).

    Raises:
        InvalidRequestError: The body's common fields are wrong (``strict.check_body``: the
            decoder's first check, with the same error).
    """
    messages = body.get("messages")
    if type(messages) is not list or not _plain_fields(body):
        return None
    for msg in messages:
        if not _plain_message(msg):
            return None
    strict.check_body(body, messages=messages, messages_key="messages", tokens=_TOKENS)
    options = body.get("stream_options") or {}
    key = (
        body.get("model") or "",
        bool(body.get("stream", False)),
        bool(isinstance(options, dict) and options.get("include_usage")),
    )
    found = _STANDINS.get(key)
    if found is None:
        if len(_STANDINS) >= _MAX_STANDINS:  # model names are the caller's: keep a few
            _STANDINS.clear()
        found = _STANDINS[key] = StandIn(model=key[0], stream=key[1], include_usage=key[2], origin=_FORMAT)
    return found


class StandIn(ChatRequest):
    """A stand-in request, shared by every request with its model and streaming flags (a new
    one validated per request was half the stand-in's cost), so frozen; its lists stay empty."""

    model_config = ConfigDict(frozen=True)


_STANDINS: dict[tuple[str, bool, bool], StandIn] = {}
_MAX_STANDINS = 256


def opening(messages: list[Any]) -> Iterator[tuple[str, str]]:
    """``(role, text)`` of plain messages in order, text only for system, developer and user
    messages (what :func:`switchyard.engine.session.opening_key` reads)."""
    for msg in messages:
        role = msg["role"]
        yield role, (_text(msg.get("content")) or "") if role in _TEXT_ROLES else ""


def turns(messages: list[Any]) -> int:
    """Assistant turns in plain ``messages`` (the session's turn index)."""
    return sum(1 for m in messages if m["role"] == "assistant")


def relay_routes(routes: Iterable[Route], targets: Mapping[str, Target]) -> dict[str, tuple[Target, ...]]:
    """The routes that only relay Chat bodies, with their candidate targets: passthroughs to
    Chat targets whose backends replay the caller's body, with nothing that reads the request
    (no ``restrict``, ``verify`` or first-message session hash)."""
    found: dict[str, tuple[Target, ...]] = {}
    for route in routes:
        names = (*route.targets, *route.fallbacks)
        if (
            isinstance(route.router, PassthroughRouter)
            and route.restrict is None
            and route.verify is None
            and not route.hash_session_fallback
            and all(
                n in targets
                and targets[n].info.format == _FORMAT
                and getattr(targets[n].backend, "replays_caller_body", False)
                for n in names
            )
        ):
            found[route.name] = tuple(targets[n] for n in names)
    return found


def view(
    body: dict[str, Any],
    headers: Mapping[str, str],
    relaying: Mapping[str, tuple[Target, ...]],
    route_of: Callable[[str], Route],
    *,
    derive: bool,
) -> tuple[ChatRequest, SessionInfo] | None:
    """The stand-in of a plain ``body`` and the session it names, when its route relays it
    (``relaying``: :func:`relay_routes`; ``route_of``: the engine's route lookup) and nothing
    reads more of it: no header names a session or requires labels, no API key restricts it,
    no target has a context window or output cap to check the prompt against (the output
    clamp reads the decoded prompt: clients/limits.py). ``None``: decode it in full.

    Raises:
        InvalidRequestError: As :func:`standin`.
    """
    if not names_no_one(headers) or HEADER_REQUIRE in headers or required_labels.get() is not None:
        return None
    model = body.get("model")
    if type(model) is not str or not model:
        return None
    try:
        targets = relaying.get(route_of(model).name)
    except SwitchyardError:
        return None  # the full decode comes first, and its error
    if targets is None:
        return None
    for target in targets:
        info = target.info
        if info.context_window is not None or info.max_output_tokens is not None:
            return None
    request = standin(body)
    if request is None:
        return None
    messages = body["messages"]
    session, source = body_session(
        body.get("metadata"),
        body.get("prompt_cache_key"),
        body.get("user"),
        derived=(lambda: opening_key(opening(messages))) if derive else None,
    )
    return request, headerless(session, source, turns(messages))
