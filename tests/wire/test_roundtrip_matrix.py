"""The 3x3 round-trip matrix: every caller format against every upstream format, for requests,
complete responses and streams.

Each case starts from an IR value, goes out in one format and comes back through another, and
must keep its meaning: texts, images, tool definitions, calls (ids, names, parsed arguments,
free-form raw input), results, tool choice, limits, usage (cache and reasoning tokens
included) and stop reasons. Documented losses are normalised away explicitly below — anything
else that changes fails the test.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from switchyard.protocol.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.stream import StreamAccumulator, StreamEvent, response_to_events
from switchyard.protocol.tools import ToolChoice, ToolDefinition
from switchyard.testing import streams
from switchyard.wire import SSEParser, codec, custom_tools
from switchyard.wire.base import WireFormat

FORMATS = [f.value for f in WireFormat]
PAIRS = [(a, b) for a in FORMATS for b in FORMATS]

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
PATCH = ToolDefinition(name="apply_patch", description="Patch files.", kind="custom", format={"type": "grammar"})
IMAGE = ImagePart(data="iVBORw0KGgo=", media_type="image/png")

# -- requests ---------------------------------------------------------------------------------


def _requests() -> dict[str, ChatRequest]:
    return {
        "text": ChatRequest(
            model="m",
            messages=[Message.of("system", "Be brief."), Message.of("user", "Hello?")],
            max_tokens=300,
            temperature=0.5,
            top_p=0.9,
        ),
        "image": ChatRequest(
            model="m",
            messages=[
                Message(role="user", content=[TextPart(text="What is this?"), IMAGE]),
                Message(role="user", content=[ImagePart(url="https://example.com/a.png")]),
            ],
        ),
        "tool_loop": ChatRequest(
            model="m",
            messages=[
                Message.of("system", "You are an agent."),
                Message.of("user", "Weather in Paris and Rome?"),
                Message(
                    role="assistant",
                    content=[
                        TextPart(text="Checking."),
                        ToolCallPart(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),
                        ToolCallPart(id="call_2", name="get_weather", arguments='{"city": "Rome"}'),
                    ],
                ),
                Message(role="tool", content=[ToolResultPart(call_id="call_1", content=[TextPart(text="18C")])]),
                Message(role="tool", content=[ToolResultPart(call_id="call_2", content=[TextPart(text="24C")])]),
                Message.of("user", "And tomorrow?"),
            ],
            tools=[WEATHER],
            tool_choice=ToolChoice(mode="tool", name="get_weather"),
            parallel_tool_calls=False,
        ),
        "required_tool": ChatRequest(
            model="m", messages=[Message.of("user", "go")], tools=[WEATHER], tool_choice=ToolChoice(mode="required")
        ),
        "no_tools_choice": ChatRequest(
            model="m", messages=[Message.of("user", "go")], tools=[WEATHER], tool_choice=ToolChoice(mode="none")
        ),
        "free_form": ChatRequest(
            model="m",
            messages=[
                Message.of("user", "add a file"),
                Message(
                    role="assistant",
                    content=[
                        ToolCallPart(id="call_p", name="apply_patch", arguments="*** Begin Patch\n+x\n", kind="custom")
                    ],
                ),
                Message(
                    role="tool",
                    content=[ToolResultPart(call_id="call_p", content=[TextPart(text="ok")], kind="custom")],
                ),
            ],
            tools=[PATCH],
        ),
    }


def _args(call: ToolCallPart) -> Any:
    if call.kind == "custom":
        return ("raw", call.arguments)
    return json.loads(call.arguments)


def _request_view(request: ChatRequest, *, custom_as_function: bool = False) -> dict[str, Any]:
    """What a request means, with documented losses normalised."""
    system = "\n\n".join(m.text for m in request.messages if m.role in ("system", "developer"))
    turns: list[Any] = []
    for msg in request.messages:
        if msg.role in ("system", "developer"):
            continue
        for part in msg.content:
            if isinstance(part, TextPart) and part.text:
                turns.append(("text", "assistant" if msg.role == "assistant" else "user", part.text))
            elif isinstance(part, ImagePart):
                turns.append(("image", part.data or part.url))
            elif isinstance(part, ToolCallPart):
                args = _args(part)
                if custom_as_function and part.kind == "custom":
                    args = {custom_tools.PARAM: part.arguments}
                turns.append(("call", part.id, part.name, args))
            elif isinstance(part, ToolResultPart):
                turns.append(("result", part.call_id, part.text))
    # Consecutive user texts may merge into one turn (Anthropic alternation): compare as a stream.
    tools = [(t.name, t.kind if not custom_as_function else "function") for t in request.tools]
    choice = request.tool_choice.mode if request.tool_choice else "auto"
    if request.tools and choice == "auto":
        choice = "auto"
    return {
        "system": system,
        "turns": turns,
        "tools": tools,
        "choice": (choice, request.tool_choice.name if request.tool_choice else None) if request.tools else None,
        "parallel": request.parallel_tool_calls if request.parallel_tool_calls is False else None,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
    }


def _through(request: ChatRequest, fmt: str) -> ChatRequest:
    body = codec(fmt).encode_request(request, model="m", stream=False)
    return codec(fmt).decode_request(json.loads(json.dumps(body)))


@pytest.mark.parametrize(("caller", "upstream"), PAIRS)
@pytest.mark.parametrize("case", sorted(_requests()))
def test_request_matrix(case: str, caller: str, upstream: str) -> None:
    original = _requests()[case]
    arrived = _through(original, caller)  # what the proxy decodes from the caller
    sent = _through(arrived, upstream)  # what the upstream decodes from the proxy
    # Free-form tools stay free-form only on Responses; every other hop sends the function stand-in
    # (our Chat encoder plays the caller here, and it always wraps — a real Chat caller's native
    # custom tools are covered by the golden fixtures).
    wrapped = any(t.kind == "custom" for t in original.tools) and not caller == upstream == "openai_responses"
    expected = _request_view(original, custom_as_function=wrapped)
    got = _request_view(sent)
    if caller == "anthropic_messages" or upstream == "anthropic_messages":
        expected["max_tokens"] = expected["max_tokens"] or 16384  # Anthropic requires one
    if upstream == "anthropic_messages" and expected["choice"] == ("auto", None) and not original.tool_choice:
        expected["choice"] = got["choice"]
    assert got == expected


# -- responses --------------------------------------------------------------------------------

USAGE = Usage(
    input_tokens=1500, output_tokens=90, cache_read_tokens=1024, cache_creation_tokens=200, reasoning_tokens=30
)


def _responses() -> dict[str, ChatResponse]:
    return {
        "text": ChatResponse(id="r1", model="up", content=[TextPart(text="Hello there.")], usage=USAGE),
        "reasoning_tools": ChatResponse(
            id="r2",
            model="up",
            content=[
                ReasoningPart(text="Two calls needed."),
                TextPart(text="Checking."),
                ToolCallPart(id="call_a", name="get_weather", arguments='{"city":"Paris"}'),
                ToolCallPart(id="call_b", name="get_weather", arguments='{"city":"Rome"}'),
            ],
            stop_reason="tool_use",
            usage=USAGE,
        ),
        "free_form": ChatResponse(
            id="r3",
            model="up",
            content=[ToolCallPart(id="call_p", name="apply_patch", arguments="*** Begin Patch\n+é\n", kind="custom")],
            stop_reason="tool_use",
            usage=USAGE,
        ),
        "truncated": ChatResponse(id="r4", model="up", content=[TextPart(text="Once upon")], stop_reason="max_tokens"),
        "refused": ChatResponse(id="r5", model="up", content=[TextPart(text="I can't.")], stop_reason="content_filter"),
    }


def _response_view(response: ChatResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "reasoning": response.reasoning,
        "calls": [(c.id, c.name, _args(c)) for c in response.tool_calls],
        "stop": response.stop_reason,
        "usage": response.usage,
    }


def _restore(response: ChatResponse, upstream: str, names: frozenset[str]) -> ChatResponse:
    # The backend unwraps free-form calls of upstreams without free-form tools (it knows the request).
    return custom_tools.restore_response(response, names) if upstream != "openai_responses" else response


def _skip_unportable(case: str, caller: str) -> None:
    if case == "free_form" and caller == "anthropic_messages":
        pytest.skip("an Anthropic caller cannot declare free-form tools, so it never receives their calls")


@pytest.mark.parametrize(("caller", "upstream"), PAIRS)
@pytest.mark.parametrize("case", sorted(_responses()))
def test_response_matrix(case: str, caller: str, upstream: str) -> None:
    _skip_unportable(case, caller)
    original = _responses()[case]
    names = frozenset({"apply_patch"})
    provider_body = json.loads(json.dumps(codec(upstream).encode_response(original, model="up")))
    decoded = _restore(codec(upstream).decode_response(provider_body), upstream, names)
    caller_body = json.loads(json.dumps(codec(caller).encode_response(decoded, model="route")))
    seen = codec(caller).decode_response(caller_body)
    assert _response_view(seen) == _response_view(original)


# -- streams ----------------------------------------------------------------------------------


def _sse_roundtrip(events: list[StreamEvent], fmt: str, rng: random.Random) -> tuple[list[StreamEvent], bytes]:
    encoder = codec(fmt).stream_encoder(model="x", include_usage=True)
    raw = b"".join(encoder.encode(e) for e in events) + encoder.finish()
    parser = SSEParser()
    decoder = codec(fmt).stream_decoder()
    out: list[StreamEvent] = []
    i = 0
    while i < len(raw):  # random chunking: frames split anywhere, even inside UTF-8 characters
        n = rng.randint(1, 40)
        for sse in parser.feed(raw[i : i + n]):
            out.extend(decoder.feed(sse))
        i += n
    for sse in parser.finish():
        out.extend(decoder.feed(sse))
    out.extend(decoder.finish())
    return out, raw


@pytest.mark.parametrize(("caller", "upstream"), PAIRS)
@pytest.mark.parametrize("case", sorted(_responses()))
def test_stream_matrix(case: str, caller: str, upstream: str) -> None:
    _skip_unportable(case, caller)
    original = _responses()[case]
    rng = random.Random(f"{case}{caller}{upstream}")
    from_upstream, _ = _sse_roundtrip(response_to_events(original), upstream, rng)
    if upstream != "openai_responses":
        acc = StreamAccumulator()
        for e in from_upstream:
            acc.add(e)
        from_upstream = response_to_events(_restore(acc.response(), upstream, frozenset({"apply_patch"})))
    at_caller, raw = _sse_roundtrip(from_upstream, caller, rng)
    parsed = streams.parse(raw)
    if caller == "openai_chat":
        streams.check_chat(parsed, include_usage=True)
    elif caller == "anthropic_messages":
        streams.check_anthropic(parsed)
    else:
        streams.check_responses(parsed)
    acc = StreamAccumulator()
    for e in at_caller:
        acc.add(e)
    assert _response_view(acc.response()) == _response_view(original)
