"""Golden fixtures for the codecs.

Each fixture file under ``fixtures/<format>/<kind>/`` holds an input (a caller body, an upstream
body or a recorded SSE stream) and the outputs it must produce. To regenerate outputs after a
deliberate change, run ``SWITCHYARD_UPDATE_GOLDEN=1 pytest tests/wire`` and review the diff.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
UPDATE = os.environ.get("SWITCHYARD_UPDATE_GOLDEN") == "1"


def fixture_files(kind: str) -> list[Path]:
    """Fixture files of one kind, e.g. ``openai_chat/requests``."""
    return sorted((FIXTURES / kind).glob("*.json"))


def ir_dump(value: Any) -> Any:
    """A readable, unambiguous JSON form of IR models: ``None``, ``False`` and empty containers
    are left out, discriminators (``type``) and every other value are kept."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: ir_dump(v) for k, v in value.items() if v is not None and v is not False and v != [] and v != {}}
    if isinstance(value, list | tuple):
        return [ir_dump(v) for v in value]
    return value


class Golden:
    """One fixture file: read inputs, compare (or, in update mode, record) outputs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @staticmethod
    def dump(value: Any) -> Any:
        """See :func:`ir_dump`."""
        return ir_dump(value)

    def check(self, key: str, actual: Any) -> None:
        """Asserts ``actual`` equals the stored ``key`` (stores it in update mode)."""
        actual = json.loads(json.dumps(actual))  # tuples → lists, as stored
        if UPDATE:
            self.data[key] = actual
            self.path.write_text(json.dumps(self.data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            return
        assert key in self.data, f"{self.path.name} has no {key!r}; run with SWITCHYARD_UPDATE_GOLDEN=1"
        assert actual == self.data[key], f"{self.path.name}: {key} differs from the golden file"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "golden(kind): run the test once per fixture file of that kind")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("golden")
    if marker is not None and "golden" in metafunc.fixturenames:
        files = fixture_files(marker.args[0])
        assert files, f"no fixture files under {marker.args[0]}"
        metafunc.parametrize("golden", files, indirect=True, ids=[f.stem for f in files])


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """The fixture file of this test case (see the ``golden`` marker)."""
    return Golden(request.param)
