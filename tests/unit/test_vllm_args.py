"""Parsing vllm serve command lines the way vLLM reads them."""

from __future__ import annotations

from switchyard.serving.vllm_args import parse_serve_command, split_command


def test_flag_forms_and_underscores() -> None:
    cmd = parse_serve_command(
        "vllm serve nvidia/M --max-model-len=65536 --max_num_seqs 8 --enable-prefix-caching "
        "--no-enable-chunked-prefill --mamba-backend flashinfer"
    )
    assert cmd.launcher == "vllm serve"
    assert cmd.model == "nvidia/M"
    assert cmd.value("max-model-len") == "65536"
    assert cmd.int_value("max-num-seqs") == 8
    assert cmd.enabled("enable-prefix-caching") is True
    assert cmd.enabled("enable-chunked-prefill", default=True) is False
    assert cmd.explicitly_disabled("enable-chunked-prefill")
    assert not cmd.explicitly_disabled("enable-prefix-caching")
    assert cmd.value("mamba-backend") == "flashinfer"


def test_switch_does_not_swallow_the_next_word() -> None:
    cmd = parse_serve_command("vllm serve --enable-auto-tool-choice nvidia/M --trust-remote-code")
    assert cmd.model == "nvidia/M"
    assert cmd.options["enable-auto-tool-choice"] is True


def test_json_flag_and_dotted_keys_merge() -> None:
    cmd = parse_serve_command(
        'vllm serve m --speculative-config \'{"method": "mtp", "num_speculative_tokens": 2}\' '
        "--speculative_config.num_speculative_tokens 3 --speculative_config.model nvidia/draft "
        "--kv-transfer-config.kv_connector_extra_config.shared_storage_path /tmp/h "
        "--speculative-config.draft_model_config.hf_config.eagle_aux_hidden_state_layer_ids+ 1 "
        "--speculative-config.draft_model_config.hf_config.eagle_aux_hidden_state_layer_ids+=2,3"
    )
    spec = cmd.json("speculative-config")
    assert spec["method"] == "mtp"
    assert spec["num_speculative_tokens"] == 3  # dotted keys apply on top of the JSON, typed
    assert spec["model"] == "nvidia/draft"
    assert spec["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert cmd.json("kv-transfer-config") == {"kv_connector_extra_config": {"shared_storage_path": "/tmp/h"}}
    assert cmd.has("kv-transfer-config")


def test_invalid_json_is_a_problem_not_an_exception() -> None:
    cmd = parse_serve_command("vllm serve m --speculative-config {model: x}")
    assert cmd.json("speculative-config") == {}
    assert any("--speculative-config: invalid JSON" in p for p in cmd.problems)


def test_env_comments_and_continuations() -> None:
    text = """# Lightning
VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve nvidia/M \\
  --max-model-len 1048576 \\
  --served-model-name a#b \\
  --port 8000
# --port 9000 is only a comment
"""
    cmd = parse_serve_command(text)
    assert cmd.env == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    assert cmd.value("max-model-len") == "1048576"
    assert cmd.value("served-model-name") == "a#b"  # '#' inside a word is not a comment
    assert cmd.value("port") == "8000"
    assert not cmd.repeated


def test_hash_inside_quotes_is_kept() -> None:
    assert split_command("vllm serve m --x '# not a comment' # real comment") == [
        "vllm",
        "serve",
        "m",
        "--x",
        "# not a comment",
    ]


def test_short_aliases_multi_value_and_model_flag() -> None:
    cmd = parse_serve_command(
        "python -m vllm.entrypoints.openai.api_server --model nvidia/M -tp 8 --served-model-name a b --port 1"
    )
    assert cmd.launcher == "api_server"
    assert cmd.model == "nvidia/M"
    assert cmd.value("tensor-parallel-size") == "8"
    assert cmd.value("served-model-name") == "a b"
    assert cmd.value("port") == "1"


def test_docker_launcher_reads_env_and_args() -> None:
    cmd = parse_serve_command(
        "docker run --gpus all -e VLLM_API_KEY=s -v /c:/root/.cache -p 8000:8000 "
        "vllm/vllm-openai:v0.27.1 nvidia/M --enable-auto-tool-choice"
    )
    assert cmd.launcher == "docker"
    assert cmd.env == {"VLLM_API_KEY": "s"}
    assert cmd.model == "nvidia/M"
    assert cmd.enabled("enable-auto-tool-choice")


def test_repeated_flags_keep_the_last_value() -> None:
    cmd = parse_serve_command("vllm serve m --max-num-seqs 8 --max-num-seqs 16")
    assert cmd.value("max-num-seqs") == "16"
    assert cmd.repeated == {"max-num-seqs": ["8", "16"]}


def test_legacy_speculative_flags_fold_into_the_config() -> None:
    cmd = parse_serve_command("vllm serve m --speculative-model nvidia/draft --num-speculative-tokens 4")
    assert cmd.json("speculative-config") == {"model": "nvidia/draft", "num_speculative_tokens": 4}


def test_not_a_vllm_command() -> None:
    cmd = parse_serve_command("python serve.py --port 8000")
    assert cmd.launcher == ""
    assert cmd.problems


def test_word_list_input() -> None:
    cmd = parse_serve_command(["vllm", "serve", "m", "--port", "8001"])
    assert cmd.int_value("port") == 8001
