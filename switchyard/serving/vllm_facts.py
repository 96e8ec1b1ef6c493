"""Facts the ``vllm serve`` rules derive from a parsed command (dtypes, backends, extraction).

Layer: ``serving`` — standard library only.
"""

from __future__ import annotations

from typing import Any

from switchyard.serving.vllm_args import ServeCommand

HIDDEN_STATES_CONNECTOR = "ExampleHiddenStatesConnector"
EXTRACT_METHOD = "extract_hidden_states"


def ssm_state_dtype(cmd: ServeCommand) -> str:
    """The SSM-state dtype vLLM will use (``auto`` resolves to float32 for NemotronH)."""
    for name in ("mamba-ssm-cache-dtype", "mamba-cache-dtype"):
        value = cmd.value(name)
        if value and value.lower() != "auto":
            return value.lower()
    return "auto"


def mamba_backend(cmd: ServeCommand) -> str:
    """The Mamba SSU backend vLLM will use (``triton`` unless set)."""
    return (cmd.value("mamba-backend") or "triton").lower()


def stochastic_rounding(cmd: ServeCommand) -> bool:
    """Whether stochastic rounding of the Mamba state is on."""
    return cmd.enabled("enable-mamba-cache-stochastic-rounding")


def speculative(cmd: ServeCommand) -> dict[str, Any]:
    """The merged ``--speculative-config``."""
    return cmd.json("speculative-config")


def extraction(cmd: ServeCommand) -> bool:
    """Whether the command configures hidden-state extraction (method or connector)."""
    connector = cmd.json("kv-transfer-config").get("kv_connector")
    return speculative(cmd).get("method") == EXTRACT_METHOD or connector == HIDDEN_STATES_CONNECTOR


def chunked_prefill_off(cmd: ServeCommand) -> bool:
    """Whether chunked prefill is explicitly disabled (vLLM's engine enables it by default)."""
    return cmd.explicitly_disabled("enable-chunked-prefill")
