"""A route's ``restrict:`` rules read everything that leaves the proxy (issue 44, item 3).

Each route serves its own format: an unlabelled ``*-cloud`` target first, an ``onprem``
``*-local`` fallback; a ``secrets`` rule requires ``onprem``. A secret placed anywhere a target
would receive it — tool definitions and their schemas, documents, search results, predictions,
response formats, a token count's body, the history of a continued thread — must keep the
request away from the cloud target, through the real server. Repeated ``x-switchyard-require``
lines accumulate, and the dashboard's preview never shows what a rule matched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _proxy import recording_proxy

from switchyard.engine.records import DecisionRecord
from switchyard.routers.restrict import RestrictPolicy, RestrictRule
from switchyard.server.runner import ServerThread
from switchyard.testing.fake_threads import BETA

SECRET = "sk-ant-api03-" + "q7Xz" * 10
"""An Anthropic-key-shaped secret the ``secrets`` detector finds."""

RULES = [{"detector": "secrets", "require": ["onprem"]}]
FORMATS = {"chat": "openai_chat", "anth": "anthropic_messages", "resp": "openai_responses"}


def _config(port: int) -> dict[str, Any]:
    chat_url = f"http://127.0.0.1:{port}/v1"
    clients = {
        "chat": {"format": "openai_chat", "base_url": chat_url},
        "anth": {"format": "anthropic_messages", "base_url": f"http://127.0.0.1:{port}"},
        "resp": {"format": "openai_responses", "base_url": chat_url},
    }
    targets: dict[str, Any] = {}
    routes: dict[str, Any] = {}
    for short in FORMATS:
        targets[f"{short}-cloud"] = {"client": short, "model": f"reach-{short}-cloud"}
        targets[f"{short}-local"] = {"client": short, "model": f"reach-{short}-local", "labels": ["onprem"]}
        routes[f"{short}-guarded"] = {
            "type": "passthrough",
            "target": f"{short}-cloud",
            "fallbacks": [f"{short}-local"],
            "restrict": RULES,
        }
    # Two Anthropic targets the router picks between (always the cloud one, by weight): a thread
    # created on the local one must be continued there.
    routes["anth-pick"] = {
        "type": "random",
        "targets": ["anth-cloud", "anth-local"],
        "weights": [1, 0],
        "restrict": RULES,
    }
    routes["chat-open"] = {"type": "passthrough", "target": "chat-cloud", "fallbacks": ["chat-local"]}
    return {
        "llm_clients": clients,
        "targets": targets,
        "routes": routes,
        "server": {"dashboard": {"enabled": True}},
    }


@pytest.fixture(scope="module")
def proxy(module_upstream: Any) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    with recording_proxy(_config(module_upstream.port)) as found:
        yield found


USER = {"role": "user", "content": "Summarise what you were given."}
SCHEMA_WITH_SECRET = {"type": "object", "properties": {"key": {"type": "string", "default": SECRET}}}


def _chat(**fields: Any) -> dict[str, Any]:
    return {"model": "chat-guarded", "messages": [USER], **fields}


def _anth(*blocks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    content = [*blocks, {"type": "text", "text": "Summarise what you were given."}]
    return {"model": "anth-guarded", "max_tokens": 64, "messages": [{"role": "user", "content": content}], **fields}


def _resp(**fields: Any) -> dict[str, Any]:
    return {"model": "resp-guarded", "input": "Summarise what you were given.", **fields}


def _fn(description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "deploy", "description": description, "parameters": parameters}}


LEAKS: dict[str, tuple[str, dict[str, Any]]] = {
    # OpenAI Chat Completions
    "chat-tool-description": ("chat", _chat(tools=[_fn(f"Deploys with {SECRET}", {"type": "object"})])),
    "chat-tool-schema": ("chat", _chat(tools=[_fn("Deploys", SCHEMA_WITH_SECRET)])),
    "chat-prediction": ("chat", _chat(prediction={"type": "content", "content": f"token = {SECRET}"})),
    "chat-response-format": (
        "chat",
        _chat(response_format={"type": "json_schema", "json_schema": {"name": "out", "schema": SCHEMA_WITH_SECRET}}),
    ),
    # Anthropic Messages
    "anth-document": (
        "anth",
        _anth(
            {
                "type": "document",
                "source": {"type": "content", "content": [{"type": "text", "text": f"deploy key {SECRET}"}]},
                "title": "runbook",
            }
        ),
    ),
    "anth-search-result": (
        "anth",
        _anth(
            {
                "type": "search_result",
                "source": "https://wiki.example/ops",
                "title": "ops",
                "content": [{"type": "text", "text": f"the key is {SECRET}"}],
            }
        ),
    ),
    "anth-tool-schema": (
        "anth",
        _anth(tools=[{"name": "deploy", "description": "Deploys", "input_schema": SCHEMA_WITH_SECRET}]),
    ),
    "anth-output-format": (
        "anth",
        _anth(output_config={"format": {"type": "json_schema", "schema": SCHEMA_WITH_SECRET}}),
    ),
    # OpenAI Responses
    "resp-tool-description": (
        "resp",
        _resp(tools=[{"type": "function", "name": "deploy", "description": f"uses {SECRET}", "parameters": {}}]),
    ),
    "resp-tool-schema": (
        "resp",
        _resp(
            tools=[{"type": "function", "name": "deploy", "description": "Deploys", "parameters": SCHEMA_WITH_SECRET}]
        ),
    ),
    "resp-text-format": (
        "resp",
        _resp(text={"format": {"type": "json_schema", "name": "out", "schema": SCHEMA_WITH_SECRET}}),
    ),
}
PATHS = {"chat": "/v1/chat/completions", "anth": "/v1/messages", "resp": "/v1/responses"}


def _post(server: ServerThread, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(server.root_url + path, json=body, headers=headers, timeout=30)


def _cloud_calls(fake: Any, short: str) -> int:
    return fake.count(f"reach-{short}-cloud")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("case", sorted(LEAKS))
def test_a_secret_anywhere_in_the_request_keeps_it_off_the_forbidden_target(
    proxy: Any, module_upstream: Any, case: str, stream: bool
) -> None:
    server, records = proxy
    short, body = LEAKS[case]
    before = _cloud_calls(module_upstream.app, short)
    reply = _post(server, PATHS[short], {**body, "stream": stream})
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-switchyard-selected-model"] == f"{short}-local"
    assert _cloud_calls(module_upstream.app, short) == before
    entry = records[-1].details["restriction"]
    assert entry["by"] == [{"source": "route", "name": "secrets", "labels": ["onprem"], "matches": 1}]


@pytest.mark.parametrize(
    "body",
    [
        _anth(tools=[{"name": "deploy", "description": f"Deploys with {SECRET}", "input_schema": {"type": "object"}}]),
        _anth({"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": SECRET}]}),
        _anth(system=[{"type": "text", "text": "ops"}], metadata={"user_id": SECRET}),
    ],
    ids=["tool", "search-result", "metadata"],
)
def test_a_token_count_reads_its_whole_body(proxy: Any, module_upstream: Any, body: dict[str, Any]) -> None:
    server, _ = proxy
    before = _cloud_calls(module_upstream.app, "anth")
    reply = _post(server, "/v1/messages/count_tokens", {k: v for k, v in body.items() if k != "max_tokens"})
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-switchyard-selected-model"] == "anth-local"
    assert _cloud_calls(module_upstream.app, "anth") == before


def test_a_request_without_a_secret_still_goes_to_the_cloud(proxy: Any, module_upstream: Any) -> None:
    """The rules do not over-reach: the same shapes without a secret are served as routed."""
    server, records = proxy
    tools = [_fn("Deploys", {"type": "object", "properties": {"key": {"type": "string"}}})]
    reply = _post(server, PATHS["chat"], _chat(tools=tools, prediction={"type": "content", "content": "x = 1"}))
    assert reply.status_code == 200 and reply.headers["x-switchyard-selected-model"] == "chat-cloud"
    assert "restriction" not in records[-1].details


def _threaded(server: ServerThread, text: str, thread: dict[str, Any]) -> httpx.Response:
    body = {
        "model": "anth-pick",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        "thread": thread,
    }
    return _post(server, "/v1/messages", body, **{"anthropic-beta": BETA})


def test_a_continued_thread_keeps_the_strictest_restriction_it_had(proxy: Any, module_upstream: Any) -> None:
    """The thread's first turn carried a secret: every later ``continue`` (whose own messages
    carry none, while the upstream answers with the whole conversation) stays on ``onprem``."""
    server, records = proxy
    before = _cloud_calls(module_upstream.app, "anth")
    first = _threaded(server, f"deploy with {SECRET}", {"type": "create"})
    assert first.status_code == 200, first.text
    assert first.headers["x-switchyard-selected-model"] == "anth-local"
    previous = first.json()["id"]
    for _ in range(2):  # a continue of a continue keeps it too: each reply's record carries it on
        reply = _threaded(server, "and now the next step", {"type": "continue", "previous_message_id": previous})
        assert reply.status_code == 200, reply.text
        assert reply.headers["x-switchyard-selected-model"] == "anth-local"
        entry = records[-1].details["restriction"]
        assert {"source": "thread", "name": previous, "labels": ["onprem"]} in entry["by"]
        previous = reply.json()["id"]
    assert _cloud_calls(module_upstream.app, "anth") == before
    # Without a secret anywhere, a new thread goes where the router sends it.
    fresh = _threaded(server, "hello", {"type": "create"})
    assert fresh.headers["x-switchyard-selected-model"] == "anth-cloud"
    again = _threaded(server, "more", {"type": "continue", "previous_message_id": fresh.json()["id"]})
    assert again.headers["x-switchyard-selected-model"] == "anth-cloud"


def test_a_thread_the_proxy_does_not_know_is_not_continued_on_a_restricted_route(
    proxy: Any, module_upstream: Any
) -> None:
    """Its restriction is unknown: answered ``thread_not_found`` (the SDK then replays the whole
    conversation, which the rules read), and no upstream sees the ``continue``."""
    server, records = proxy
    seen = len(module_upstream.app.received)
    reply = _threaded(server, "continue please", {"type": "continue", "previous_message_id": "msg_unknown"})
    assert reply.status_code == 404
    assert reply.json()["error"]["details"] == {"error_code": "thread_not_found"}
    assert "no record" in reply.json()["error"]["message"]
    assert len(module_upstream.app.received) == seen
    assert records[-1].status == 404


def test_repeated_require_header_lines_all_apply(proxy: Any) -> None:
    """Two ``x-switchyard-require`` lines: the labels of both are required (not the last only)."""
    server, records = proxy
    headers = [("x-switchyard-require", "onprem"), ("x-switchyard-require", "eu")]
    reply = httpx.post(server.base_url + "/chat/completions", json=_chat(), headers=headers, timeout=30)
    # No target carries both labels: refused, where the last line alone (eu) or the first
    # alone (onprem, which chat-local carries) would each have been served differently.
    assert reply.status_code == 403, reply.text
    assert records[-1].details["restriction"]["require"] == ["eu", "onprem"]
    reply = httpx.post(
        server.base_url + "/chat/completions",
        json={**_chat(), "model": "chat-open"},
        headers=[("x-switchyard-require", "onprem"), ("x-switchyard-require", "onprem,")],
        timeout=30,
    )
    assert reply.status_code == 200 and reply.headers["x-switchyard-selected-model"] == "chat-local"


def test_previews_never_show_what_a_rule_matched(proxy: Any) -> None:
    server, records = proxy
    text = f"please deploy: the key is {SECRET} and the region is eu-west"
    body = {"model": "chat-guarded", "messages": [{"role": "user", "content": text}]}
    reply = _post(server, PATHS["chat"], body, **{"x-switchyard-session-id": "leaky"})
    assert reply.status_code == 200 and reply.headers["x-switchyard-selected-model"] == "chat-local"
    preview = records[-1].preview
    assert preview is not None and SECRET not in preview and "[redacted]" in preview
    assert preview.startswith("user: please deploy: the key is [redacted]")
    timeline = httpx.get(server.root_url + "/dashboard/api/session", params={"key": "chat-guarded:leaky"}, timeout=30)
    assert timeline.status_code == 200, timeline.text
    assert SECRET[:24] not in timeline.text and "[redacted]" in timeline.text


def test_an_upstream_error_that_quotes_the_secret_is_masked_in_the_record(proxy: Any) -> None:
    """The allowed target refuses the request and quotes what it refused (here the Anthropic
    fake names an unknown ``tool_use_id``): the record every sink gets — decision log,
    dashboard, callbacks — carries the error without what the rule matched."""
    server, records = proxy
    result = {"type": "tool_result", "tool_use_id": SECRET, "content": "done"}
    body = {"model": "anth-guarded", "max_tokens": 64, "messages": [{"role": "user", "content": [result]}]}
    reply = _post(server, PATHS["anth"], body)
    assert reply.status_code == 400 and SECRET in reply.text  # the caller's own text, as the upstream said it
    record = records[-1]
    assert record.selected == "anth-local" or [a.target for a in record.attempts] == ["anth-local"]
    texts = [record.error or "", *(a.error or "" for a in record.attempts)]
    assert any("[redacted]" in t for t in texts), texts
    assert SECRET not in "".join(texts)
    assert SECRET not in record.to_json().decode() and "_redact" not in record.to_dict()


def test_a_body_of_any_json_shape_is_read_without_failing(proxy: Any) -> None:
    """Blocks the decoder drops may hold any JSON (a list where a ``type`` string belongs): the
    rules read them all the same, and the request is served (not a 500)."""
    server, _ = proxy
    odd = {"type": ["base64"], "data": {"nested": [1, None, True]}, "note": f"key {SECRET}"}
    reply = _post(server, PATHS["anth"], _anth(odd))
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-switchyard-selected-model"] == "anth-local"


def test_a_records_own_words_are_masked_too() -> None:
    """A judge's or advisor's words in ``details`` and the router's reason may quote the prompt."""
    rule = RestrictRule(detector="secrets", require=["onprem"])
    record = DecisionRecord(request_id="r", route="x", router="y", reason=f"saw {SECRET}")
    record.details = {"escalation": {"judge_reason": f"the user pasted {SECRET}", "n": 1}, "plans": [SECRET]}
    record._redact = RestrictPolicy([rule]).redactor([rule], "[redacted]")
    record.mask()
    assert SECRET not in record.to_json().decode()
    assert record.details == {
        "escalation": {"judge_reason": "the user pasted [redacted]", "n": 1},
        "plans": ["[redacted]"],
    }
