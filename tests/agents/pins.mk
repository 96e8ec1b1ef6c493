# Agent versions the matrix (tests/agents) runs; `make agents` installs exactly these into .agents/.
# Keep in sync with VERSIONS in tests/agents/launchers.py (tests/agents/test_pins.py checks it).
NPM_AGENTS    := @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @qwen-code/qwen-code@0.24.4 @anthropic-ai/sdk@1.15.0
PY_AGENTS     := anthropic==2.15.0 openai-agents==0.24.0 langchain-openai==1.7.4 langchain-anthropic==1.7.10 litellm==1.110.2 smolagents==1.26.0
HERMES_AGENT  := hermes-agent==0.19.0
