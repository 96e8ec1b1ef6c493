"""An inbound key's ``require_labels`` binds every request it authenticates (issue 27)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _proxy import recording_proxy

from switchyard.engine.records import DecisionRecord
from switchyard.server.auth import hash_key
from switchyard.server.runner import ServerThread

MESSAGES = [{"role": "user", "content": "hello there"}]
KEY_ONPREM = "sy-test-onprem-only"
KEY_ANY = "sy-test-any-target"


@pytest.fixture(scope="module")
def labelled_proxy(module_config: dict[str, Any]) -> Iterator[tuple[ServerThread, list[DecisionRecord], Any]]:
    config = {
        **module_config,
        "targets": {
            **module_config["targets"],
            "efficient": {**module_config["targets"]["efficient"], "labels": ["onprem"]},
        },
        "server": {
            "api_keys": [
                {"name": "onprem-team", "hash": hash_key(KEY_ONPREM), "require_labels": ["onprem"]},
                {"name": "anyone", "hash": hash_key(KEY_ANY)},
            ]
        },
    }
    with recording_proxy(config) as (server, records):
        yield server, records, config


def test_the_keys_labels_choose_the_target_and_are_recorded(labelled_proxy: Any, module_upstream: Any) -> None:
    server, records, _ = labelled_proxy
    with openai.OpenAI(base_url=server.base_url, api_key=KEY_ONPREM, max_retries=0) as client:
        for _ in range(6):  # `mix` picks either target at random; this key only ever gets one
            reply = client.chat.completions.with_raw_response.create(model="mix", messages=MESSAGES)  # type: ignore[arg-type]
            assert reply.headers["x-switchyard-selected-model"] == "efficient"
    entry = records[-1].details["restriction"]
    assert entry["by"] == [{"source": "api_key", "name": "onprem-team", "labels": ["onprem"]}]
    assert entry["removed"] == ["capable"]


def test_a_route_without_an_eligible_target_is_403_for_that_key_only(labelled_proxy: Any, module_upstream: Any) -> None:
    server, records, _ = labelled_proxy
    before = module_upstream.app.count("fake-capable")
    with (
        openai.OpenAI(base_url=server.base_url, api_key=KEY_ONPREM, max_retries=0) as client,
        pytest.raises(openai.PermissionDeniedError) as err,
    ):
        client.chat.completions.create(model="resilient", messages=MESSAGES)  # type: ignore[arg-type]
    message = err.value.body["message"]  # type: ignore[index]
    assert "API key 'onprem-team' requires onprem" in message and "broken, capable" in message
    assert module_upstream.app.count("fake-capable") == before
    assert records[-1].status == 403
    with openai.OpenAI(base_url=server.base_url, api_key=KEY_ANY, max_retries=0) as client:
        reply = client.chat.completions.with_raw_response.create(model="resilient", messages=MESSAGES)  # type: ignore[arg-type]
        assert reply.headers["x-switchyard-selected-model"] == "capable"
