"""The rules behind ``switchyard vllm-command --check``: a table of small, separately tested checks.

Layer: ``serving`` — standard library only.

Each :class:`Rule` has an id, a severity, a message, a fix and a check function. A check
returns ``None`` when the command passes, or a detail string (possibly empty) when the rule
fires. Errors are mistakes that break the server or silently degrade answers (vLLM refuses to
start, tool calls return 400, the fp16 Mamba state drifts); warnings are deviations from the
published recipes worth a second look.
"""

from __future__ import annotations

from collections.abc import Iterable

from switchyard.serving.vllm_args import ServeCommand, parse_serve_command
from switchyard.serving.vllm_facts import (
    EXTRACT_METHOD,
    HIDDEN_STATES_CONNECTOR,
    chunked_prefill_off,
    extraction,
    mamba_backend,
    speculative,
    ssm_state_dtype,
    stochastic_rounding,
)
from switchyard.serving.vllm_findings import CheckContext, CheckReport, Finding, Rule, Severity
from switchyard.serving.vllm_profiles import GPUS, NATIVE_CONTEXT, REASONING_PARSER, TOOL_PARSERS, Gpu

# -- checks --------------------------------------------------------------------------------------


def _invalid_json(ctx: CheckContext) -> str | None:
    bad = [p for p in ctx.cmd.problems if "invalid JSON" in p]
    return "; ".join(bad) if bad else None


def _fp16_without_sr(ctx: CheckContext) -> str | None:
    dtype = ssm_state_dtype(ctx.cmd)
    if dtype in ("float16", "half", "bfloat16") and not stochastic_rounding(ctx.cmd):
        return f"SSM state dtype is {dtype}"
    return None


def _sr_backend(ctx: CheckContext) -> str | None:
    if ctx.gpu is None or not stochastic_rounding(ctx.cmd):
        return None
    backend = mamba_backend(ctx.cmd)
    if backend in ctx.gpu.stochastic_rounding_backends:
        return None
    cc = ".".join(map(str, ctx.gpu.compute_capability))
    implied = "" if ctx.cmd.value("mamba-backend") else " (the default)"
    return f"backend {backend}{implied} on {ctx.gpu.name}, compute capability {cc}"


def _backend_missing(ctx: CheckContext) -> str | None:
    gpu = ctx.gpu
    if gpu is None or ctx.cmd.value("mamba-backend") or not gpu.required_mamba_backend:
        return None
    return f"{gpu.name} recipes use --mamba-backend {gpu.recommended_mamba_backend}"


def _backend_not_recommended(ctx: CheckContext) -> str | None:
    gpu = ctx.gpu
    chosen = ctx.cmd.value("mamba-backend")
    if gpu is None or chosen is None or chosen.lower() in gpu.validated_mamba_backends:
        return None
    if _sr_backend(ctx) is not None:
        return None  # already an error
    return f"{chosen} on {gpu.name}; validated: {', '.join(sorted(gpu.validated_mamba_backends))}"


def _tool_parser_missing(ctx: CheckContext) -> str | None:
    return None if ctx.cmd.value("tool-call-parser") else ""


def _auto_tool_choice_missing(ctx: CheckContext) -> str | None:
    return None if ctx.cmd.enabled("enable-auto-tool-choice") else ""


def _tool_parser_unexpected(ctx: CheckContext) -> str | None:
    parser = ctx.cmd.value("tool-call-parser")
    if parser is None or parser in TOOL_PARSERS:
        return None
    return f"--tool-call-parser {parser}"


def _reasoning_parser_missing(ctx: CheckContext) -> str | None:
    return None if ctx.cmd.value("reasoning-parser") else ""


def _reasoning_parser_unexpected(ctx: CheckContext) -> str | None:
    parser = ctx.cmd.value("reasoning-parser")
    if parser is None or parser == REASONING_PARSER:
        return None
    return f"--reasoning-parser {parser}"


def _reasoning_config(ctx: CheckContext) -> str | None:
    if ctx.cmd.has("reasoning-config") and ctx.cmd.value("reasoning-parser") == REASONING_PARSER:
        return ""
    return None


def _extraction_with_spec(ctx: CheckContext) -> str | None:
    if not extraction(ctx.cmd):
        return None
    spec = speculative(ctx.cmd)
    method = spec.get("method")
    if method not in (None, EXTRACT_METHOD):
        return f"speculative method {method!r} alongside the hidden-states connector"
    if "model" in spec:
        return f"draft model {spec['model']!r} alongside hidden-state extraction"
    return None


def _extraction_with_chunked_prefill(ctx: CheckContext) -> str | None:
    if extraction(ctx.cmd) and not chunked_prefill_off(ctx.cmd):
        return "chunked prefill is on (vLLM's default)"
    return None


