"""What a caller may learn and trigger (issue 23, caller-facing red-team findings): /health, deep
checks, /v1/stats and /metrics per caller; one 404 for hidden and unknown models; a non-string
``model``; a throttling health endpoint is not a dead backend."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _configs import skeleton_config

from switchyard.api import Switchyard, wants_deep
from switchyard.server import views
from switchyard.server.auth import hash_key
from switchyard.server.runner import ServerThread

KEY_ADMIN = "sy-test-admin"
KEY_ALL = "sy-test-all-routes"
KEY_FAST = "sy-test-fast-only"
HI = [{"role": "user", "content": "hi"}]


def _config(port: int, server: dict[str, Any]) -> dict[str, Any]:
    config = skeleton_config(port)
    config["routes"]["mix"]["aliases"] = ["blender"]
    config["default_route"] = "mix"
    config["server"] = server
    return config


@contextlib.contextmanager
def _proxy(port: int, server: dict[str, Any]) -> Iterator[ServerThread]:
    sy = Switchyard.from_config(_config(port, server))
    try:
        with ServerThread(sy) as srv:
            yield srv
    finally:
        sy.close()


@pytest.fixture(scope="module")
def fake(module_upstream: Any) -> Any:
    return module_upstream  # conftest's plain fake upstream, one per module


@pytest.fixture(scope="module")
def keyed(fake: Any) -> Iterator[ServerThread]:
    keys = [
        {"name": "ops", "hash": hash_key(KEY_ADMIN), "admin": True},
        {"name": "all", "hash": hash_key(KEY_ALL)},
        {"name": "fast-only", "hash": hash_key(KEY_FAST), "routes": ["fast"]},
    ]
    with _proxy(fake.port, {"api_keys": keys}) as srv:
        yield srv


@pytest.fixture(scope="module")
def open_proxy(fake: Any) -> Iterator[ServerThread]:
    with _proxy(fake.port, {"deep_health_interval_s": 3600}) as srv:
        yield srv


@pytest.fixture
def healthy(fake: Any) -> Iterator[Any]:
    try:
        yield fake
    finally:
        fake.app.health_status = 200


def _get(srv: ServerThread, path: str, key: str | None = None, **headers: str) -> httpx.Response:
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return httpx.get(f"{srv.root_url}{path}", headers=headers, timeout=10)


def _health_gets(fake: Any) -> int:
    return sum(1 for p in fake.app.gets if p.endswith("/health"))


# -- GET /health: status for everyone, details for the operator ----------------------------------


def test_health_without_an_admin_key_says_only_status(keyed: ServerThread, fake: Any) -> None:
    for key in (None, KEY_ALL, KEY_FAST, "sy-wrong"):
        resp = _get(keyed, "/health", key)
        assert resp.status_code == 200
        body = resp.json()
        assert set(body) == {"status", "detail"} and body["status"] in ("ok", "degraded"), key
        assert str(fake.port) not in resp.text and "efficient" not in resp.text and "fast" not in resp.text
    full = _get(keyed, "/v1/health", KEY_ADMIN).json()
    assert {"routes", "backends", "targets"} <= set(full) and "fast" in full["routes"]
    assert full["backends"]["local"]["targets"] == ["efficient", "capable", "broken"]


def test_without_keys_loopback_callers_see_details_others_only_status(open_proxy: ServerThread, fake: Any) -> None:
    local = _get(open_proxy, "/health").json()
    assert {"routes", "backends", "targets"} <= set(local)
    # A caller that reached the proxy through a reverse proxy on this host (uvicorn takes its
    # address from X-Forwarded-For when the peer is 127.0.0.1) is not on loopback.
    remote = _get(open_proxy, "/health", **{"x-forwarded-for": "203.0.113.9"}).json()
    assert set(remote) == {"status", "detail"}
    before = _health_gets(fake)
    remote = _get(open_proxy, "/health?deep=1", **{"x-forwarded-for": "203.0.113.9"}).json()
    assert set(remote) == {"status", "detail", "deep"} and "callers on this machine" in remote["deep"]
    assert _health_gets(fake) == before  # probed nothing


# -- deep checks: admin only with keys, one round per interval without -----------------------------


@pytest.mark.parametrize(
    ("query", "deep"),
    [("deep=1", True), ("deep", True), ("x=1&deep=TRUE", True), ("deep=0", False), ("deep=No", False), ("", False)],
)
def test_the_server_and_dispatch_read_deep_the_same_way(query: str, deep: bool) -> None:
    assert views.wants_deep is wants_deep
    assert wants_deep(query) is deep


def test_deep_checks_by_keys_that_are_not_admin_probe_nothing(keyed: ServerThread, fake: Any) -> None:
    before = _health_gets(fake)
    for key in (None, KEY_ALL, KEY_FAST):
        body = _get(keyed, "/health?deep=1", key).json()
        assert body["deep"] == "not probed: deep checks need an admin key"
    assert _health_gets(fake) == before
    report = _get(keyed, "/health?deep=1", KEY_ADMIN).json()
    assert "deep" not in report and report["backends"]["local"]["state"] == "up"
    assert str(fake.port) in report["backends"]["local"]["url"]
    assert str(fake.port) not in _get(keyed, "/health", KEY_ALL).text  # the probed URL stays the operator's
    assert _health_gets(fake) == before + 1


def test_without_keys_deep_checks_share_one_round_per_interval(open_proxy: ServerThread, fake: Any) -> None:
    before = _health_gets(fake)
    bodies = [_get(open_proxy, "/health?deep=1").json() for _ in range(10)]
    assert _health_gets(fake) - before <= 1  # was one probe per call (10 calls, 10 probes)
    assert all("deep_health_interval_s" in b["deep"] for b in bodies[1:])
    assert all(b["backends"]["local"]["state"] == "up" for b in bodies)


def test_a_throttling_health_endpoint_does_not_take_the_backend_out(keyed: ServerThread, healthy: Any) -> None:
    healthy.app.health_status = 429
    report = _get(keyed, "/health?deep=1", KEY_ADMIN).json()
    backend = report["backends"]["local"]
    assert (backend["state"], backend["status"]) == ("rate_limited", 429)
    assert report["targets"]["efficient"]["available"] is True and report["status"] == "ok"
    resp = httpx.post(
        f"{keyed.base_url}/chat/completions",
        json={"model": "fast", "messages": HI},
        headers={"authorization": f"Bearer {KEY_ALL}"},
        timeout=10,
    )
    assert resp.status_code == 200 and resp.headers["x-switchyard-selected-model"] == "efficient"
    healthy.app.health_status = 200
    assert _get(keyed, "/health?deep=1", KEY_ADMIN).json()["backends"]["local"]["state"] == "up"


# -- /v1/stats and /metrics: every route's spend and every key's sessions are the operator's ---------


def test_stats_and_metrics_need_an_admin_key(keyed: ServerThread) -> None:
    for path in ("/v1/stats", "/metrics"):
        for key in (KEY_ALL, KEY_FAST):
            resp = _get(keyed, path, key)
            assert resp.status_code == 403, (path, key)
            error = resp.json()["error"]
            assert error["code"] == "admin_key_required" and "server.api_keys[].admin" in error["message"]
        assert _get(keyed, path).status_code == 401
    stats = _get(keyed, "/v1/stats", KEY_ADMIN)
    assert stats.status_code == 200 and "usd" in stats.json()
    metrics = _get(keyed, "/metrics", KEY_ADMIN)
    assert metrics.status_code in (200, 404)  # 404: prometheus_client not installed
    if metrics.status_code == 200:
        assert "switchyard_" in metrics.text


# -- one answer for a hidden route, its alias, and an unknown model ---------------------------------


def _chat(srv: ServerThread, model: Any, key: str) -> httpx.Response:
    return httpx.post(
        f"{srv.base_url}/chat/completions",
        json={"model": model, "messages": HI},
        headers={"authorization": f"Bearer {key}"},
        timeout=10,
    )


def test_hidden_routes_and_unknown_models_get_one_answer(keyed: ServerThread) -> None:
    # "blender" is an alias of the hidden route "mix"; "nothing" falls to default_route "mix".
    for model in ("mix", "blender", "nothing"):
        resp = _chat(keyed, model, KEY_FAST)
        assert resp.status_code == 404, model
        error = resp.json()["error"]
        # OpenAI's documented body for an unknown model: type invalid_request_error.
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error"
        assert error["code"] == "model_not_found" and error["param"] == "model"
        assert error["message"] == (
            f"The model `{model}` does not exist or you do not have access to it: "
            "it names no route this caller may use (available: fast)"
        )
        responses = httpx.post(
            f"{keyed.base_url}/responses",
            json={"model": model, "input": "hi"},
            headers={"authorization": f"Bearer {KEY_FAST}"},
            timeout=10,
        )
        assert responses.status_code == 404 and responses.json()["error"] == error
        anthropic = httpx.post(
            f"{keyed.root_url}/v1/messages",
            json={"model": model, "max_tokens": 8, "messages": HI},
            headers={"x-api-key": KEY_FAST, "anthropic-version": "2023-06-01"},
            timeout=10,
        )
        assert anthropic.status_code == 404 and anthropic.json()["error"]["type"] == "not_found_error"
        assert "`mix`" not in anthropic.json()["error"]["message"].replace(f"`{model}`", "")
        listed = _get(keyed, f"/v1/models/{model}", KEY_FAST)
        assert listed.status_code == 404 and listed.json()["error"] == error
    # The key that may use the default route is still served by it.
    assert _chat(keyed, "nothing", KEY_ALL).status_code == 200


# -- a non-string model -------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "kind"), [(["fast"], "an array"), ({"id": "fast"}, "an object"), (7, "a number")])
def test_a_non_string_model_is_400_naming_the_field(keyed: ServerThread, fake: Any, model: Any, kind: str) -> None:
    before = len(fake.app.received)
    resp = _chat(keyed, model, KEY_ALL)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["param"] == "model" and error["message"] == f"'model' must be a string naming a route, got {kind}"
    anthropic = httpx.post(
        f"{keyed.root_url}/v1/messages",
        json={"model": model, "max_tokens": 8, "messages": HI},
        headers={"x-api-key": KEY_ALL},
        timeout=10,
    )
    assert anthropic.status_code == 400 and anthropic.json()["type"] == "error"
    assert "'model' must be a string" in anthropic.json()["error"]["message"]
    responses = httpx.post(
        f"{keyed.base_url}/responses",
        json={"model": model, "input": "hi"},
        headers={"authorization": f"Bearer {KEY_ALL}"},
        timeout=10,
    )
    assert responses.status_code == 400 and responses.json()["error"]["param"] == "model"
    assert len(fake.app.received) == before  # nothing went upstream
