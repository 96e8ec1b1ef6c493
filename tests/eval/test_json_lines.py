"""One JSON-lines reader for every eval input: a bad line is named by file and line alike, blank
lines are skipped, and a limit stops before the line after the last item asked for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from switchyard.eval.dataset import Dataset, DatasetError, json_lines
from switchyard.eval.paired import PairedError, TierMap, read_session_tasks, runs_from_log
from switchyard.eval.replay import read_trajectories

TRAJECTORY = '{"id": "t1", "messages": [{"role": "user", "content": "hi"}]}'
SESSION = '{"session_id": "s1", "task_id": "k1"}'
RECORD = '{"route": "agent", "session_id": "s1", "selected": "big", "tier": "capable"}'
ITEM = '{"id": "a", "prompt": "ok", "models": {}}'


def _file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_the_reader_skips_blank_lines_and_numbers_the_rest_by_file_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "1", "", "  ", '{"a": 2}')
    assert list(json_lines(path)) == [("in.jsonl:1", 1, 1), ("in.jsonl:4", 4, {"a": 2})]
    with pytest.raises(PairedError, match=r"^in\.jsonl:2: not valid JSON \("):
        list(json_lines(_file(tmp_path, "1", "{nope"), PairedError))


@pytest.mark.parametrize(
    ("good", "read", "error"),
    [
        (ITEM, lambda p: list(Dataset(p)), DatasetError),
        (TRAJECTORY, lambda p: list(read_trajectories(p)), DatasetError),
        (SESSION, read_session_tasks, PairedError),
        (RECORD, lambda p: runs_from_log(p, "agent", TierMap("big", "small"), {}), DatasetError),
    ],
)
def test_every_input_names_a_line_that_is_not_json_by_file_and_line(
    tmp_path: Path, good: str, read: Callable[[Path], object], error: type[Exception]
) -> None:
    path = _file(tmp_path, good, "", "{not json")
    with pytest.raises(error, match=r"^in\.jsonl:3: not valid JSON \("):
        read(path)


def test_a_limit_reads_no_further_than_the_last_item_asked_for(tmp_path: Path) -> None:
    assert [t.id for t in read_trajectories(_file(tmp_path, TRAJECTORY, "{not json"), limit=1)] == ["t1"]
    assert [i.id for i in Dataset(_file(tmp_path, ITEM, "{not json"), limit=1)] == ["a"]
    assert list(read_trajectories(_file(tmp_path, "{not json"), limit=0)) == []
