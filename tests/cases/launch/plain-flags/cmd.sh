#!/usr/bin/env bash
# orchestrator run r-plain: launches the server exactly as the sweep did.
# Secrets are not stored here: export them in your environment before running this script.
set -u
export CUDA_VISIBLE_DEVICES=4,5,6,7
export NCCL_DEBUG=WARN
export SGLANG_ENABLE_JIT_DEEPGEMM=1
cd <workdir>/runs/r-plain 2>/dev/null || true
exec python -m sglang.launch_server --model-path /models/GLM-5-NVFP4 --tp-size 4 --mem-fraction-static 0.85 --attention-backend triton --kv-cache-dtype fp8_e4m3 --host 127.0.0.1 --port 31000