def _extraction_incomplete(ctx: CheckContext) -> str | None:
    cmd = ctx.cmd
    if not extraction(cmd):
        return None
    spec = speculative(cmd)
    transfer = cmd.json("kv-transfer-config")
    missing: list[str] = []
    if spec.get("method") != EXTRACT_METHOD:
        missing.append('speculative method "extract_hidden_states"')
    else:
        if spec.get("num_speculative_tokens", 1) != 1:
            missing.append("num_speculative_tokens must be 1")
        draft = spec.get("draft_model_config")
        hf = draft.get("hf_config") if isinstance(draft, dict) else None
        if not isinstance(hf, dict) or not hf.get("eagle_aux_hidden_state_layer_ids"):
            missing.append("draft_model_config.hf_config.eagle_aux_hidden_state_layer_ids")
    if transfer.get("kv_connector") != HIDDEN_STATES_CONNECTOR:
        missing.append(f"--kv-transfer-config kv_connector {HIDDEN_STATES_CONNECTOR}")
    else:
        extra = transfer.get("kv_connector_extra_config") or {}
        if not isinstance(extra, dict) or not extra.get("shared_storage_path"):
            missing.append("kv_connector_extra_config.shared_storage_path")
        if transfer.get("kv_role") not in (None, "kv_producer", "kv_both"):
            missing.append(f"kv_role kv_producer (got {transfer.get('kv_role')!r})")
    return "; ".join(missing) if missing else None


def _extraction_prefix_caching(ctx: CheckContext) -> str | None:
    cmd = ctx.cmd
    if extraction(cmd) and not cmd.explicitly_disabled("enable-prefix-caching"):
        return ""
    return None


def _extraction_kv_dtype(ctx: CheckContext) -> str | None:
    dtype = ctx.cmd.value("kv-cache-dtype")
    if extraction(ctx.cmd) and dtype and dtype.lower() not in ("auto", "bfloat16"):
        return f"--kv-cache-dtype {dtype}"
    return None


def _batched_below_context(ctx: CheckContext) -> str | None:
    cmd = ctx.cmd
    if not chunked_prefill_off(cmd):
        return None
    batched, window = cmd.int_value("max-num-batched-tokens"), cmd.int_value("max-model-len")
    if batched is not None and window is not None and batched < window:
        return f"--max-num-batched-tokens {batched} < --max-model-len {window}"
    if batched is not None and window is None:
        return f"--max-num-batched-tokens {batched} and no --max-model-len (the checkpoint's {NATIVE_CONTEXT} applies)"
    return None


def _prefix_caching_mode(ctx: CheckContext) -> str | None:
    cmd = ctx.cmd
    if not cmd.enabled("enable-prefix-caching"):
        return None
    mode = (cmd.value("mamba-cache-mode") or "").lower()
    if mode in ("align", "all"):
        return None
    return "--mamba-cache-mode none makes prefix caching inert for Mamba layers" if mode == "none" else "not pinned"


def _max_model_len_missing(ctx: CheckContext) -> str | None:
    return None if ctx.cmd.value("max-model-len") else ""


def _long_context_env(ctx: CheckContext) -> str | None:
    window = ctx.cmd.int_value("max-model-len")
    if window is None or window <= NATIVE_CONTEXT:
        return None
    if ctx.cmd.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "").lower() in ("1", "true"):
        return None
    return f"--max-model-len {window} > {NATIVE_CONTEXT}"


def _philox_default(ctx: CheckContext) -> str | None:
    if stochastic_rounding(ctx.cmd) and not ctx.cmd.value("mamba-cache-philox-rounds"):
        return ""
    return None


_LEGACY = {
    "enable-reasoning": "--enable-reasoning was removed: reasoning is parsed whenever --reasoning-parser is set, "
    "and the field is now `reasoning` (clients that read only `reasoning_content` see nothing)",
    "speculative-model": "--speculative-model was folded into --speculative-config",
    "num-speculative-tokens": "--num-speculative-tokens was folded into --speculative-config",
}


def _legacy_flags(ctx: CheckContext) -> str | None:
    found = [text for name, text in _LEGACY.items() if name in ctx.cmd.options]
    return "; ".join(found) if found else None


def _duplicates(ctx: CheckContext) -> str | None:
    dups = [name for name, values in ctx.cmd.repeated.items() if len({str(v) for v in values}) > 1]
    return ", ".join(f"--{d}" for d in dups) if dups else None


def _model_not_lightning(ctx: CheckContext) -> str | None:
    model = ctx.cmd.model or ""
    if "nemotron" in model.lower() and "lightning" in model.lower():
        return None
    return f"model {model!r}" if model else "no model given"


