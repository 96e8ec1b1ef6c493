"""`switchyard train-probe` on a tiny dataset, then the checkpoint serving in the proxy (real openai SDK).

Features come from the embeddings endpoint of a real fake feature server on 127.0.0.1, so the
whole path — extraction, cache, training, report, checkpoint, config, routing — runs for real.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

pytest.importorskip("numpy")
pytest.importorskip("torch")

from switchyard.api import Switchyard
from switchyard.cli import main
from switchyard.server.runner import ServerThread
from switchyard.testing import serve_fake
from switchyard.testing.fake_features import FakeFeatureServer

HARD = ["prove", "theorem", "integral", "eigenvalue", "derivative", "lemma", "topology", "manifold"]
EASY = ["hello", "weather", "thanks", "lunch", "coffee", "movie", "music", "garden"]


def _dataset(path: Path) -> list[str]:
    rng = random.Random(0)
    ids = []
    with path.open("w") as fh:
        for i in range(160):
            hard = i % 2 == 0
            words = rng.sample(HARD if hard else EASY, 3) + rng.sample(["the", "a", "please", "now"], 2)
            # every joint outcome occurs (the joint link needs them) and each model does better on
            # some rows (the small one on easy prompts, which the mf router learns from)
            weak_ok = (rng.random() < 0.15) if hard else (rng.random() < 0.95)
            row = {
                "id": f"toy/{i}",
                "benchmark": "toy",
                "prompt": " ".join(words),
                "models": {"small": {"correct": weak_ok}, "big": {"correct": rng.random() < (0.8 if hard else 0.85)}},
            }
            fh.write(json.dumps(row) + "\n")
            ids.append(row["id"])
    return ids


@pytest.fixture(scope="module")
def features_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    app = FakeFeatureServer(hidden_states_dir=tmp_path_factory.mktemp("hs"), embedding_dim=32)
    server = serve_fake(app)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, features_server: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("train")
    ids = _dataset(root / "toy.jsonl")
    (root / "test_ids.txt").write_text("\n".join(ids[-40:]) + "\n")
    features = {"backend": "embeddings", "base_url": f"http://127.0.0.1:{features_server.port}/v1", "model": "toy-emb"}
    args = [
        "train-probe",
        "--dataset", str(root / "toy.jsonl"),
        "--map", "efficient=small", "--map", "capable=big",
        "--features", json.dumps(features),
        "--test-ids", str(root / "test_ids.txt"),
        "--out", str(root / "probe"),
        "--cache-dir", str(root / "cache"),
        "--compare-knn", "--seed", "1",
        "--pca-dim", "16", "--hidden", "32", "--ensemble", "2", "--epochs", "30", "--lr", "0.01",
        "--json", str(root / "report.json"),
    ]  # fmt: skip
    assert main(args) == 0
    base = [a for a in args[:-8] if a != "--compare-knn"]
    for router in ("linear", "mf"):
        assert main([*base, "--router", router, "--pca-dim", "8", "--out", str(root / router)]) == 0
    return {"root": root, "features": features, "args": args}


def test_train_probe_writes_checkpoint_and_held_out_report(trained: dict[str, Any], capsys: Any) -> None:
    root = trained["root"]
    meta = json.loads((root / "probe" / "router.json").read_text())
    assert meta["kind"] == "prefill_probe" and meta["output_names"] == ["efficient", "capable"]
    assert meta["recipe"]["source"] == "embeddings" and meta["recipe"]["hidden_size"] == 32
    assert meta["training"]["n_train"] == 120 and meta["training"]["capable"] == "capable"
    # the novelty reference (train-probe writes it) and how often it fired per held-out slice
    assert meta["novelty"]["k"] == 10 and meta["novelty"]["n"] > 0 and meta["novelty"]["bound"] > 0
    assert 0.0 <= meta["training"]["novelty_fired"]["test"] <= 1.0
    test = {r["name"]: r for r in meta["training"]["report"]["test"]}
    assert set(test) == {"probe", "knn", "random", "oracle"}
    assert test["probe"]["n"] == 40 and test["random"]["apgr"] == pytest.approx(0.5)
    assert test["probe"]["apgr"] > 0.6 and test["probe"]["auc"]["efficient"] > 0.8
    assert (root / "probe" / "knn" / "router.json").exists()
    # a second run finds every vector in the cache and trains the same weights
    assert main([*trained["args"][:-8], "--out", str(root / "again"), "--seed", "1", "--pca-dim", "16", "--hidden",
                 "32", "--ensemble", "2", "--epochs", "30", "--lr", "0.01"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "features: 0 extracted" in out
    assert (root / "again" / "router.safetensors").read_bytes() == (root / "probe" / "router.safetensors").read_bytes()


def test_train_probe_linear_prints_operating_points_and_curve(trained: dict[str, Any], capsys: Any) -> None:
    root = trained["root"]
    args = [a for a in trained["args"][:-8] if a != "--compare-knn"]
    assert main([*args, "--router", "linear", "--pca-dim", "8", "--out", str(root / "linear2")]) == 0
    out = capsys.readouterr().out
    assert "operating points (thresholds picked on the training rows):" in out
    assert "target capable share 30%: threshold" in out and "curve on test" in out
    meta = json.loads((root / "linear2" / "router.json").read_text())
    assert meta["kind"] == "prefill_probe" and meta["trunk_hidden"] == [] and meta["ensemble_size"] == 1
    # two targets with 0/1 outcomes: one multinomial model of the joint outcome (--link joint)
    assert meta["probability_link"] == "joint_softmax" and set(meta["training"]["linear"]) == {"joint"}
    assert main([*args, "--router", "linear", "--link", "independent", "--pca-dim", "8",
                 "--out", str(root / "independent")]) == 0  # fmt: skip
    meta_ind = json.loads((root / "independent" / "router.json").read_text())
    assert meta_ind["probability_link"] == "independent_sigmoid"
    assert set(meta_ind["training"]["linear"]) == {"efficient", "capable"}
    points = meta["training"]["operating_points"]
    assert [p["target_share"] for p in points] == [0.2, 0.3, 0.4, 0.5]
    test_check = next(c for c in points[1]["checks"] if c["slice"] == "test" and c["group"] == "*")
    assert abs(test_check["share"] - 0.3) < 0.2  # the training threshold roughly travels to held-out rows
    linear = {r["name"]: r for r in meta["training"]["report"]["test"]}
    assert linear["linear"]["apgr"] > 0.6


def test_train_probe_mf_trains_on_pairwise_outcomes_graded_ones_too(trained: dict[str, Any], capsys: Any) -> None:
    root = trained["root"]
    meta = json.loads((root / "mf" / "router.json").read_text())
    assert meta["probability_link"] == "pairwise_sigmoid" and meta["output_names"] == ["efficient", "capable"]
    mf = {r["name"]: r for r in meta["training"]["report"]["test"]}
    assert mf["mf"]["apgr"] > 0.6
    # judge scores instead of true/false: mf uses which model scored higher; linear refuses them
    graded = root / "graded.jsonl"
    with (root / "toy.jsonl").open() as src, graded.open("w") as dst:
        for line in src:
            row = json.loads(line)
            row["models"] = {m: {"score": 9.0 if o["correct"] else 3.0} for m, o in row["models"].items()}
            dst.write(json.dumps(row) + "\n")
    args = ["train-probe", "--dataset", str(graded), "--map", "efficient=small", "--map", "capable=big"]
    args += ["--features", json.dumps(trained["features"]), "--cache-dir", str(root / "cache"), "--pca-dim", "8"]
    assert main([*args, "--router", "mf", "--out", str(root / "mf-graded")]) == 0
    assert json.loads((root / "mf-graded" / "router.json").read_text())["training"]["mf"]["comparisons"] > 50
    capsys.readouterr()
    # linear learns good-enough labels: a graded outcome needs a bar on its scale
    assert main([*args, "--router", "linear", "--out", str(root / "linear-graded")]) == 1
    assert "--good-enough *=BAR" in capsys.readouterr().err
    args += ["--test-ids", str(root / "test_ids.txt")]
    assert main([*args, "--router", "linear", "--good-enough", "*=5", "--out", str(root / "linear-graded")]) == 0
    meta = json.loads((root / "linear-graded" / "router.json").read_text())["training"]
    assert {r["name"]: r for r in meta["report"]["test"]}["linear"]["apgr"] > 0.6
    assert meta["good_enough"]["*"] == 5.0
    # the calibration artifact beside the checkpoint, tied to its weights, with its held-out ECE
    cal = json.loads((root / "linear-graded" / "calibration.json").read_text())
    assert cal["format_version"] == 1 and cal["method"] == "isotonic" and set(cal["heads"]) == {"efficient", "capable"}
    assert 0.0 <= meta["calibration"]["linear"]["ece"]["test"]["calibrated"] <= 1.0
    assert "ECE" in capsys.readouterr().out
    assert main([*args, "--router", "linear", "--good-enough", "*=5", "--calibration", "none",
                 "--out", str(root / "linear-graded")]) == 0  # fmt: skip
    assert not (root / "linear-graded" / "calibration.json").exists()  # stale artifact removed


def test_train_probe_reports_bad_input(trained: dict[str, Any], capsys: Any) -> None:
    root = trained["root"]
    assert main(["train-probe", "--dataset", str(root / "toy.jsonl"), "--map", "efficient=small",
                 "--features", '{"backend": "nope"}', "--out", str(root / "x")]) == 1  # fmt: skip
    assert "--features" in capsys.readouterr().err


@pytest.fixture(scope="module")
def proxy(trained: dict[str, Any]) -> Iterator[tuple[ServerThread, list[Any], Any]]:
    from switchyard.testing import FakeUpstream

    upstream = serve_fake(FakeUpstream())
    config = {
        "llm_clients": {"local": {"base_url": f"http://127.0.0.1:{upstream.port}/v1"}},
        "targets": {
            "efficient": {"client": "local", "model": "fake-small", "price": {"input_per_mtok": 0.1}},
            "capable": {"client": "local", "model": "fake-big", "price": {"input_per_mtok": 15}},
        },
        "routes": {
            "learned": {
                "type": "prefill_probe",
                "targets": ["efficient", "capable"],
                "checkpoint": str(trained["root"] / "probe"),
                "features": trained["features"],
                "lambda": 0.75,
            },
            "knn": {
                "type": "knn",
                "targets": ["efficient", "capable"],
                "checkpoint": str(trained["root"] / "probe" / "knn"),
                "features": trained["features"],
                "k": 5,
            },
            "joint": {
                "type": "prefill_probe",
                "targets": ["efficient", "capable"],
                "checkpoint": str(trained["root"] / "linear"),
                "features": trained["features"],
                "threshold": 0.5,
            },
            "mf": {
                "type": "prefill_probe",
                "targets": ["efficient", "capable"],
                "checkpoint": str(trained["root"] / "mf"),
                "features": trained["features"],
                "threshold": 0.5,  # P(capable does better | the two outcomes differ)
            },
            "down": {
                "type": "prefill_probe",
                "targets": ["efficient", "capable"],
                "checkpoint": str(trained["root"] / "probe"),
                "features": {**trained["features"], "base_url": "http://127.0.0.1:9/v1", "timeout_s": 2},
            },
        },
    }
    sy = Switchyard.from_config(config)
    records: list[Any] = []
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as server:
            yield server, records, upstream
    finally:
        upstream.stop()


@pytest.mark.parametrize("route", ["learned", "knn", "joint", "mf"])
def test_checkpoint_serves_in_the_proxy(proxy: tuple[ServerThread, list[Any], Any], route: str) -> None:
    server, records, _ = proxy
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
        hard = client.chat.completions.with_raw_response.create(
            model=route, messages=[{"role": "user", "content": "prove the eigenvalue theorem please"}]
        )
        easy = client.chat.completions.with_raw_response.create(
            model=route, messages=[{"role": "user", "content": "hello thanks for the coffee"}]
        )
        again = client.chat.completions.with_raw_response.create(
            model=route, messages=[{"role": "user", "content": "hello thanks for the coffee"}]
        )
    assert hard.headers["x-switchyard-selected-model"] == "capable"
    assert easy.headers["x-switchyard-selected-model"] == "efficient"
    assert hard.headers["x-switchyard-decision-source"] == ("knn" if route == "knn" else "probe")
    assert hard.parse().choices[0].message.content == "[fake-big] prove the eigenvalue theorem please"
    last = records[-3:]
    assert last[0].score is not None and last[0].score > last[1].score
    assert last[2].details["cached"] is True and last[1].details["cached"] is False
    assert again.headers["x-switchyard-selected-model"] == "efficient"


def test_feature_server_down_falls_open_to_capable(proxy: tuple[ServerThread, list[Any], Any]) -> None:
    server, records, _ = proxy
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="down", messages=[{"role": "user", "content": "hello thanks"}]
        )
    assert raw.headers["x-switchyard-selected-model"] == "capable"
    assert raw.headers["x-switchyard-decision-source"] == "fail_open"
    assert records[-1].details["error"] == "connect"
