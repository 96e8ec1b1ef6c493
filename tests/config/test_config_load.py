"""Loading configs: every error names the YAML path (and line), never a traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from switchyard.config import ConfigError, load_config
from switchyard.config.build import build_engine

GOOD = """\
llm_clients:
  local: {format: openai_chat, base_url: http://127.0.0.1:9000/v1}
targets:
  efficient:
    client: local
    model: fake-efficient
    price: {input_per_mtok: 0.1, output_per_mtok: 0.4}
    extra_body: {chat_template_kwargs: {enable_thinking: false}}
  capable: {client: local, model: fake-capable, price: {input_per_mtok: 15, output_per_mtok: 75}}
  broken: {client: local, model: fail-500}
routes:
  fast: {type: passthrough, target: efficient}
  mix: {type: random, targets: [efficient, capable], weights: [1, 1], seed: 7}
  resilient: {type: random, targets: [broken, capable], weights: [1, 0]}
"""


def write(tmp_path: Path, text: str, name: str = "router.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[str]:
    """The rendered issues of a config that must fail, without the file name."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path, env=env or {})
    lines = str(err.value).splitlines()
    assert all(line.startswith(str(path)) for line in lines)
    return [line[len(str(path)) :] for line in lines]


def test_issue_config_validates(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path, GOOD), env={})
    assert list(loaded.routes) == ["fast", "mix", "resilient"]
    assert loaded.config.targets["efficient"].extra_body == {"chat_template_kwargs": {"enable_thinking": False}}
    assert loaded.warnings == []
    assert loaded.base_dir == tmp_path.resolve()


def test_unknown_target_reference_names_path_and_line(tmp_path: Path) -> None:
    text = GOOD.replace(
        "targets: [efficient, capable], weights: [1, 1]", "targets: [efficient, ghost], weights: [1, 1]"
    )
    assert problems(tmp_path, text) == [
        ":13: routes.mix.targets[1]: unknown target 'ghost'; defined: efficient, capable, broken"
    ]


def test_unknown_reference_suggests_a_close_name(tmp_path: Path) -> None:
    text = GOOD.replace("target: efficient}", "target: eficient}")
    assert problems(tmp_path, text) == [
        ":12: routes.fast.target: unknown target 'eficient' (did you mean 'efficient'?)"
    ]


def test_unknown_client_reference(tmp_path: Path) -> None:
    text = GOOD.replace("capable: {client: local", "capable: {client: remote")
    assert problems(tmp_path, text) == [":9: targets.capable.client: unknown client 'remote'; defined: local"]


def test_unknown_fallback_target(tmp_path: Path) -> None:
    text = GOOD.replace("target: efficient}", "target: efficient, fallbacks: [capable, phantom]}")
    assert problems(tmp_path, text) == [
        ":12: routes.fast.fallbacks[1]: unknown target 'phantom'; defined: efficient, capable, broken"
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("llm_clients:", "llm_client:", ":1: llm_client: unknown key (did you mean 'llm_clients'?)"),
        (
            "model: fake-efficient",
            "modle: fake-efficient",
            ":6: targets.efficient.modle: unknown key (did you mean 'model'?)",
        ),
        (
            "price: {input_per_mtok: 0.1,",
            "price: {input_per_mtoken: 0.1,",
            ":7: targets.efficient.price.input_per_mtoken: unknown key (did you mean 'input_per_mtok'?)",
        ),
        (
            "{type: passthrough, target: efficient}",
            "{type: passthrough, taget: efficient}",
            ":12: routes.fast.taget: unknown key (did you mean 'target'?)",
        ),
        (
            "base_url: http://127.0.0.1:9000/v1}",
            "base_url: http://127.0.0.1:9000/v1, zzz: 1}",
            ":2: llm_clients.local.zzz: unknown key; allowed here: api_key_env, base_url, ",
        ),
    ],
)
def test_unknown_keys(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in GOOD
    found = problems(tmp_path, GOOD.replace(old, new, 1))
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "{format: openai_chat, base_url: http://127.0.0.1:9000/v1}",
            "{format: openai_chat}",
            ":2: llm_clients.local.base_url: required key is missing",
        ),
        (
            "{client: local, model: fake-capable,",
            "{model: fake-capable,",
            ":9: targets.capable.client: required key is missing",
        ),
        (
            "{type: passthrough, target: efficient}",
            "{type: passthrough}",
            ":12: routes.fast.target: required key is missing",
        ),
        (
            "{type: passthrough, target: efficient}",
            "{target: efficient}",
            ":12: routes.fast.type: required key is missing; one of: advisor, cascade, decision_model, knn, "
            "llm_classifier, passthrough",
        ),
    ],
)
def test_missing_required_keys(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in GOOD
    found = problems(tmp_path, GOOD.replace(old, new, 1))
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ("[1]", "routes.mix.weights: has 1 entries but targets has 2"),
        ("[1, -2]", "routes.mix.weights: weights must be finite and >= 0"),
        ("[0, 0]", "routes.mix.weights: at least one weight must be > 0"),
        ("[1, .inf]", "routes.mix.weights: weights must be finite and >= 0"),
        ("[1, heavy]", "routes.mix.weights[1]: Input should be a valid number"),
    ],
)
def test_bad_weights(tmp_path: Path, weights: str, message: str) -> None:
    found = problems(tmp_path, GOOD.replace("weights: [1, 1]", f"weights: {weights}"))
    assert len(found) == 1 and found[0].startswith(":13: " + message), found


