#!/usr/bin/env bash
# orchestrator run r-multi: launches the server exactly as the sweep did.
# Secrets are not stored here: export them in your environment before running this script.
set -u
export CUDA_VISIBLE_DEVICES=2,3
cd <workdir>/runs/r-multi 2>/dev/null || true
exec python -m sglang.launch_server --model-path /m --tp-size 2 --cuda-graph-bs 1 2 4 --host 127.0.0.1 --port 30100
