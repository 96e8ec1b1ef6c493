"""GPU facts and per-profile vLLM recipes for Nemotron 3.5 Lightning, rendered as a ready command.

Layer: ``serving`` — standard library only.

Every model-specific flag carries a one-line reason; ``docs/lightning.md`` explains them at
length. The recipes follow the published ones (issue #9; NVIDIA's Dynamo recipe page for
Lightning; vLLM's ``MambaConfig``); where a profile is derived rather than published (A100,
8xH100) the reason says so.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass

SERVED_MODEL_NAME = "nemotron-3.5-lightning"
"""The model id every generated command serves under (``--served-model-name``) and the
``nemotron-3.5-lightning`` target preset's default ``model``."""

CHECKPOINT_NVFP4 = "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"
CHECKPOINT_BF16 = "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16"
CHECKPOINT_DSPARK = "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4-DSpark"

NATIVE_CONTEXT = 262_144
"""``max_position_embeddings`` of the Lightning checkpoints (NVIDIA NeMo model table; the
hosted listings agree). vLLM refuses a longer ``--max-model-len`` unless
``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` is set."""

PROBE_CONTEXT = 65_536
"""Default window of the hidden-state probe instance: without chunked prefill a whole prompt is
one batch, so activation memory grows with this number."""

PROBE_LAYERS = (26, 52)
"""Default layers captured by the probe: a middle layer and ``num_hidden_layers`` (52 in the
Nemotron 3 Nano architecture Lightning shares), which vLLM reads as the last layer's output
before the final norm. Check ``config.json`` of your checkpoint."""

PROBE_DIR = "/var/tmp/switchyard-hidden-states"

TOOL_PARSERS = ("qwen3_coder", "qwen3_xml")
REASONING_PARSER = "nemotron_v3"


@dataclass(frozen=True, slots=True)
class Gpu:
    """What the checker needs to know about a GPU.

    Attributes:
        key: CLI name (``h100``).
        name: Marketing name.
        compute_capability: CUDA compute capability.
        memory_gb: Memory per GPU in GB (unified memory on GB10).
        recommended_mamba_backend: The Mamba SSU backend the generated commands use.
        validated_mamba_backends: Backends known to work here (others draw a warning).
        required_mamba_backend: Whether running without the recommended backend is an error
            (the default ``triton`` is not a validated path on this GPU).
        stochastic_rounding_backends: Backends that can write the fp16 SSM state with stochastic
            rounding here. vLLM's Triton path uses the ``cvt.rs`` instruction, which exists only
            on compute capability 10.x (data-centre Blackwell); it refuses to start otherwise.
    """

    key: str
    name: str
    compute_capability: tuple[int, int]
    memory_gb: float
    recommended_mamba_backend: str
    validated_mamba_backends: frozenset[str]
    required_mamba_backend: bool
    stochastic_rounding_backends: frozenset[str]


_TRITON = frozenset({"triton"})
_FLASHINFER = frozenset({"flashinfer"})
_BOTH = _TRITON | _FLASHINFER

GPUS: dict[str, Gpu] = {
    g.key: g
    for g in (
        Gpu("a100", "NVIDIA A100 80GB", (8, 0), 80, "triton", _TRITON, False, _FLASHINFER),
        Gpu("h100", "NVIDIA H100 80GB", (9, 0), 80, "flashinfer", _FLASHINFER, True, _FLASHINFER),
        Gpu("h200", "NVIDIA H200 141GB", (9, 0), 141, "flashinfer", _FLASHINFER, True, _FLASHINFER),
        Gpu("gb10", "NVIDIA GB10 (DGX Spark)", (12, 1), 128, "flashinfer", _FLASHINFER, True, _FLASHINFER),
        Gpu("b200", "NVIDIA B200", (10, 0), 180, "flashinfer", _BOTH, False, _BOTH),
    )
}


@dataclass(frozen=True, slots=True)
class Flag:
    """One command-line flag and why it is there.

    Attributes:
        name: The flag with its dashes (``--mamba-backend``).
        value: Its value, or ``None`` for a switch.
        reason: One line: why this model needs it.
    """

    name: str
    value: str | None
    reason: str

    def words(self) -> list[str]:
        """The flag as shell words."""
        return [self.name] if self.value is None else [self.name, self.value]


