"""The differential check against NVIDIA's translation, when its wheel is already installed.

Installing ``nemo-switchyard`` needs the network, so this test never installs it: it runs with
the venv ``make test`` creates (``.nemo-venv``; see ``tests/_nemo.py``), and locally skips without
one. It asserts our side of every case (NVIDIA's results are reported
in ``docs/translation.md``, not asserted, since they change with their releases).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from _nemo import require_nemo

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "differential_translation.py"


def test_differential_corpus_runs_and_our_side_is_clean(tmp_path: Path) -> None:
    nemo = require_nemo()
    spec = importlib.util.spec_from_file_location("differential_translation", SCRIPT)
    assert spec is not None and spec.loader is not None
    module: Any = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    out = tmp_path / "diff.json"
    assert module.main(["--nemo-python", nemo, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert len(rows) >= 30
    assert {(r["caller"], r["upstream"]) for r in rows} == {(c, u) for c in module.FORMATS for u in module.FORMATS}
    for row in rows:
        ours = row["ours"]["client"]
        assert ours["status"] == 200, (row["case"], ours)
        assert not ours["violations"], (row["case"], ours["violations"])


ADVISOR_SCRIPT = SCRIPT.parent / "differential_advisor.py"


def test_advisor_differential_has_no_unexplained_difference(tmp_path: Path) -> None:
    nemo = require_nemo()
    spec = importlib.util.spec_from_file_location("differential_advisor", ADVISOR_SCRIPT)
    assert spec is not None and spec.loader is not None
    module: Any = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path / "advisor.md"
    assert module.main(["--nemo-python", nemo, "--markdown", str(out)]) == 0
    report = out.read_text()
    assert "unexplained turns: 0" in report
    # the identical turns cover every verdict path: approve, redo, unparseable, budget spent, stall
    for source in ("advisor:approve", "advisor:redo", "advisor:fail_open", "advisor:unreviewed", "advisor:no_trigger"):
        assert source in report