def _open_bind(ctx: CheckContext) -> str | None:
    host = ctx.cmd.value("host")
    if ctx.cmd.value("api-key") or ctx.cmd.env.get("VLLM_API_KEY"):
        return None
    if host is None or host in ("0.0.0.0", "::", ""):
        return f"--host {host or '(unset: all interfaces)'}"
    return None


def _gpu_unknown(ctx: CheckContext) -> str | None:
    return "" if ctx.gpu is None else None


RULES: tuple[Rule, ...] = (
    Rule(
        "invalid-json",
        "error",
        "A JSON-valued flag does not parse; vLLM refuses to start",
        "Quote the JSON in single quotes, or use the dotted form (--speculative_config.model …)",
        _invalid_json,
    ),
    Rule(
        "fp16-mamba-state-without-stochastic-rounding",
        "error",
        "The Mamba SSM state is stored in 16 bits without stochastic rounding; rounding error accumulates "
        "and answers drift over long agent sessions",
        "Add --enable-mamba-cache-stochastic-rounding --mamba-cache-philox-rounds 5 (with a backend that "
        "supports it on your GPU), or use --mamba-ssm-cache-dtype float32",
        _fp16_without_sr,
    ),
    Rule(
        "stochastic-rounding-backend",
        "error",
        "Stochastic rounding is not available with this Mamba backend on this GPU; vLLM's Triton path "
        "needs compute capability 10.x (B200/GB200) and refuses to start elsewhere",
        "Use --mamba-backend flashinfer on Hopper and GB10, or drop stochastic rounding and keep the state in float32",
        _sr_backend,
    ),
    Rule(
        "mamba-backend-missing",
        "error",
        "No --mamba-backend: vLLM falls back to Triton, which is not the validated path on this GPU "
        "(and cannot do stochastic rounding there)",
        "Add --mamba-backend flashinfer",
        _backend_missing,
    ),
    Rule(
        "mamba-backend-not-recommended",
        "warning",
        "The Mamba backend differs from the one validated on this GPU",
        "Use the recommended backend unless you have measured yours",
        _backend_not_recommended,
    ),
    Rule(
        "tool-call-parser-missing",
        "error",
        "No --tool-call-parser: Lightning's tool calls stay as XML text in `content` and agents never see them",
        "Add --tool-call-parser qwen3_coder",
        _tool_parser_missing,
    ),
    Rule(
        "auto-tool-choice-missing",
        "error",
        'No --enable-auto-tool-choice: vLLM answers 400 to tool_choice "auto", which every agent sends',
        "Add --enable-auto-tool-choice",
        _auto_tool_choice_missing,
    ),
    Rule(
        "tool-call-parser-unexpected",
        "warning",
        "This tool parser does not read Lightning's <tool_call><function=…> XML format",
        "Use --tool-call-parser qwen3_coder (qwen3_xml reads the same format)",
        _tool_parser_unexpected,
    ),
    Rule(
        "reasoning-parser-missing",
        "warning",
        "No --reasoning-parser: with thinking on, the reasoning and the </think> marker leak into `content`",
        "Add --reasoning-parser nemotron_v3",
        _reasoning_parser_missing,
    ),
    Rule(
        "reasoning-parser-unexpected",
        "warning",
        "Lightning's reasoning parser is nemotron_v3 (it also handles enable_thinking: false)",
        "Use --reasoning-parser nemotron_v3",
        _reasoning_parser_unexpected,
    ),
    Rule(
        "reasoning-config-with-nemotron-v3",
        "warning",
        "--reasoning-config with the nemotron_v3 parser sends everything to `reasoning` and leaves `content` "
        "null (vLLM issue #39103)",
        "Drop --reasoning-config; cap thinking per request instead",
        _reasoning_config,
    ),
    Rule(
        "extraction-with-speculative-decoding",
        "error",
        "Hidden-state extraction occupies the speculative-decoding slot; it cannot be combined with MTP, "
        "DSpark or another drafter",
        "Run the probe as a separate instance (switchyard vllm-command --probe) without a drafter",
        _extraction_with_spec,
    ),
    Rule(
        "extraction-with-chunked-prefill",
        "error",
        "Hidden-state extraction needs chunked prefill off",
        "Add --no-enable-chunked-prefill and set --max-num-batched-tokens to at least --max-model-len",
        _extraction_with_chunked_prefill,
    ),
    Rule(
        "extraction-incomplete",
        "error",
        "Hidden-state extraction is half configured; nothing would be written, or vLLM refuses to start",
        "Use the shapes of switchyard vllm-command --probe (method + connector + storage path + layer ids)",
        _extraction_incomplete,
    ),
    Rule(
        "extraction-with-prefix-caching",
        "warning",
        "Prefix caching is not off on the extraction instance: cached prompt tokens skip the forward pass, "
        "so their hidden states are never written",
        "Add --no-enable-prefix-caching",
        _extraction_prefix_caching,
    ),
    Rule(
        "extraction-kv-cache-dtype",
        "warning",
        "The extraction layer's cache-only attention supports only an auto/bfloat16 KV cache",
        "Drop --kv-cache-dtype on the probe instance",
        _extraction_kv_dtype,
    ),
    Rule(
        "batched-tokens-below-context",
        "error",
        "With chunked prefill off, vLLM refuses to start when --max-num-batched-tokens < --max-model-len",
        "Set --max-num-batched-tokens to --max-model-len (or lower --max-model-len)",
        _batched_below_context,
    ),
    Rule(
        "prefix-caching-mamba-cache-mode",
        "warning",
        "Prefix caching is on but the Mamba cache mode is not pinned to align",
        "Add --mamba-cache-mode align (the recipes pin it; defaults differ between vLLM releases)",
        _prefix_caching_mode,
    ),
    Rule(
        "max-model-len-missing",
        "warning",
        f"No --max-model-len: vLLM sizes for the checkpoint's {NATIVE_CONTEXT} tokens and may not fit, "
        "or you serve a window you did not choose",
        "Set --max-model-len deliberately; Switchyard reads the served value from /v1/models",
        _max_model_len_missing,
    ),
    Rule(
        "long-context-env",
        "warning",
        f"--max-model-len above the checkpoint's max_position_embeddings ({NATIVE_CONTEXT}) is refused by vLLM "
        "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        "Prefix the command with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        _long_context_env,
    ),
    Rule(
        "philox-rounds-default",
        "warning",
        "Stochastic rounding with the default Philox rounds (0 = Triton default); the recipes use 5",
        "Add --mamba-cache-philox-rounds 5",
        _philox_default,
    ),
    Rule(
        "legacy-flag",
        "warning",
        "A flag from older vLLM releases",
        "Remove it (and expect `reasoning`, not `reasoning_content`, in responses)",
        _legacy_flags,
    ),
    Rule(
        "duplicate-flag",
        "warning",
        "A flag is given twice with different values; the last one wins",
        "Keep one occurrence",
        _duplicates,
    ),
    Rule(
        "model-not-lightning",
        "warning",
        "The model is not a Nemotron 3.5 Lightning checkpoint; these rules are tuned for Lightning",
        "Check the model id",
        _model_not_lightning,
    ),
    Rule(
        "open-bind-without-api-key",
        "warning",
        "The server listens on all interfaces without --api-key",
        "Bind --host 127.0.0.1, or set --api-key (and api_key_env on the Switchyard client)",
        _open_bind,
    ),
    Rule(
        "gpu-unknown",
        "warning",
        "GPU unknown: the Mamba backend and stochastic-rounding checks were skipped",
        "Pass --gpu (h100, h200, gb10, b200, a100) or --profile",
        _gpu_unknown,
    ),
)

