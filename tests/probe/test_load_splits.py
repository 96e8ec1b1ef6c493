"""``train-probe``'s splits come from one read of each dataset (issue 48 review): the training
rows (``--where``, minus ``--test-ids`` and ``--exclude``), the test slice and the report slices
are selected from the same pass, with the same rows as reading each selection separately."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from switchyard.eval.dataset import Filter
from switchyard.probe import pipeline
from switchyard.probe.pipeline import Plan, load_splits


def _dataset(path: Path, prefix: str, n: int) -> Path:
    with path.open("w") as fh:
        for i in range(n):
            item = {
                "id": f"{prefix}{i}",
                "benchmark": "a" if i % 3 else "b",
                "prompt": "" if i == 5 else f"task {prefix}{i}",  # one item without a user text
                "models": {"weak": {"correct": i % 2 == 0}, "strong": {"correct": True}},
            }
            fh.write(json.dumps(item) + "\n")
    return path


def test_every_split_comes_from_one_read_per_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[Path] = []
    real = pipeline.read_rows

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        reads.append(Path(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "read_rows", counting)
    first, second = _dataset(tmp_path / "one.jsonl", "x", 30), _dataset(tmp_path / "two.jsonl", "y", 30)
    plan = Plan(
        datasets=[first, second],
        mapping={"efficient": ("weak",), "capable": ("strong",)},
        features=None,
        out=tmp_path / "out",
        test_ids=frozenset({"x1", "x2", "y7"}),
        where=[Filter("benchmark", frozenset({"a"}))],
        exclude=[Filter("id", frozenset({"x4", "y4"}))],
        report_where=[("only b", [Filter("benchmark", frozenset({"b"}))])],
    )
    logged: list[str] = []
    train, slices = load_splits(plan, logged.append)
    assert reads == [first, second]  # once each, not once per selection
    # where keeps benchmark "a" (i % 3 != 0); then test ids and excluded ids leave training
    want = [f"{p}{i}" for p in "xy" for i in range(30) if i % 3 and i != 5]
    assert train.ids == [x for x in want if x not in {"x1", "x2", "y7", "x4", "y4"}]
    assert logged == ["skipped 2 items without a user message"]  # x5 and y5 pass where, no text
    assert slices["test"].ids == ["x1", "x2", "y7"]
    assert slices["only b"].ids == [f"{p}{i}" for p in "xy" for i in range(0, 30, 3)]
    assert list(slices) == ["test", "only b"]
    assert train.quality["efficient"].tolist() == [float(int(x[1:]) % 2 == 0) for x in train.ids]