def test_unknown_route_type(tmp_path: Path) -> None:
    assert problems(tmp_path, GOOD.replace("type: passthrough", "type: passthru")) == [
        ":12: routes.fast.type: unknown route type 'passthru' (did you mean 'passthrough'?)"
    ]
    (only,) = problems(tmp_path, GOOD.replace("type: passthrough", "type: oracle"))
    assert only.startswith(":12: routes.fast.type: unknown route type 'oracle'; known types: ")
    assert "passthrough" in only and "random" in only


def test_route_that_is_not_a_mapping_is_reported_once(tmp_path: Path) -> None:
    assert problems(tmp_path, GOOD + "  odd: 5\n") == [":15: routes.odd: a route must be a mapping with a 'type'"]


def test_many_problems_at_once_sorted_by_line(tmp_path: Path) -> None:
    text = (
        GOOD.replace("capable: {client: local", "capable: {client: remote")
        .replace("model: fake-efficient", "modle: fake-efficient")
        .replace("type: passthrough", "type: passthru")
    )
    found = problems(tmp_path, text)
    # The misspelt key is also a missing one (line 4, where the target starts).
    assert [p.split(":")[1] for p in found] == ["4", "6", "9", "12"]


def test_env_interpolation(tmp_path: Path) -> None:
    text = """\
    llm_clients:
      local: {base_url: "http://${HOST}:${PORT:-9000}/v1", headers: {x-cost: "$$5", x-team: "${TEAM:-}"}}
    """
    loaded = load_config(write(tmp_path, text), env={"HOST": "127.0.0.1"})
    client = loaded.config.llm_clients["local"]
    assert client.base_url == "http://127.0.0.1:9000/v1"
    assert client.headers == {"x-cost": "$5", "x-team": ""}
    loaded = load_config(write(tmp_path, text), env={"HOST": "10.0.0.1", "PORT": "81", "TEAM": "a"})
    assert loaded.config.llm_clients["local"].base_url == "http://10.0.0.1:81/v1"


def test_missing_env_var_names_path_line_and_fix(tmp_path: Path) -> None:
    text = """\
    llm_clients:
      local:
        base_url: "${UPSTREAM_URL}"
    """
    found = problems(tmp_path, text)
    assert found[0] == (
        ":3: llm_clients.local.base_url: environment variable UPSTREAM_URL is not set "
        "(use ${UPSTREAM_URL:-default} for a default)"
    )


def test_env_is_os_environ_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SY_TEST_URL", "http://127.0.0.1:1/v1")
    loaded = load_config(write(tmp_path, "llm_clients:\n  l: {base_url: '${SY_TEST_URL}'}\n"))
    assert loaded.config.llm_clients["l"].base_url == "http://127.0.0.1:1/v1"


def test_yaml_syntax_error_has_a_line(tmp_path: Path) -> None:
    (only,) = problems(tmp_path, "routes:\n  fast: {type: passthrough\n  mix: 1\n")
    assert only.startswith(":3: invalid YAML: ")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    assert problems(tmp_path, text) == [":1: the config must be a mapping at the top level"]


