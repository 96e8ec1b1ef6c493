"""`switchyard vllm-command`: generation, --json, --check / --check-file, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from switchyard.cli import main
from switchyard.serving import PROFILES, RULES, check_command

BAD = "vllm serve nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4 --mamba-ssm-cache-dtype float16"


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_printed_output_is_a_checkable_command(profile: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--profile", profile]) == 0
    out = capsys.readouterr().out
    # The whole output (command plus '#' reason lines) parses as one command and passes.
    report = check_command(out, PROFILES[profile].gpu)
    assert report.findings == []
    assert "0 errors, 0 warnings" in out
    # Every flag of the command has its reason line.
    for name in report.command.options:
        assert f"#   --{name}" in out


def test_probe_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--profile", "h200", "--probe", "--probe-layers", "10,52", "--port", "9001"]) == 0
    out = capsys.readouterr().out
    report = check_command(out, "h200")
    assert report.ok and not report.warnings
    cmd = report.command
    assert cmd.int_value("port") == 9001
    hf = cmd.json("speculative-config")["draft_model_config"]["hf_config"]
    assert hf["eagle_aux_hidden_state_layer_ids"] == [10, 52]
    assert "hidden-state probe instance" in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--profile", "8xh100", "--context", "131072", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["argv"][:3] == ["vllm", "serve", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16"]
    assert data["argv"][data["argv"].index("--max-model-len") + 1] == "131072"
    assert data["gpu_count"] == 8
    assert data["check"]["ok"] is True and data["check"]["findings"] == []
    assert all(f["reason"] for f in data["flags"])


def test_one_line_and_long_context(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--profile", "h100", "--context", "1048576", "--one-line"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "vllm serve" in x and not x.startswith("#"))
    assert line.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ")
    assert "\\" not in line


def test_check_reports_errors_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--check", BAD, "--gpu", "h100"]) == 1
    out = capsys.readouterr().out
    assert "error   fp16-mamba-state-without-stochastic-rounding" in out
    assert "error   mamba-backend-missing" in out
    assert "fix: Add --enable-mamba-cache-stochastic-rounding" in out
    assert "4 error(s)" in out


def test_check_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--check", BAD, "--profile", "dgx-spark", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["gpu"] == "gb10"
    assert "fp16-mamba-state-without-stochastic-rounding" in {f["rule"] for f in data["findings"]}


def test_check_file_and_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--profile", "a100"]) == 0
    good = capsys.readouterr().out
    path = tmp_path / "serve.sh"
    path.write_text(good.replace("--max-model-len 262144", ""), encoding="utf-8")
    # A warning only: passes, but not with --strict.
    assert main(["vllm-command", "--check-file", str(path), "--gpu", "a100"]) == 0
    assert "warning max-model-len-missing" in capsys.readouterr().out
    assert main(["vllm-command", "--check-file", str(path), "--gpu", "a100", "--strict"]) == 1
    capsys.readouterr()
    assert main(["vllm-command", "--check-file", str(tmp_path / "missing.sh")]) == 2


def test_check_file_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(BAD))
    assert main(["vllm-command", "--check-file", "-", "--gpu", "b200", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["gpu"] == "b200"


def test_gpu_is_asked_on_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda prompt: "gb10")
    main(["vllm-command", "--check", BAD])
    assert "on NVIDIA GB10 (DGX Spark)" in capsys.readouterr().out


def test_without_gpu_the_gpu_checks_are_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--check", BAD]) == 1  # stdin is not a terminal under pytest
    out = capsys.readouterr().out
    assert "warning gpu-unknown" in out
    assert "mamba-backend-missing" not in out


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command"]) == 2
    assert main(["vllm-command", "--profile", "h100", "--context", "0"]) == 2
    assert main(["vllm-command", "--profile", "h100", "--gpu-memory-utilization", "1.5"]) == 2
    assert "error:" in capsys.readouterr().err


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--list"]) == 0
    out = capsys.readouterr().out
    for rule in RULES:
        assert rule.id in out
    assert main(["vllm-command", "--list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["rules"]) == len(RULES)
