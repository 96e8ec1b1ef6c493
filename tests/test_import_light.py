"""``import switchyard`` stays light: no heavy or optional dependency is imported."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = [
    "torch",
    "sklearn",
    "transformers",
    "litellm",
    "openai",
    "anthropic",
    "redis",
    "prometheus_client",
    "numpy",
    "httpx2",
    "uvicorn",
    "uvloop",
]

_PROBE = """
import json, sys
before = set(sys.modules)
{code}
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def imported_by(code: str) -> set[str]:
    """Top-level packages newly imported by ``code`` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(out)}


def test_import_switchyard_is_light() -> None:
    loaded = imported_by("import switchyard")
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
    # The top-level package is lazy: not even the engine, pydantic or the HTTP client load.
    assert not loaded & {"httpx", "pydantic", "yaml"}, sorted(loaded)


def test_building_a_router_stays_free_of_sdks_and_servers() -> None:
    code = (
        "import switchyard\n"
        "sy = switchyard.Switchyard.from_config({'llm_clients': {'l': {'base_url': 'http://127.0.0.1:1/v1'}},"
        " 'targets': {'t': {'client': 'l', 'model': 'm'}}, 'routes': {'r': {'type': 'passthrough', 'target': 't'}}})"
    )
    loaded = imported_by(code)
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return set(json.loads(out))


def test_the_server_app_leaves_unused_parts_unloaded() -> None:
    # What a proxy serving Chat needs no part of (docs/benchmarks.md, issue 24): the OpenAPI
    # document, plugin discovery (importlib.metadata, the email package under it),
    # the Anthropic codec.
    loaded = _modules_after("import switchyard.server.app")
    unwanted = {
        "switchyard.server.openapi",
        "importlib.metadata",
        "email.utils",
        "switchyard.wire.anthropic_messages.stream",
        "switchyard.wire.anthropic_messages.request",
    }
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_the_app_names_the_openapi_path_of_the_document() -> None:
    from switchyard.server import app, openapi

    assert app.OPENAPI_PATH == openapi.OPENAPI_PATH


def test_the_server_app_leaves_the_engine_and_the_config_loader_to_the_build() -> None:
    # Issue 24's import row: importing the proxy's ASGI app loads the server's own parts; pydantic
    # (with the config schema), the config loader (and yaml), the engine builder, the engine, the
    # HTTP backends and the dashboard (off by default) load when a router is built.
    loaded = _modules_after("import switchyard.server.app")
    unwanted = {
        "pydantic",
        "pydantic_core",
        "httpx",
        "yaml",
        "switchyard.config.load",
        "switchyard.config.build",
        "switchyard.config.verify_build",
        "switchyard.engine.core",
        "switchyard.engine.health",
        "switchyard.clients.backend",
        "switchyard.clients.retry",
        "switchyard.routers.base",
        "switchyard.protocol.stream",
        "switchyard.wire.openai_chat",
        "switchyard.server.dashboard.fleet",
        "switchyard.server.dashboard.views",
        "importlib.resources",
    }
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_the_package_re_exports_still_resolve() -> None:
    # The package __init__s load their names on first use; each still resolves.
    import importlib

    for package in ("engine", "config", "clients", "routers", "protocol", "server.dashboard"):
        module = importlib.import_module(f"switchyard.{package}")
        for name in getattr(module, "__all__", None) or module._LAZY:
            assert getattr(module, name) is not None, (package, name)


def test_the_command_line_imports_only_the_command_it_runs() -> None:
    # `switchyard serve` registers only serve's parser: not the fake upstreams, the vLLM rules
    # or the offline tooling of the other commands.
    code = "from switchyard.cli import _commands_for, build_parser\nbuild_parser(_commands_for(['serve', '-c', 'x']))"
    loaded = _modules_after(code)
    unwanted = {"switchyard.testing", "switchyard.serving", "switchyard.cli.replay", "switchyard.cli.eval"}
    assert "switchyard.cli.serve" in loaded
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_every_command_name_maps_to_the_module_that_registers_it() -> None:
    import argparse

    from switchyard.cli import _MODULE_OF, build_parser

    def names(parser: argparse.ArgumentParser) -> set[str]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return set(sub.choices)

    assert names(build_parser()) == set(_MODULE_OF)
    for name, module in _MODULE_OF.items():
        assert name in names(build_parser((module,))), (name, module)
