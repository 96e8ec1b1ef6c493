"""Every command's ``--help`` teaches: what it does, an example, and where the docs are."""

from __future__ import annotations

import re

import pytest

from switchyard.cli import build_parser

COMMANDS = [
    [],
    ["serve"],
    ["validate"],
    ["route"],
    ["eval"],
    ["calibrate"],
    ["replay"],
    ["stats"],
    ["train-probe"],
    ["train-trajectory"],
    ["demo"],
    ["vllm-command"],
    ["fake-upstream"],
    ["config"],
    ["config", "schema"],
    ["config", "import"],
    ["keys"],
]


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a) or "switchyard")
def test_help_has_an_example_and_a_docs_pointer(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(argv, capsys)
    assert "switchyard " in text and re.search(r"Example|Start here|Use it", text)
    assert re.search(r"docs/[a-z-]+\.md|examples/README\.md", text), "no pointer to the docs"


def test_a_default_said_in_words_is_not_repeated(capsys: pytest.CaptureFixture[str]) -> None:
    # "--k: kNN neighbours (default: tuned)" must not grow a second "(default: None)".
    text = " ".join(_help(["train-probe"], capsys).split())
    assert "kNN neighbours (default: tuned)" in text
    assert "(default: None)" not in text
    assert not re.search(r"\(default: [^)]*\) \(default:", " ".join(_help(["route"], capsys).split()))
