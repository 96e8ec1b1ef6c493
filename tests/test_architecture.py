"""DESIGN.md's layers, enforced by import-linter's contracts (declared in pyproject.toml)."""

from __future__ import annotations

import ast
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
    with (tmp_path / "switchyard" / "clients" / "h1_response.py").open("a") as fh:
        fh.write("\nimport switchyard.clients.h1  # noqa\n")  # h1 imports h1_response
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "Layers of DESIGN.md BROKEN" in result.stdout
    assert "The IR and the codecs stay pure BROKEN" in result.stdout
    assert "switchyard.protocol.targets -> switchyard.engine.core" in result.stdout
    assert "No import circles BROKEN" in result.stdout
    assert ".h1_response -> .h1" in result.stdout


# The engine's stages hand each other public types (engine/handoff.py): nothing may join this list.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def private_imports(root: Path) -> set[tuple[str, str]]:
    """``(importer, module.name)`` for every ``from module import _name`` inside the package at
    ``root / "switchyard"`` that takes another module's private name (a submodule such as
    ``switchyard._dataclass`` is a module, not a name)."""
    modules = {}
    for path in (root / "switchyard").rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if package else parts)] = (path, package)
    found = set()
    for name, (path, package) in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = name.split(".") if package else name.split(".")[:-1]
            source = ".".join([*base[: len(base) - node.level + 1], node.module or ""]) if node.level else node.module
            source = (source or "").strip(".")
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and source in modules and source != name and f"{source}.{alias.name}" not in modules:
                    found.add((name, f"{source}.{alias.name}"))
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    assert private_imports(REPO) == KNOWN_PRIVATE_IMPORTS


def test_a_private_import_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "switchyard"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_inner.py").write_text("VALUE = 1\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("_hidden = 1\nvisible = 2\n")
    (package / "sub" / "b.py").write_text(
        "from switchyard import _inner\nfrom switchyard.sub.a import visible\n"
        "def f():\n    from .a import _hidden\n    from . import a\n"
    )
    assert private_imports(tmp_path) == {("switchyard.sub.b", "switchyard.sub.a._hidden")}


def _is_typing_protocol(base: ast.expr, aliases: set[str]) -> bool:
    """Whether a class base is ``typing.Protocol`` (``Protocol[T]`` too), not ``asyncio.Protocol``."""
    if isinstance(base, ast.Subscript):
        base = base.value
    if isinstance(base, ast.Name):
        return base.id in aliases
    return ast.unparse(base) in ("typing.Protocol", "typing_extensions.Protocol")


def protocol_private_members(root: Path) -> set[tuple[str, str]]:
    """``(module, Class.member)`` for every private member (``_name``, not a dunder) that a
    ``typing.Protocol`` inside the package at ``root / "switchyard"`` declares. A protocol
    describes an object of another module; naming its private members is how one module would
    reach into another's internals without importing a private name (the check above)."""
    found = set()
    for path in (root / "switchyard").rglob("*.py"):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        aliases = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module in ("typing", "typing_extensions")
            for alias in node.names
            if alias.name == "Protocol"
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or not any(_is_typing_protocol(b, aliases) for b in node.bases):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names = [item.name]
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names = [item.target.id]
                elif isinstance(item, ast.Assign):
                    names = [t.id for t in item.targets if isinstance(t, ast.Name)]
                else:
                    names = []
                found |= {(module, f"{node.name}.{n}") for n in names if n.startswith("_") and not n.endswith("__")}
    return found


def test_no_protocol_declares_private_members() -> None:
    assert protocol_private_members(REPO) == set()


def test_a_protocol_with_private_members_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "switchyard"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "import asyncio\nimport typing\nfrom typing import Protocol as P\n"
        "class Reads(P):\n    url: str\n    _errors: tuple\n    @property\n    def _client(self): ...\n"
        "    def __call__(self): ...\n"
        "class Typed(typing.Protocol):\n    async def _send(self): ...\n"
        "class Wire(asyncio.Protocol):\n    def _broken(self): ...\n"  # an asyncio protocol is a class of its own
    )
    assert protocol_private_members(tmp_path) == {
        ("switchyard.a", "Reads._errors"),
        ("switchyard.a", "Reads._client"),
        ("switchyard.a", "Typed._send"),
    }
