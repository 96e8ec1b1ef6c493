"""``server.tenants``: groups of inbound keys that share one tenant, checked at load with the
YAML path and line of each mistake (issue 44)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from switchyard.config import ConfigError, load_config
from switchyard.config.server import ApiKeyConfig, TenantConfig
from switchyard.server.auth import KeyRing, hash_key

HEAD = """\
llm_clients:
  local: {format: openai_chat, base_url: "http://127.0.0.1:9/v1"}
targets:
  t: {client: local, model: m}
routes:
  r: {type: passthrough, target: t}
server:
  api_keys:
    - {name: alice-laptop, hash: "HASH1"}
    - {name: alice-ci, hash: "HASH2"}
    - {name: bob, hash: "HASH3"}
"""
for _i in (1, 2, 3):
    HEAD = HEAD.replace(f"HASH{_i}", hash_key(f"k{_i}"))


def problems(tmp_path: Path, tenants: str) -> list[str]:
    path = tmp_path / "router.yaml"
    path.write_text(HEAD + textwrap.indent(textwrap.dedent(tenants), "  "))
    with pytest.raises(ConfigError) as err:
        load_config(path, env={})
    return [line[len(str(path)) :] for line in str(err.value).splitlines()]


def test_grouped_keys_share_a_tenant_and_the_others_are_their_own(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(HEAD + "  tenants:\n    alice: {keys: [alice-laptop, alice-ci]}\n")
    server = load_config(path, env={}).config.server
    ring = KeyRing(server.api_keys, tenants=server.tenants)
    assert [ring.find(k).tenant for k in ("k1", "k2", "k3")] == ["alice", "alice", "bob"]  # type: ignore[union-attr]
    assert KeyRing(server.api_keys).find("k1").tenant == "alice-laptop"  # type: ignore[union-attr]


def test_a_key_in_two_tenants_an_unknown_key_and_a_tenant_named_like_another_key(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        tenants:
          alice:
            keys: [alice-laptop, alice-ci, carol]
          bob:
            keys: [alice-ci]
        """,
    )
    assert found == [
        ":14: server.tenants.alice.keys[2]: no key named 'carol' in server.api_keys "
        "(names: alice-ci, alice-laptop, bob)",
        ":15: server.tenants.bob: 'bob' is the name of an API key outside this tenant, which is a tenant of that "
        "name by itself: list the key in this tenant's keys, or name the tenant otherwise",
        ":16: server.tenants.bob.keys[0]: key 'alice-ci' is already listed at server.tenants.alice.keys[1]; "
        "a key belongs to one tenant",
    ]


def test_a_tenant_needs_keys(tmp_path: Path) -> None:
    assert problems(tmp_path, "tenants: {alice: {keys: []}}\n") == [
        ":12: server.tenants.alice.keys: List should have at least 1 item after validation, not 0"
    ]
    path = tmp_path / "lone.yaml"
    path.write_text(HEAD.split("server:")[0] + "server:\n  tenants: {alice: {keys: [alice-laptop]}}\n")
    with pytest.raises(ConfigError, match=r"server.tenants: needs server.api_keys"):
        load_config(path, env={})


def test_the_key_ring_refuses_what_the_loader_refuses() -> None:
    """A ``ServerConfig`` built in code, not loaded, is checked when its keys are."""
    keys = [ApiKeyConfig(name="a", hash=hash_key("a")), ApiKeyConfig(name="b", hash=hash_key("b"))]
    with pytest.raises(ValueError, match=r"server\.tenants\.t2\.keys\[0\]: key 'a' is already listed"):
        KeyRing(keys, tenants={"t1": TenantConfig(keys=["a"]), "t2": TenantConfig(keys=["a", "b"])})
