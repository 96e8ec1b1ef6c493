"""``switchyard validate``: exit status and what it prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from switchyard.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "router.yaml"

BROKEN = """\
llm_clients:
  local: {format: openai_chat, base_url: http://127.0.0.1:9000/v1}
targets:
  efficient: {client: local, model: fake-efficient}
  capable: {client: local, model: fake-capable}
routes:
  mix: {type: random, targets: [efficient, ghost], weights: [1, 1], seed: 7}
"""


def test_valid_file_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"OK: {EXAMPLE}")
    assert "3 route(s): fast (passthrough), mix (random), resilient (random)" in out
    assert err == ""


def test_broken_file_names_the_bad_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(BROKEN)
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"error: invalid config {path}:",
        f"  {path}:7: routes.mix.targets[1]: unknown target 'ghost'; defined: efficient, capable",
    ]


def test_warnings_pass_unless_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(
        EXAMPLE.read_text().replace(
            "base_url: http://127.0.0.1:9000/v1}", "base_url: http://h/v1, api_key_env: SY_UNSET_KEY_FOR_TEST}"
        )
    )
    assert main(["validate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("OK:") and "warning: environment variable SY_UNSET_KEY_FOR_TEST is not set" in err
    assert main(["validate", "--strict", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "error: 1 warning(s) with --strict" in err


def test_missing_file_and_yaml_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 1
    assert "config file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("routes:\n  r: {type: [\n")
    assert main(["validate", str(bad)]) == 1
    assert f"{bad}:3: invalid YAML" in capsys.readouterr().err


def test_console_script_exit_codes(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "switchyard"
    if not script.exists():
        pytest.skip("the switchyard console script is not installed next to this interpreter")
    path = tmp_path / "router.yaml"
    path.write_text(BROKEN)
    bad = subprocess.run([str(script), "validate", str(path)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert "routes.mix.targets[1]: unknown target 'ghost'" in bad.stderr
    assert "Traceback" not in bad.stderr
    good = subprocess.run([str(script), "validate", str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("OK:")


def test_help_teaches_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["validate", "--help"])
    assert exit_.value.code == 0
    assert "routes.mix.targets[1]: unknown target 'ghost'" in capsys.readouterr().out
