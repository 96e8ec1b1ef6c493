"""Fixtures of the conformance-checklist tests (items of ``wire-formats.md``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from checklist_support import Stack, running


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """Fake upstream + proxy + SDK clients, shared by one test module."""
    with running() as s:
        yield s
