"""Who may call the proxy: inbound keys, Host, browser origins, content types, caps (issue 16)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from _configs import skeleton_config
from _proxy import recording_proxy

from switchyard.config.server import ApiKeyConfig
from switchyard.engine.records import DecisionRecord
from switchyard.server.auth import Budgets, KeyRing, hash_key
from switchyard.server.runner import ServerThread
from switchyard.state import MemoryStore

MESSAGES = [{"role": "user", "content": "hello there"}]
KEY_ALL = "sy-test-all-routes"
KEY_FAST = "sy-test-fast-only"
KEY_BUDGET = "sy-test-budget"


@contextlib.contextmanager
def proxy(config: dict[str, Any]) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    with recording_proxy(config) as served:
        yield served


@pytest.fixture(scope="module")
def open_proxy(module_config: dict[str, Any]) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    config = {
        **module_config,
        "server": {
            "allowed_hosts": ["proxy.internal"],
            "allowed_origins": ["http://localhost:3000"],
            "limits": {"max_body_bytes": 4096, "max_messages": 3},
        },
    }
    with proxy(config) as p:
        yield p


@pytest.fixture(scope="module")
def keyed_proxy(module_config: dict[str, Any]) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    config = {
        **module_config,
        "server": {
            "api_keys": [
                {"name": "all", "hash": hash_key(KEY_ALL)},
                {"name": "fast-only", "hash": hash_key(KEY_FAST), "routes": ["fast"]},
                {"name": "thrifty", "hash": hash_key(KEY_BUDGET), "budget_usd_per_day": 0.0000001},
            ]
        },
    }
    with proxy(config) as p:
        yield p


def _post(server: ServerThread, path: str = "/v1/chat/completions", **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("json", {"model": "fast", "messages": MESSAGES})
    return httpx.post(f"{server.root_url}{path}", timeout=10, **kwargs)


# -- no keys: loopback Host only, no browsers, JSON only ------------------------------------------


def test_dns_rebinding_host_is_refused(open_proxy: Any) -> None:
    server, _ = open_proxy
    resp = _post(server, headers={"host": "attacker.example"})
    assert resp.status_code == 403 and "server.allowed_hosts" in resp.json()["error"]["message"]
    assert _post(server, headers={"host": f"localhost:{server.port}"}).status_code == 200
    assert _post(server, headers={"host": "proxy.internal:8080"}).status_code == 200  # allowed_hosts
    assert _post(server, headers={"host": f"[::1]:{server.port}"}).status_code == 200


def test_simple_cross_site_post_is_refused(open_proxy: Any, module_upstream: Any) -> None:
    server, _ = open_proxy
    before = len(module_upstream.app.received)
    body = b'{"model": "fast", "messages": [{"role": "user", "content": "spend my money"}]}'
    for headers in (
        {"content-type": "text/plain;charset=UTF-8"},
        {},
        {"content-type": "application/x-www-form-urlencoded"},
    ):
        resp = httpx.post(f"{server.base_url}/chat/completions", content=body, headers=headers, timeout=5)
        assert resp.status_code == 415, headers
    assert len(module_upstream.app.received) == before  # nothing reached the paid upstream


def test_browser_origins_refused_unless_allowed(open_proxy: Any) -> None:
    server, _ = open_proxy
    resp = _post(server, headers={"origin": "https://evil.example"})
    assert resp.status_code == 403 and "allowed_origins" in resp.json()["error"]["message"]
    ok = _post(server, headers={"origin": "http://localhost:3000"})
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "x-switchyard-route" in ok.headers["access-control-expose-headers"]


def test_cors_preflight_for_allowed_origins_only(open_proxy: Any) -> None:
    server, _ = open_proxy
    url = f"{server.base_url}/chat/completions"
    asked = {"access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type"}
    ok = httpx.options(url, headers={"origin": "http://localhost:3000", **asked}, timeout=5)
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "POST" in ok.headers["access-control-allow-methods"]
    assert ok.headers["access-control-allow-headers"] == "authorization,content-type"
    bad = httpx.options(url, headers={"origin": "https://evil.example", **asked}, timeout=5)
    assert bad.status_code == 403 and "access-control-allow-origin" not in bad.headers


def test_body_cap_answers_413_in_each_apis_shape(open_proxy: Any) -> None:
    server, _ = open_proxy
    big = [{"role": "user", "content": "x" * 5000}]
    chat = _post(server, json={"model": "fast", "messages": big})
    assert chat.status_code == 413 and "max_body_bytes" in chat.json()["error"]["message"]
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        resp = _post(server, path, json={"model": "fast", "max_tokens": 5, "messages": big})
        assert resp.status_code == 413
        assert resp.json()["type"] == "error" and resp.json()["error"]["type"] == "request_too_large", path


def test_anthropic_sdk_sees_its_own_413(open_proxy: Any) -> None:
    server, _ = open_proxy
    with (
        anthropic.Anthropic(base_url=server.root_url, api_key="k", max_retries=0) as client,
        pytest.raises(anthropic.APIStatusError) as err,
    ):
        client.messages.create(model="fast", max_tokens=5, messages=[{"role": "user", "content": "x" * 5000}])
    assert err.value.status_code == 413 and err.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]


def test_message_count_cap(open_proxy: Any) -> None:
    server, _ = open_proxy
    many = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}] * 2 + MESSAGES
    resp = _post(server, json={"model": "fast", "messages": many})
    assert resp.status_code == 400 and "max_messages" in resp.json()["error"]["message"]
    anth = _post(server, "/v1/messages", json={"model": "fast", "max_tokens": 5, "messages": many})
    assert anth.status_code == 400 and anth.json()["error"]["type"] == "invalid_request_error"


def test_stream_string_false_is_a_400_not_a_stream(open_proxy: Any) -> None:
    server, _ = open_proxy
    resp = _post(server, json={"model": "fast", "messages": MESSAGES, "stream": "false"})
    assert resp.status_code == 400 and resp.headers["content-type"] == "application/json"
    neg = _post(server, json={"model": "fast", "messages": MESSAGES, "max_tokens": -1})
    assert neg.status_code == 400 and neg.json()["error"]["param"] == "max_tokens"
    empty = _post(server, json={"model": "fast", "messages": []})
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "messages"


# -- with keys ------------------------------------------------------------------------------------


def test_missing_or_wrong_key_is_401_in_openai_shape(keyed_proxy: Any) -> None:
    server, _ = keyed_proxy
    assert _post(server).status_code == 401
    with (
        openai.OpenAI(base_url=server.base_url, api_key="sy-wrong", max_retries=0) as client,
        pytest.raises(openai.AuthenticationError) as err,
    ):
        client.chat.completions.create(model="fast", messages=MESSAGES)  # type: ignore[arg-type]
    assert err.value.body["message"] == "invalid API key"  # type: ignore[index]


def test_wrong_key_is_401_in_anthropic_shape(keyed_proxy: Any) -> None:
    server, _ = keyed_proxy
    with (
        anthropic.Anthropic(base_url=server.root_url, api_key="sy-wrong", max_retries=0) as client,
        pytest.raises(anthropic.AuthenticationError) as err,
    ):
        client.messages.create(model="fast", max_tokens=5, messages=MESSAGES)  # type: ignore[arg-type]
    assert err.value.body["type"] == "error"  # type: ignore[index]
    assert err.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


def test_keys_accepted_from_each_header(keyed_proxy: Any) -> None:
    server, records = keyed_proxy
    for headers in ({"authorization": f"Bearer {KEY_ALL}"}, {"x-api-key": KEY_ALL}, {"api-key": KEY_ALL}):
        assert _post(server, headers=headers).status_code == 200, headers
    assert records[-1].details["api_key"] == "all"
    with openai.OpenAI(base_url=server.base_url, api_key=KEY_ALL, max_retries=0) as client:
        assert client.chat.completions.create(model="mix", messages=MESSAGES).choices  # type: ignore[arg-type]
    with anthropic.Anthropic(base_url=server.root_url, api_key=KEY_ALL, max_retries=0) as anth:
        assert anth.messages.create(model="fast", max_tokens=20, messages=MESSAGES).content  # type: ignore[arg-type]


def test_route_allowlist_is_404_in_the_callers_shape(keyed_proxy: Any) -> None:
    server, _ = keyed_proxy
    assert _post(server, headers={"authorization": f"Bearer {KEY_FAST}"}).status_code == 200
    with (
        openai.OpenAI(base_url=server.base_url, api_key=KEY_FAST, max_retries=0) as client,
        pytest.raises(openai.NotFoundError) as err,
    ):
        client.chat.completions.create(model="mix", messages=MESSAGES)  # type: ignore[arg-type]
    assert "does not exist or you do not have access" in err.value.body["message"]  # type: ignore[index]
    assert err.value.body["code"] == "model_not_found"  # type: ignore[index]
    with (
        anthropic.Anthropic(base_url=server.root_url, api_key=KEY_FAST, max_retries=0) as anth,
        pytest.raises(anthropic.NotFoundError) as aerr,
    ):
        anth.messages.create(model="mix", max_tokens=5, messages=MESSAGES)  # type: ignore[arg-type]
    assert aerr.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    # count_tokens resolves the route too
    count = _post(
        server,
        "/v1/messages/count_tokens",
        json={"model": "mix", "messages": MESSAGES},
        headers={"x-api-key": KEY_FAST},
    )
    assert count.status_code == 404 and count.json()["type"] == "error"


def test_health_needs_no_key_but_models_does(keyed_proxy: Any) -> None:
    server, _ = keyed_proxy
    assert httpx.get(f"{server.root_url}/health", timeout=5).status_code == 200
    assert httpx.get(f"{server.base_url}/models", timeout=5).status_code == 401
    ok = httpx.get(f"{server.base_url}/models", headers={"authorization": f"Bearer {KEY_ALL}"}, timeout=5)
    assert ok.status_code == 200 and {m["id"] for m in ok.json()["data"]} == {"fast", "mix", "resilient"}
    only = httpx.get(f"{server.base_url}/models", headers={"authorization": f"Bearer {KEY_FAST}"}, timeout=5)
    assert [m["id"] for m in only.json()["data"]] == ["fast"]


def test_with_keys_any_host_may_call(keyed_proxy: Any) -> None:
    server, _ = keyed_proxy
    resp = _post(server, headers={"host": "gateway.example", "authorization": f"Bearer {KEY_ALL}"})
    assert resp.status_code == 200


def test_daily_budget_enforced_from_decision_records(keyed_proxy: Any) -> None:
    server, records = keyed_proxy
    headers = {"authorization": f"Bearer {KEY_BUDGET}"}
    first = _post(server, headers=headers)
    assert first.status_code == 200
    assert records[-1].details["api_key"] == "thrifty" and records[-1].cost_usd > 0
    with (
        openai.OpenAI(base_url=server.base_url, api_key=KEY_BUDGET, max_retries=0) as client,
        pytest.raises(openai.RateLimitError) as err,
    ):
        client.chat.completions.create(model="fast", messages=MESSAGES)  # type: ignore[arg-type]
    assert err.value.code == "insufficient_quota"
    assert err.value.response.headers["x-should-retry"] == "false"
    assert int(err.value.response.headers["retry-after"]) > 0
    # Other keys are not affected.
    assert _post(server, headers={"authorization": f"Bearer {KEY_ALL}"}).status_code == 200


def test_budgets_are_shared_through_the_state_store() -> None:
    store = MemoryStore()
    ring = KeyRing([ApiKeyConfig(name="k", hash=hash_key("s"), budget_usd_per_day=1.0)])
    one, two = Budgets(store, ring.limits(), refresh_s=0), Budgets(store, ring.limits(), refresh_s=0)
    key = ring.find("s")
    assert key is not None

    async def run() -> float:
        record = DecisionRecord(request_id="x", route="r", router="passthrough")
        record.bind(key.caller)
        record.cost_usd = 0.25
        one.record(record)
        await asyncio.sleep(0.01)  # the write to the store
        return await two.spent("k")

    assert asyncio.run(run()) == pytest.approx(0.25)


def test_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SY_TEST_KEY", "sy-from-env")
    ring = KeyRing([ApiKeyConfig(name="env", key_env="SY_TEST_KEY")])
    found = ring.find("sy-from-env")
    assert found is not None and found.name == "env" and ring.find("sy-other") is None
    monkeypatch.delenv("SY_TEST_KEY")
    with pytest.raises(ValueError, match="SY_TEST_KEY"):
        KeyRing([ApiKeyConfig(name="env", key_env="SY_TEST_KEY")])


def test_config_keeps_only_hashes() -> None:
    with pytest.raises(ValueError, match="sha256"):
        ApiKeyConfig(name="k", hash="plaintext-key")
    with pytest.raises(ValueError, match="exactly one"):
        ApiKeyConfig(name="k")
    assert skeleton_config(1)  # the shared config is untouched by these tests


def test_keys_create_prints_an_entry_that_loads_whatever_the_name(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from switchyard.cli import main

    assert main(["keys", "create", "--name", "ci: nightly #2", "--routes", "fast, agent", "--budget", "5"]) == 0
    out = capsys.readouterr().out
    key = out.split("shown once, give it to the client): ", 1)[1].split()[0]
    entry = yaml.safe_load(out[out.index("server:") :])["server"]["api_keys"][0]
    assert entry["name"] == "ci: nightly #2" and entry["routes"] == ["fast", "agent"]
    assert entry["budget_usd_per_day"] == 5
    found = KeyRing([ApiKeyConfig(**entry)]).find(key)
    assert found is not None and found.name == "ci: nightly #2"
