"""DESIGN.md's layers, enforced by import-linter's contracts (declared in pyproject.toml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (dev extra)")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def test_declared_layers_match_the_design() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    # DESIGN.md's order must hold; feature packages (eval, serving, …) may slot in between.
    design = [
        "switchyard.cli",
        "switchyard.server",
        "switchyard.transport",
        "switchyard.api",
        "switchyard.config",
        "switchyard.engine",
        "switchyard.routers",
        "switchyard.wire",
        "switchyard.protocol",
    ]
    position = {module.strip(): i for i, layer in enumerate(layers) for module in layer.split("|")}
    assert [position[m] for m in design] == sorted(position[m] for m in design)
    assert position["switchyard.server"] == position["switchyard.dropin"]
    assert position["switchyard.routers"] == position["switchyard.clients"] == position["switchyard.state"]
    forbidden = {c["name"]: set(c["forbidden_modules"]) for c in config["contracts"] if c["type"] == "forbidden"}
    assert {"httpx", "httpx2"} <= forbidden["The IR and the codecs stay pure"]
    assert {"httpx", "httpx2"} <= forbidden["Only clients speak HTTP upstream"]


def test_the_code_keeps_every_contract() -> None:
    result = lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_layer_violation_is_caught(tmp_path: Path) -> None:
    # A copy of the package in which the IR imports the engine and a router speaks HTTP.
    shutil.copytree(REPO / "switchyard", tmp_path / "switchyard", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "switchyard" / "protocol" / "targets.py").open("a") as fh:
        fh.write("\nimport switchyard.engine.core  # noqa\n")
    with (tmp_path / "switchyard" / "routers" / "static.py").open("a") as fh:
        fh.write("\nimport httpx  # noqa\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "Layers of DESIGN.md BROKEN" in result.stdout
    assert "The IR and the codecs stay pure BROKEN" in result.stdout
    assert "switchyard.protocol.targets -> switchyard.engine.core" in result.stdout