@dataclass(frozen=True, slots=True)
class Profile:
    """A published (or derived) way to serve Lightning on one machine shape.

    Attributes:
        key: CLI name (``h100``).
        title: One-line description.
        gpu: Key into :data:`GPUS`.
        gpu_count: GPUs the command uses.
        checkpoint: Hugging Face checkpoint id.
        flags: Model- and hardware-specific flags, in order.
        source: Where the recipe comes from.
        memory_note: What the memory budget looks like on this profile.
    """

    key: str
    title: str
    gpu: str
    gpu_count: int
    checkpoint: str
    flags: tuple[Flag, ...]
    source: str
    memory_note: str


# -- shared flag groups -------------------------------------------------------------------------

_AGENT = (
    Flag(
        "--reasoning-parser",
        REASONING_PARSER,
        "splits <think>…</think> into the `reasoning` field; without it the marker leaks into `content`",
    ),
    Flag(
        "--tool-call-parser",
        "qwen3_coder",
        "Lightning writes tool calls as <tool_call><function=…><parameter=…> XML; this parser turns them "
        "into OpenAI tool_calls, typed by the request's JSON schema",
    ),
    Flag(
        "--enable-auto-tool-choice",
        None,
        'agents send tool_choice "auto"; without this switch vLLM answers 400',
    ),
)

_HOPPER_THROUGHPUT = (
    Flag("--max-num-seqs", "256", "published max-throughput batch: up to 256 concurrent sequences"),
    Flag(
        "--max-num-batched-tokens",
        "16384",
        "tokens per scheduler step; long agent prompts are prefilled in 16K chunks between decode steps",
    ),
    Flag(
        "--enable-prefix-caching",
        None,
        "agent turns resend the whole history; reuse its KV and Mamba state instead of recomputing",
    ),
    Flag("--async-scheduling", None, "overlaps CPU scheduling with GPU work (Hopper recipe)"),
)

_HOPPER_MAMBA = (
    Flag(
        "--mamba-backend",
        "flashinfer",
        "FlashInfer's Mamba SSU kernel; on Hopper it is the only path that can do stochastic rounding",
    ),
    Flag("--mamba-ssu-algorithm", "horizontal", "the SSU kernel variant of the published Hopper recipe"),
    Flag(
        "--mamba-cache-mode",
        "align",
        "checkpoint Mamba state at block boundaries so prefix caching can resume hybrid layers",
    ),
    Flag("--mamba-ssm-cache-dtype", "float16", "halves SSM-state memory per sequence (float32 is the default)"),
    Flag(
        "--enable-mamba-cache-stochastic-rounding",
        None,
        "unbiased rounding of the fp16 state; without it rounding error drifts over long agent sessions",
    ),
    Flag("--mamba-cache-philox-rounds", "5", "PRNG rounds for the rounding noise, as in the published recipe"),
)

_HOST_NOTE = "vLLM has no auth unless --api-key; use 0.0.0.0 only when Switchyard runs on another host"

