"""Where NVIDIA's nemo-switchyard 0.3.0 lives for the differential and import tests.

Its import package is also called ``switchyard``, so it has a virtual environment of its own:
``$SWITCHYARD_NEMO_PYTHON``, else ``.nemo-venv/`` (``make test`` creates it with ``make
nemo-venv``), else ``/tmp/nemo-venv`` (where the benchmarks create it). Tests that need it skip
without it locally and fail under ``CI=true``, where ``make test`` has installed it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def nemo_python() -> str | None:
    """The NVIDIA venv's python, or ``None``."""
    for candidate in (
        os.environ.get("SWITCHYARD_NEMO_PYTHON"),
        ROOT / ".nemo-venv/bin/python",
        "/tmp/nemo-venv/bin/python",
    ):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


def require_nemo() -> str:
    """The NVIDIA venv's python; skips without it (fails under ``CI=true``)."""
    found = nemo_python()
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("NVIDIA's nemo-switchyard venv is missing in CI: run `make nemo-venv`")
        pytest.skip("nemo-switchyard 0.3.0 venv not found (make nemo-venv creates .nemo-venv)")
    return found
