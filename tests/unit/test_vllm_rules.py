"""The vllm-command rule table: every profile passes, every mistake is caught by its rule."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

import pytest

from switchyard.serving import GPUS, PROFILES, RULES, build_command, check_command
from switchyard.serving.vllm_profiles import CHECKPOINT_DSPARK, NATIVE_CONTEXT

SR = ("--enable-mamba-cache-stochastic-rounding", "--mamba-cache-philox-rounds")


def command(
    profile: str = "h100",
    *,
    probe: bool = False,
    drop: Iterable[str] = (),
    add: Iterable[str] = (),
    model: str | None = None,
    env: str = "",
) -> str:
    """A generated command with flags dropped (every occurrence) and words appended."""
    spec = build_command(profile, probe=probe)
    dropped = set(drop)
    words = ["vllm", "serve", model or spec.model]
    for flag in spec.flags:
        if flag.name not in dropped:
            words.extend(flag.words())
    words.extend(add)
    return (env + " " if env else "") + shlex.join(words)


@pytest.mark.parametrize("probe", [False, True], ids=["serve", "probe"])
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_profile_command_passes_every_rule(profile: str, probe: bool) -> None:
    spec = build_command(profile, probe=probe)
    report = check_command(spec.command(), spec.profile.gpu)
    assert report.findings == []
    # The rendered command parses back to exactly the flags it was built from.
    assert report.command.model == spec.profile.checkpoint
    assert report.command.value("served-model-name") == "nemotron-3.5-lightning"


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_long_context_commands_carry_the_env_and_pass(profile: str) -> None:
    spec = build_command(profile, context=1_048_576)
    assert spec.env == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    assert check_command(spec.command(), spec.profile.gpu).findings == []


def test_probe_variant_shapes() -> None:
    spec = build_command("dgx-spark", probe=True, context=32768, probe_layers=(4, 52), probe_dir="/data/h")
    cmd = check_command(spec.command(), "gb10").command
    assert cmd.json("speculative-config") == {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [4, 52]}},
    }
    assert cmd.json("kv-transfer-config") == {
        "kv_connector": "ExampleHiddenStatesConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": "/data/h"},
    }
    assert cmd.explicitly_disabled("enable-chunked-prefill")
    assert cmd.explicitly_disabled("enable-prefix-caching")
    assert cmd.int_value("max-num-batched-tokens") == cmd.int_value("max-model-len") == 32768
    assert cmd.int_value("port") == 8001
    assert not cmd.has("kv-cache-dtype")  # fp8 KV dropped: the extraction layer keeps auto/bf16
    assert CHECKPOINT_DSPARK not in spec.command()


# (case id, gpu, command, exactly the rules expected to fire)
CASES: list[tuple[str, str | None, str, set[str]]] = [
    ("bad-json", "h100", command(add=["--speculative-config", "{model: x}"]), {"invalid-json"}),
    ("fp16-no-sr", "h100", command(drop=SR), {"fp16-mamba-state-without-stochastic-rounding"}),
    (
        "bf16-via-mamba-cache-dtype",
        "a100",
        command("a100", drop=["--mamba-ssm-cache-dtype"], add=["--mamba-cache-dtype", "bfloat16"]),
        {"fp16-mamba-state-without-stochastic-rounding"},
    ),
    (
        "sr-default-triton-on-hopper",
        "h100",
        command(drop=["--mamba-backend"]),
        {"stochastic-rounding-backend", "mamba-backend-missing"},
    ),
    (
        "sr-explicit-triton-on-gb10",
        "gb10",
        command("dgx-spark", drop=["--mamba-backend"], add=["--mamba-backend", "triton", *SR[:1], SR[1], "5"]),
        {"stochastic-rounding-backend"},
    ),
    ("sr-triton-on-b200-is-fine", "b200", command(drop=["--mamba-backend"], add=["--mamba-backend", "triton"]), set()),
    ("spark-without-backend", "gb10", command("dgx-spark", drop=["--mamba-backend"]), {"mamba-backend-missing"}),
    ("a100-default-backend-is-fine", "a100", command("a100", drop=["--mamba-backend"]), set()),
    (
        "flashinfer-on-a100",
        "a100",
        command("a100", drop=["--mamba-backend"], add=["--mamba-backend", "flashinfer"]),
        {"mamba-backend-not-recommended"},
    ),
    (
        "float32-triton-on-h100",
        "h100",
        command(
            drop=[*SR, "--mamba-backend", "--mamba-ssm-cache-dtype"],
            add=["--mamba-backend", "triton", "--mamba-ssm-cache-dtype", "float32"],
        ),
        {"mamba-backend-not-recommended"},
    ),
    ("no-tool-parser", "h100", command(drop=["--tool-call-parser"]), {"tool-call-parser-missing"}),
    ("no-auto-tool-choice", "h100", command(drop=["--enable-auto-tool-choice"]), {"auto-tool-choice-missing"}),
    (
        "hermes-parser",
        "h100",
        command(drop=["--tool-call-parser"], add=["--tool-call-parser", "hermes"]),
        {"tool-call-parser-unexpected"},
    ),
    (
        "qwen3-xml-is-fine",
        "h100",
        command(drop=["--tool-call-parser"], add=["--tool-call-parser", "qwen3_xml"]),
        set(),
    ),
    ("no-reasoning-parser", "h100", command(drop=["--reasoning-parser"]), {"reasoning-parser-missing"}),
    (
        "deepseek-parser",
        "h100",
        command(drop=["--reasoning-parser"], add=["--reasoning-parser", "deepseek_r1"]),
        {"reasoning-parser-unexpected"},
    ),
    (
        "reasoning-config",
        "h100",
        command(add=["--reasoning-config", '{"reasoning_start_str": "<think>"}']),
        {"reasoning-config-with-nemotron-v3"},
    ),
    (
        "probe-plus-dspark-dotted",
        "gb10",
        command("dgx-spark", probe=True, add=["--speculative_config.model", CHECKPOINT_DSPARK]),
        {"extraction-with-speculative-decoding"},
    ),
    (
        "dspark-serving-plus-connector",
        "gb10",
        command(
            "dgx-spark",
            drop=["--enable-prefix-caching", "--kv-cache-dtype"],
            add=[
                "--kv-transfer-config",
                '{"kv_connector": "ExampleHiddenStatesConnector", "kv_role": "kv_producer", '
                '"kv_connector_extra_config": {"shared_storage_path": "/tmp/h"}}',
                "--no-enable-chunked-prefill",
                "--no-enable-prefix-caching",
                "--max-num-batched-tokens",
                str(NATIVE_CONTEXT),
            ],
        ),
        {"extraction-with-speculative-decoding", "extraction-incomplete"},
    ),
    (
        "probe-with-chunked-prefill",
        "h100",
        command(probe=True, drop=["--no-enable-chunked-prefill"]),
        {"extraction-with-chunked-prefill"},
    ),
    (
        "probe-chunked-prefill-turned-back-on",
        "h100",
        command(probe=True, add=["--enable-chunked-prefill"]),
        {"extraction-with-chunked-prefill", "duplicate-flag"},
    ),
    ("probe-without-connector", "h100", command(probe=True, drop=["--kv-transfer-config"]), {"extraction-incomplete"}),
    (
        "probe-two-tokens",
        "h100",
        command(probe=True, add=["--speculative-config.num_speculative_tokens", "2"]),
        {"extraction-incomplete"},
    ),
    (
        "probe-with-prefix-caching",
        "h100",
        command(probe=True, drop=["--no-enable-prefix-caching"]),
        {"extraction-with-prefix-caching"},
    ),
    (
        "probe-fp8-kv",
        "h100",
        command(probe=True, add=["--kv-cache-dtype", "fp8"]),
        {"extraction-kv-cache-dtype"},
    ),
    (
        "probe-small-batches",
        "h100",
        command(probe=True, drop=["--max-num-batched-tokens"], add=["--max-num-batched-tokens", "8192"]),
        {"batched-tokens-below-context"},
    ),
    ("no-cache-mode", "h100", command(drop=["--mamba-cache-mode"]), {"prefix-caching-mamba-cache-mode"}),
    (
        "cache-mode-none",
        "h100",
        command(drop=["--mamba-cache-mode"], add=["--mamba-cache-mode", "none"]),
        {"prefix-caching-mamba-cache-mode"},
    ),
    ("no-max-model-len", "h100", command(drop=["--max-model-len"]), {"max-model-len-missing"}),
    (
        "1m-context-without-env",
        "h100",
        command(drop=["--max-model-len"], add=["--max-model-len", "1048576"]),
        {"long-context-env"},
    ),
    ("default-philox", "h100", command(drop=["--mamba-cache-philox-rounds"]), {"philox-rounds-default"}),
    ("enable-reasoning", "h100", command(add=["--enable-reasoning"]), {"legacy-flag"}),
    ("duplicate", "h100", command(add=["--max-num-seqs", "128"]), {"duplicate-flag"}),
    ("same-value-twice-is-fine", "h100", command(add=["--max-num-seqs", "256"]), set()),
    ("other-model", "h100", command(model="Qwen/Qwen3-8B"), {"model-not-lightning"}),
    ("all-interfaces", "h100", command(drop=["--host"]), {"open-bind-without-api-key"}),
    ("all-interfaces-with-key", "h100", command(drop=["--host"], add=["--api-key", "s"]), set()),
    ("gpu-unknown", None, command(), {"gpu-unknown"}),
]


@pytest.mark.parametrize(("gpu", "text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_fires_exactly_where_expected(gpu: str | None, text: str, expected: set[str]) -> None:
    report = check_command(text, gpu)
    assert set(report.rule_ids()) == expected
    severities = {r.id: r.severity for r in RULES}
    assert {f.rule for f in report.errors} == {r for r in expected if severities[r] == "error"}
    assert report.ok == (not any(severities[r] == "error" for r in expected))


def test_every_rule_has_a_firing_case() -> None:
    fired = set().union(*(c[3] for c in CASES))
    assert {r.id for r in RULES} <= fired


def test_rule_ids_are_unique_and_documented() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.message and r.fix and r.severity in ("error", "warning")


def test_not_a_vllm_command_stops_early() -> None:
    report = check_command("python serve.py --port 8000", "h100")
    assert report.rule_ids() == ["not-vllm-serve"]
    assert not report.ok


def test_the_issue_mistakes_are_errors() -> None:
    """The four mistakes the issue names must fail the check (non-zero exit)."""
    mistakes = {
        "fp16 state without stochastic rounding": command(drop=SR),
        "wrong backend for the GPU": command(drop=["--mamba-backend"], add=["--mamba-backend", "triton"]),
        "missing backend": command("dgx-spark", drop=["--mamba-backend"]),
        "no tool parser": command(drop=["--tool-call-parser"]),
        "no auto tool choice": command(drop=["--enable-auto-tool-choice"]),
        "extraction + speculative decoding": command(
            "dgx-spark", probe=True, add=["--speculative_config.model", CHECKPOINT_DSPARK]
        ),
        "extraction + chunked prefill": command(probe=True, drop=["--no-enable-chunked-prefill"]),
    }
    gpus = {"missing backend": "gb10", "extraction + speculative decoding": "gb10"}
    for name, text in mistakes.items():
        assert not check_command(text, gpus.get(name, "h100")).ok, name


def test_gpu_table_matches_vllm_triton_rule() -> None:
    # vLLM's Triton stochastic rounding needs the compute capability 10.x family.
    for gpu in GPUS.values():
        assert ("triton" in gpu.stochastic_rounding_backends) == (gpu.compute_capability[0] == 10)


def test_finding_details_name_the_culprit() -> None:
    report = check_command(command(drop=["--mamba-backend"]), "h100")
    sr = next(f for f in report.findings if f.rule == "stochastic-rounding-backend")
    assert "triton (the default)" in sr.message and "9.0" in sr.message
    assert report.to_dict()["errors"] == 2