PROFILES: dict[str, Profile] = {
    p.key: p
    for p in (
        Profile(
            "h100",
            "1x H100 80GB, NVFP4 checkpoint (W4A16 on Hopper), max throughput",
            "h100",
            1,
            CHECKPOINT_NVFP4,
            (
                *_HOPPER_THROUGHPUT,
                Flag(
                    "--moe-backend",
                    "humming",
                    "Humming kernels run the NVFP4 experts as 4-bit weights x 16-bit activations (no FP4 on Hopper)",
                ),
                Flag("--linear-backend", "humming", "the same weight-only kernels for the dense layers"),
                *_HOPPER_MAMBA,
            ),
            "published single-GPU max-throughput recipe (issue #9; vLLM >= 0.27.1)",
            "about 75 GB: vLLM's default --gpu-memory-utilization 0.9 claims 72 GB plus ~2-3 GB of CUDA "
            "context; ~18 GB of it are NVFP4 weights, the rest activations, CUDA graphs and the KV + "
            "Mamba-state pool",
        ),
        Profile(
            "h200",
            "1x H200 141GB, NVFP4 checkpoint (W4A16 on Hopper), max throughput",
            "h200",
            1,
            CHECKPOINT_NVFP4,
            (
                *_HOPPER_THROUGHPUT,
                Flag(
                    "--moe-backend",
                    "humming",
                    "Humming kernels run the NVFP4 experts as 4-bit weights x 16-bit activations (no FP4 on Hopper)",
                ),
                Flag("--linear-backend", "humming", "the same weight-only kernels for the dense layers"),
                *_HOPPER_MAMBA,
            ),
            "published single-GPU max-throughput recipe (issue #9; vLLM >= 0.27.1)",
            "vLLM takes 90% of 141 GB (~127 GB) by default; the model itself fits the ~75 GB budget, so "
            "pass --gpu-memory-utilization 0.55 to leave room for a probe instance on the same GPU",
        ),
        Profile(
            "dgx-spark",
            "DGX Spark (GB10, 128 GB unified memory), NVFP4 checkpoint with DSpark speculative decoding",
            "gb10",
            1,
            CHECKPOINT_NVFP4,
            (
                Flag("--moe-backend", "marlin", "Marlin FP4 MoE kernels, the published choice on GB10"),
                Flag("--kv-cache-dtype", "fp8", "halves attention KV memory on the shared 128 GB"),
                Flag(
                    "--enable-prefix-caching",
                    None,
                    "agent turns resend the whole history; reuse its KV and Mamba state instead of recomputing",
                ),
                Flag(
                    "--gpu-memory-utilization",
                    "0.85",
                    "unified memory is shared with the CPU side; leave 15% to the OS and Switchyard",
                ),
                Flag(
                    "--speculative-config",
                    json.dumps({"model": CHECKPOINT_DSPARK, "num_speculative_tokens": 3}),
                    "DSpark drafter proposes 3 tokens per step (same as --speculative_config.model … "
                    "--speculative_config.num_speculative_tokens 3)",
                ),
                Flag(
                    "--mamba-backend",
                    "flashinfer",
                    "FlashInfer's Mamba SSU kernel (the published GB10 choice; Triton stochastic rounding "
                    "needs compute capability 10.x and GB10 is 12.1)",
                ),
                Flag(
                    "--mamba-cache-mode",
                    "align",
                    "checkpoint Mamba state at block boundaries so prefix caching can resume hybrid layers",
                ),
            ),
            "published DGX Spark recipe (issue #9); SSM state stays at vLLM's float32 default",
            "85% of the 128 GB unified memory (~109 GB) goes to vLLM; weights ~18 GB plus the DSpark drafter",
        ),
        Profile(
            "a100",
            "1x A100 80GB, NVFP4 checkpoint run as W4A16 through Marlin (no FP4 hardware on Ampere)",
            "a100",
            1,
            CHECKPOINT_NVFP4,
            (
                Flag(
                    "--moe-backend",
                    "marlin",
                    "Marlin runs the 4-bit expert weights with 16-bit activations (W4A16) on Ampere",
                ),
                Flag(
                    "--enable-prefix-caching",
                    None,
                    "agent turns resend the whole history; reuse its KV and Mamba state instead of recomputing",
                ),
                Flag(
                    "--mamba-cache-mode",
                    "align",
                    "checkpoint Mamba state at block boundaries so prefix caching can resume hybrid layers",
                ),
                Flag(
                    "--mamba-backend",
                    "triton",
                    "vLLM's Triton SSU kernel runs on Ampere; the FlashInfer Mamba path is only published for "
                    "Hopper and Blackwell",
                ),
                Flag(
                    "--mamba-ssm-cache-dtype",
                    "float32",
                    "no stochastic rounding on Ampere's Triton path, so keep the state in float32 (no drift)",
                ),
            ),
            "derived from the W4A16 line of issue #9 (not a published command); verify on your vLLM build",
            "about 75 GB: 90% of 80 GB by default; float32 SSM state costs twice the fp16 state per sequence",
        ),
        Profile(
            "8xh100",
            "8x H100 80GB, BF16 checkpoint with tensor parallel 8 and expert parallel",
            "h100",
            8,
            CHECKPOINT_BF16,
            (
                Flag("--tensor-parallel-size", "8", "shards attention, Mamba and dense layers over the 8 GPUs"),
                Flag(
                    "--enable-expert-parallel",
                    None,
                    "places whole experts per GPU (128 experts, 16 each) instead of slicing every expert 8 ways",
                ),
                *_HOPPER_THROUGHPUT,
                *_HOPPER_MAMBA,
            ),
            "issue #9 (BF16, TP8+EP) with the Hopper Mamba flags of the single-GPU recipe",
            "~60 GB of BF16 weights spread over 8 GPUs (~7.5 GB each); the rest of each GPU is KV and state",
        ),
    )
}


