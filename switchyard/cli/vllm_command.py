"""``switchyard vllm-command``: print a validated ``vllm serve`` command for Nemotron 3.5 Lightning,
or check one you already have."""

from __future__ import annotations

import argparse
import json
import sys

from switchyard.cli._common import HelpFormatter, fail
from switchyard.serving.vllm_findings import CheckReport
from switchyard.serving.vllm_profiles import GPUS, PROBE_DIR, PROBE_LAYERS, PROFILES, ServeSpec, build_command
from switchyard.serving.vllm_rules import RULES, check_command

_EPILOG = """\
Examples:
  switchyard vllm-command --profile h100                    # single H100, max throughput
  switchyard vllm-command --profile dgx-spark --context 131072
  switchyard vllm-command --profile h200 --probe            # hidden-state probe instance (port 8001)
  switchyard vllm-command --profile 8xh100 --json           # argv, env and reasons as JSON
  switchyard vllm-command --check "vllm serve nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4 \\
      --mamba-ssm-cache-dtype float16" --gpu h100           # exits 1: fp16 state without rounding
  switchyard vllm-command --check-file serve.sh --profile dgx-spark
  switchyard vllm-command --list                            # profiles, GPUs and every check rule

Profiles: h100, h200 (NVFP4, W4A16 on Hopper), dgx-spark (NVFP4 + DSpark), a100 (NVFP4 as W4A16
through Marlin), 8xh100 (BF16, TP8 + expert parallel). Every generated command passes --check.
Check exit status: 0 no errors, 1 errors (or warnings with --strict), 2 usage error.
See docs/lightning.md for each flag, the memory budget and the probe instance.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "vllm-command",
        help="print or check a vllm serve command for Nemotron 3.5 Lightning",
        description="Print a ready `vllm serve` command for Nemotron 3.5 Lightning with a reason for every "
        "model-specific flag, or check an existing command for the mistakes that break agents or let the "
        "Mamba state drift.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--profile", choices=sorted(PROFILES), help="machine shape to generate for (or the GPU to check on)")
    p.add_argument("--context", type=int, metavar="N", help="--max-model-len (default 262144; 65536 with --probe)")
    p.add_argument("--probe", action="store_true", help="hidden-state extraction variant for the prefill probe")
    p.add_argument("--port", type=int, metavar="N", help="port to bind (default 8000; 8001 with --probe)")
    p.add_argument("--host", default="127.0.0.1", metavar="H", help="address to bind")
    p.add_argument("--gpu-memory-utilization", type=float, metavar="F", help="share of GPU memory vLLM may take")
    p.add_argument(
        "--probe-layers",
        default=",".join(map(str, PROBE_LAYERS)),
        metavar="IDS",
        help="comma-separated layer ids the probe captures (num_hidden_layers = last layer, before the norm)",
    )
    p.add_argument("--probe-dir", default=PROBE_DIR, metavar="DIR", help="where the probe writes safetensors files")
    check = p.add_mutually_exclusive_group()
    check.add_argument("--check", metavar="COMMAND", help="check this vllm serve command instead of generating one")
    check.add_argument("--check-file", metavar="FILE", help="check the command in FILE ('-' reads stdin)")
    check.add_argument("--list", action="store_true", help="list profiles, GPUs and check rules")
    p.add_argument("--gpu", choices=sorted(GPUS), help="GPU the checked command runs on (default: the profile's)")
    p.add_argument("--strict", action="store_true", help="with --check: warnings fail too")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--one-line", action="store_true", help="print the command on one line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args.json)
    if args.check is not None or args.check_file is not None:
        return _check(args)
    if not args.profile:
        return fail("pass --profile (one of: " + ", ".join(sorted(PROFILES)) + "), or --check / --check-file", 2)
    try:
        layers = tuple(int(x) for x in args.probe_layers.split(",") if x.strip())
        spec = build_command(
            args.profile,
            context=args.context,
            probe=args.probe,
            port=args.port,
            host=args.host,
            gpu_memory_utilization=args.gpu_memory_utilization,
            probe_layers=layers,
            probe_dir=args.probe_dir,
        )
    except ValueError as exc:
        return fail(str(exc), 2)
    report = check_command(spec.command(), spec.gpu)
    if args.json:
        print(json.dumps({**spec.to_dict(), "check": report.to_dict()}, indent=2))
        return 0
    print(_render(spec, report, one_line=args.one_line))
    return 0


def _render(spec: ServeSpec, report: CheckReport, *, one_line: bool) -> str:
    prof = spec.profile
    kind = "hidden-state probe instance" if spec.probe else "serving instance"
    lines = [
        f"# Nemotron 3.5 Lightning {kind}: {prof.title}",
        f"# source: {prof.source}",
        spec.command(multiline=not one_line),
        "",
        "# Why each model-specific flag is there:",
    ]
    for flag in spec.flags:
        shown = flag.name if flag.value is None or len(flag.value) > 40 else f"{flag.name} {flag.value}"
        lines.append(f"#   {shown}: {flag.reason}")
    lines.extend(f"# {note}" for note in spec.notes)
    verdict = "passes" if report.ok and not report.warnings else "FAILS"
    lines.append(
        f"# check: {verdict} the {len(RULES)} rules of `switchyard vllm-command --check` on {spec.gpu.name}"
        f" ({len(report.errors)} errors, {len(report.warnings)} warnings)"
    )
    bind = "127.0.0.1" if spec.host in ("0.0.0.0", "::") else spec.host
    if not spec.probe:
        lines += [
            "# In router.yaml (docs/lightning.md):",
            f"#   llm_clients: {{lightning: {{format: openai_chat, base_url: http://{bind}:{spec.port}/v1}}}}",
            "#   targets: {efficient: {client: lightning, preset: nemotron-3.5-lightning}}",
        ]
    return "\n".join(lines)


def _read_command(args: argparse.Namespace) -> str | None:
    if args.check is not None:
        return str(args.check)
    path = str(args.check_file)
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        fail(f"cannot read {path}: {exc}", 2)
        return None


def _ask_gpu() -> str | None:
    """Asks for the GPU on an interactive terminal; ``None`` when declined or not interactive."""
    if not sys.stdin.isatty():
        return None
    choices = ", ".join(sorted(GPUS))
    try:
        answer = input(f"Which GPU will run this command? [{choices}, empty to skip GPU checks] ").strip().lower()
    except EOFError:
        return None
    return answer if answer in GPUS else None


def _check(args: argparse.Namespace) -> int:
    text = _read_command(args)
    if text is None:
        return 2
    gpu = args.gpu or (PROFILES[args.profile].gpu if args.profile else None)
    if gpu is None and not args.json and args.check_file != "-":
        gpu = _ask_gpu()
    report = check_command(text, gpu)
    failed = bool(report.errors) or (args.strict and bool(report.warnings))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 1 if failed else 0
    for finding in report.findings:
        print(f"{finding.severity:<7} {finding.rule}: {finding.message}")
        print(f"        fix: {finding.fix}")
    where = f"on {report.gpu.name}" if report.gpu else "GPU unknown"
    print(f"{len(report.errors)} error(s), {len(report.warnings)} warning(s) {where}; {len(RULES)} rules checked")
    return 1 if failed else 0


def _list(as_json: bool) -> int:
    if as_json:
        data = {
            "profiles": {k: {"title": p.title, "gpu": p.gpu, "checkpoint": p.checkpoint} for k, p in PROFILES.items()},
            "gpus": {k: {"name": g.name, "compute_capability": g.compute_capability} for k, g in GPUS.items()},
            "rules": [{"id": r.id, "severity": r.severity, "message": r.message, "fix": r.fix} for r in RULES],
        }
        print(json.dumps(data, indent=2))
        return 0
    print("Profiles:")
    for key, prof in PROFILES.items():
        print(f"  {key:<10} {prof.title}")
    print("GPUs (--gpu):")
    for key, gpu in GPUS.items():
        cc = ".".join(map(str, gpu.compute_capability))
        print(f"  {key:<10} {gpu.name}, compute capability {cc}, Mamba backend {gpu.recommended_mamba_backend}")
    print("Check rules:")
    for r in RULES:
        print(f"  {r.severity:<7} {r.id}: {r.message}")
    return 0