_NOT_VLLM = Rule(
    "not-vllm-serve",
    "error",
    "Not a vllm serve command",
    "Pass the whole command, e.g. 'vllm serve nvidia/… --flag …'",
    lambda ctx: None,
)


def rule(rule_id: str) -> Rule:
    """The rule with this id."""
    for found in (*RULES, _NOT_VLLM):
        if found.id == rule_id:
            return found
    raise KeyError(rule_id)


def _finding(r: Rule, detail: str) -> Finding:
    return Finding(r.id, r.severity, r.message + (f" — {detail}" if detail else ""), r.fix)


def check_command(
    command: str | list[str] | ServeCommand, gpu: str | Gpu | None = None, *, rules: Iterable[Rule] = RULES
) -> CheckReport:
    """Checks a ``vllm serve`` command against the rule table.

    Args:
        command: The command text (as typed in a shell), its words, or a parsed command.
        gpu: The GPU it will run on (key of :data:`GPUS` or a :class:`Gpu`); ``None`` skips the
            GPU-specific checks and says so.
        rules: The rules to apply (default: all).

    Raises:
        KeyError: Unknown GPU key.
    """
    cmd = command if isinstance(command, ServeCommand) else parse_serve_command(command)
    hw = GPUS[gpu] if isinstance(gpu, str) else gpu
    report = CheckReport(cmd, hw)
    if not cmd.launcher:
        report.findings.append(_finding(_NOT_VLLM, "; ".join(cmd.problems)))
        return report
    ctx = CheckContext(cmd, hw)
    for r in rules:
        detail = r.check(ctx)
        if detail is not None:
            report.findings.append(_finding(r, detail))
    return report


__all__ = [
    "RULES",
    "CheckContext",
    "CheckReport",
    "Finding",
    "Rule",
    "Severity",
    "check_command",
    "chunked_prefill_off",
    "extraction",
    "mamba_backend",
    "rule",
    "ssm_state_dtype",
    "stochastic_rounding",
]