@dataclass(slots=True)
class ServeSpec:
    """A rendered command: what to run and why each flag is there.

    Attributes:
        profile: The profile it came from.
        probe: Whether this is the hidden-state probe variant.
        model: The checkpoint.
        env: Environment variables the command needs.
        flags: Every flag with its reason, in order.
        notes: Extra lines for the reader (memory, caveats).
        host: Bound address.
        port: Bound port.
    """

    profile: Profile
    probe: bool
    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    env: dict[str, str] = field(default_factory=dict)
    flags: list[Flag] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def gpu(self) -> Gpu:
        """The profile's GPU."""
        return GPUS[self.profile.gpu]

    def argv(self) -> list[str]:
        """``["vllm", "serve", model, …flags]`` (environment not included)."""
        out = ["vllm", "serve", self.model]
        for flag in self.flags:
            out.extend(flag.words())
        return out

    def command(self, *, multiline: bool = True) -> str:
        """The shell command, with ``NAME=value`` environment prefixes, quoted for copy-paste."""
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        head = " ".join(shlex.quote(w) for w in ["vllm", "serve", self.model])
        if prefix:
            head = f"{prefix} {head}"
        parts = [" ".join(shlex.quote(w) for w in flag.words()) for flag in self.flags]
        if not multiline:
            return " ".join([head, *parts])
        return " \\\n  ".join([head, *parts])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (``switchyard vllm-command --json``)."""
        return {
            "profile": self.profile.key,
            "gpu": self.gpu.key,
            "gpu_count": self.profile.gpu_count,
            "probe": self.probe,
            "checkpoint": self.model,
            "served_model_name": SERVED_MODEL_NAME,
            "host": self.host,
            "port": self.port,
            "env": dict(self.env),
            "argv": self.argv(),
            "command": self.command(multiline=False),
            "flags": [{"flag": f.name, "value": f.value, "reason": f.reason} for f in self.flags],
            "source": self.profile.source,
            "notes": list(self.notes),
        }


# Flags the probe instance must not carry: speculative decoding (the extraction method takes
# its slot), prefix caching (cached tokens would skip the forward pass and never be captured),
# async scheduling (nothing to overlap for one-token answers), an fp8 KV cache (the
# extraction layer's cache-only attention keeps auto/bfloat16 only) and the chunked-prefill
# batch size (replaced by the whole window).
_PROBE_DROPS = frozenset(
    {
        "--speculative-config",
        "--enable-prefix-caching",
        "--mamba-cache-mode",
        "--async-scheduling",
        "--kv-cache-dtype",
        "--max-num-batched-tokens",
    }
)


def probe_flags(context: int, layers: tuple[int, ...], directory: str) -> list[Flag]:
    """The flags that turn an instance into the hidden-state extraction probe."""
    speculative = {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": list(layers)}},
    }
    transfer = {
        "kv_connector": "ExampleHiddenStatesConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": directory},
    }
    return [
        Flag(
            "--speculative-config",
            json.dumps(speculative, separators=(",", ":")),
            f"hidden-state extraction of layers {', '.join(map(str, layers))}; it occupies the "
            "speculative-decoding slot, so no MTP/DSpark on this instance",
        ),
        Flag(
            "--kv-transfer-config",
            json.dumps(transfer, separators=(",", ":")),
            f"the hidden-states connector writes one safetensors file per request under {directory}; "
            "the path comes back in kv_transfer_params.hidden_states_path",
        ),
        Flag(
            "--no-enable-chunked-prefill",
            None,
            "extraction needs each prompt prefilled in one piece",
        ),
        Flag(
            "--max-num-batched-tokens",
            str(context),
            "without chunked prefill vLLM refuses to start unless a whole --max-model-len prompt fits one batch",
        ),
        Flag(
            "--no-enable-prefix-caching",
            None,
            "a cached prefix skips the forward pass, so its hidden states would never be written",
        ),
    ]


def build_command(
    profile: str | Profile,
    *,
    context: int | None = None,
    probe: bool = False,
    port: int | None = None,
    host: str = "127.0.0.1",
    gpu_memory_utilization: float | None = None,
    probe_layers: tuple[int, ...] = PROBE_LAYERS,
    probe_dir: str = PROBE_DIR,
) -> ServeSpec:
    """Renders the ``vllm serve`` command of a profile.

    Args:
        profile: A key of :data:`PROFILES` or a :class:`Profile`.
        context: ``--max-model-len`` (default: the native 262,144; 65,536 for the probe).
        probe: Produce the hidden-state extraction variant for the prefill probe.
        port: Port to bind (default 8000; 8001 for the probe so both can run side by side).
        host: Address to bind.
        gpu_memory_utilization: Overrides the profile's (or vLLM's 0.9 default) memory share.
        probe_layers: Layer ids the probe captures.
        probe_dir: Directory the probe writes safetensors files to.

    Raises:
        KeyError: Unknown profile.
        ValueError: A non-positive context or port.
    """
    prof = profile if isinstance(profile, Profile) else PROFILES[profile]
    window = context if context is not None else (PROBE_CONTEXT if probe else NATIVE_CONTEXT)
    if window <= 0:
        raise ValueError(f"context must be positive, got {window}")
    bind_port = port if port is not None else (8001 if probe else 8000)
    if not 0 < bind_port < 65536:
        raise ValueError(f"port must be in 1..65535, got {bind_port}")
    spec = ServeSpec(prof, probe, prof.checkpoint, host=host, port=bind_port)
    spec.flags.append(
        Flag(
            "--served-model-name",
            SERVED_MODEL_NAME,
            "one model id for every profile: the nemotron-3.5-lightning preset's default `model`",
        )
    )
    spec.flags.append(Flag("--host", host, _HOST_NOTE))
    spec.flags.append(
        Flag("--port", str(bind_port), "the probe instance uses 8001 by default" if probe else "API port")
    )
    spec.flags.append(
        Flag(
            "--max-model-len",
            str(window),
            "served context window; Switchyard reads it back from /v1/models at start-up",
        )
    )
    if window > NATIVE_CONTEXT:
        spec.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
        spec.notes.append(
            f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: {window} exceeds the checkpoint's max_position_embeddings "
            f"({NATIVE_CONTEXT}); vLLM refuses it otherwise (the model card advertises up to 1M)"
        )
    for flag in prof.flags:
        if probe and flag.name in _PROBE_DROPS:
            continue
        if gpu_memory_utilization is not None and flag.name == "--gpu-memory-utilization":
            continue
        spec.flags.append(flag)
    if gpu_memory_utilization is not None:
        if not 0 < gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
        spec.flags.append(
            Flag("--gpu-memory-utilization", f"{gpu_memory_utilization:g}", "share of GPU memory vLLM may take")
        )
    spec.flags.extend(_AGENT)
    if probe:
        spec.flags.extend(probe_flags(window, tuple(probe_layers), probe_dir))
        spec.notes.append(
            "probe instance: prompts longer than --max-model-len are rejected; the probe router should "
            "truncate (truncate_prompt_tokens) or fall back"
        )
    spec.notes.insert(0, f"memory: {prof.memory_note}")
    return spec


__all__ = [
    "CHECKPOINT_BF16",
    "CHECKPOINT_DSPARK",
    "CHECKPOINT_NVFP4",
    "GPUS",
    "NATIVE_CONTEXT",
    "PROBE_CONTEXT",
    "PROFILES",
    "REASONING_PARSER",
    "SERVED_MODEL_NAME",
    "TOOL_PARSERS",
    "Flag",
    "Gpu",
    "Profile",
    "ServeSpec",
    "build_command",
    "probe_flags",
]
