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
    # the Anthropic codec, and no pydantic model built (validators are built on first use).
    code = (
        "import switchyard.server.app\n"
        "from switchyard.protocol.errors import ErrorInfo\n"
        "assert not ErrorInfo.__pydantic_complete__, 'a model was built at import'\n"
    )
    loaded = _modules_after(code)
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
