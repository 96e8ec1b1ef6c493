"""The JSONL dataset reader: shapes, filters and errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_helpers import write_jsonl

from switchyard.eval.dataset import Dataset, DatasetError, outcome, parse_filters, read_ids

ROWS = [
    {"id": "a", "prompt": "2+2?", "benchmark": "math", "models": {"big": {"correct": True, "cost_usd": 0.5}}},
    {
        "id": "b",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "benchmark": "chat",
        "models": {"big": {"score": 7.5, "input_tokens": 10, "output_tokens": 20}},
    },
    {"id": "c", "prompt": "x", "benchmark": "math", "flag": True, "models": {"big": {"resolved": False}}},
]


def test_reads_prompt_messages_and_outcomes(tmp_path: Path) -> None:
    ds = Dataset(write_jsonl(tmp_path / "d.jsonl", ROWS))
    items = list(ds)
    assert [i.id for i in items] == ["a", "b", "c"]
    assert items[0].messages == [{"role": "user", "content": "2+2?"}]
    assert items[1].messages is not None and items[1].messages[0]["role"] == "system"
    assert items[0].fields["benchmark"] == "math"
    assert outcome(items[0], "big").quality == 1.0
    assert outcome(items[0], "big").cost_usd == 0.5
    b = outcome(items[1], "big")
    assert (b.quality, b.input_tokens, b.output_tokens, b.cost_usd) == (7.5, 10, 20, None)
    assert outcome(items[2], "big").quality == 0.0  # "resolved" is a synonym of "correct"
    assert ds.count() == 3


def test_filters_ids_and_limit(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    assert [i.id for i in Dataset(path, filters=parse_filters(["benchmark=math"]))] == ["a", "c"]
    both = parse_filters(["benchmark=math", "benchmark=chat", "flag=true"])
    assert [i.id for i in Dataset(path, filters=both)] == ["c"]
    (tmp_path / "ids.txt").write_text("# test split\nb\n\nc\n")
    ids = read_ids(tmp_path / "ids.txt")
    assert [i.id for i in Dataset(path, ids=ids)] == ["b", "c"]
    assert [i.id for i in Dataset(path, limit=2)] == ["a", "b"]
    assert Dataset(path, filters=parse_filters(["benchmark=chat"])).count() == 1
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_filters(["benchmark"])


def test_missing_model_names_it_and_lists_the_available_ones(tmp_path: Path) -> None:
    item = next(iter(Dataset(write_jsonl(tmp_path / "d.jsonl", ROWS))))
    with pytest.raises(DatasetError) as err:
        outcome(item, "gpt-9", source="d.jsonl", target="capable")
    msg = str(err.value)
    assert "d.jsonl:1" in msg and "'gpt-9'" in msg and "target 'capable'" in msg and "models in this item: big" in msg


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "d.jsonl:2: not valid JSON"),
        ('["a"]', "d.jsonl:2: each line must be a JSON object"),
        ('{"prompt": "x", "models": {}}', "d.jsonl:2: 'id'"),
        ('{"id": "z", "prompt": 3, "models": {}}', "d.jsonl:2: 'prompt' must be a string"),
        ('{"id": "z", "messages": [], "models": {}}', "d.jsonl:2: 'messages' must be a non-empty list"),
        ('{"id": "z", "prompt": "x", "models": []}', "d.jsonl:2: 'models' must be an object"),
        ('{"id": "a", "prompt": "x", "models": {}}', "d.jsonl:2: duplicate id 'a'"),
    ],
)
def test_malformed_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a", "prompt": "ok", "models": {}}\n' + line + "\n")
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace("[", r"\[")):
        list(Dataset(path))


@pytest.mark.parametrize(
    ("outcome_obj", "message"),
    [
        ({"score": "high"}, "score must be a finite number"),
        ({"correct": "yes"}, "correct must be true or false"),
        ({"cost_usd": 1.0}, "has no outcome"),
        ({"correct": True, "cost_usd": -1}, "cost_usd must be a number >= 0"),
        ({"correct": True, "input_tokens": 1.5}, "input_tokens must be a whole number"),
    ],
)
def test_bad_outcomes(tmp_path: Path, outcome_obj: dict[str, object], message: str) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "prompt": "x", "models": {"m": outcome_obj}}])
    item = next(iter(Dataset(path)))
    with pytest.raises(DatasetError, match=message):
        outcome(item, "m", source="d.jsonl")


def test_missing_file_and_empty_selection(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="dataset not found"):
        Dataset(tmp_path / "nope.jsonl")
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    with pytest.raises(DatasetError, match="no items after --where/--ids filters"):
        Dataset(path, filters=parse_filters(["benchmark=poetry"])).first()