def test_empty_file_is_valid_but_warns(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path, ""), env={})
    assert loaded.routes == {}
    assert [w.path for w in loaded.warnings] == ["routes"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("default_route: nowhere\n", ":15: default_route: unknown route 'nowhere'"),
        ("state: {backend: redis}\n", ":15: state.url: required when state.backend is 'redis'"),
        ("state: {backend: redis, url: 'http://x'}\n", ":15: state.url: must start with redis://"),
        ("accounting: {baseline: {nowhere: capable}}\n", ":15: accounting.baseline.nowhere: unknown route"),
        ("state: {backend: sqlite}\n", ":15: state.backend: Input should be 'memory' or 'redis'"),
        (
            f"server: {{api_keys: [{{name: k, hash: 'sha256:{'0' * 64}', routes: [fast, fsat]}}]}}\n",
            ":15: server.api_keys[0].routes[1]: unknown route 'fsat' (did you mean 'fast'?)",
        ),
    ],
)
def test_other_sections(tmp_path: Path, extra: str, expected: str) -> None:
    found = problems(tmp_path, GOOD + extra)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_name_checks_run_when_another_section_fails_the_schema(tmp_path: Path) -> None:
    # One run names every problem: the schema error in `server:` and the misspelled route names
    # in three other sections (before, the names were checked only once the schema passed).
    extra = (
        "default_route: fsat\n"
        "accounting: {baseline: {mxi: capable}}\n"
        f"server: {{port: nope, api_keys: [{{name: k, hash: 'sha256:{'0' * 64}', routes: [fsat]}}]}}\n"
    )
    found = problems(tmp_path, GOOD + extra)
    assert any("server.port" in f for f in found), found
    assert any("default_route: unknown route 'fsat' (did you mean 'fast'?)" in f for f in found), found
    assert any("accounting.baseline.mxi: unknown route 'mxi' (did you mean 'mix'?)" in f for f in found), found
    assert any("server.api_keys[0].routes[0]: unknown route 'fsat'" in f for f in found), found


@pytest.mark.parametrize(
    ("client", "expected"),
    [
        ("{base_url: 127.0.0.1:9000}", "llm_clients.local.base_url: must be an absolute http(s) URL"),
        ("{base_url: 'http://h/v1', headers: {Authorization: x}}", "carries a secret: set api_key_env instead"),
        ("{base_url: 'http://h/v1', format: grpc}", "llm_clients.local.format: Input should be"),
        (
            "{base_url: 'http://h/v1', timeout: {read: -1}}",
            "llm_clients.local.timeout.read: Input should be greater than 0",
        ),
    ],
)
def test_client_values(tmp_path: Path, client: str, expected: str) -> None:
    (only,) = problems(tmp_path, f"llm_clients:\n  local: {client}\n")
    assert expected in only


def test_dict_source_reports_paths_without_lines() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"routes": {"r": {"type": "passthrough", "target": "nope"}}}, env={})
    assert str(err.value) == "<config>: routes.r.target: unknown target 'nope'; no targets are defined"


def test_unset_api_key_is_a_warning_at_load_and_an_error_at_build(tmp_path: Path) -> None:
    text = GOOD.replace(
        "base_url: http://127.0.0.1:9000/v1}", "base_url: http://127.0.0.1:9000/v1, api_key_env: SY_KEY}"
    )
    loaded = load_config(write(tmp_path, text), env={})
    (warning,) = loaded.warnings
    assert warning.severity == "warning" and warning.path == "llm_clients.local.api_key_env"
    with pytest.raises(ConfigError, match="environment variable SY_KEY is not set"):
        build_engine(loaded, env={})
    engine = build_engine(loaded, env={"SY_KEY": "secret"}, backend_factory=_recording_factory)
    assert _seen_keys == ["secret"]
    assert set(engine.routes) == {"fast", "mix", "resilient"}


_seen_keys: list[str | None] = []


def _recording_factory(name: str, cfg: Any, key: str | None) -> Any:
    _seen_keys.append(key)

    class _Backend:
        async def aclose(self) -> None:
            return None

    return _Backend()
