#!/usr/bin/env bash
# orchestrator run r-bare: launches the server exactly as the sweep did.
# Secrets are not stored here: export them in your environment before running this script.
set -u
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
cd <workdir>/runs/r-bare 2>/dev/null || true
exec python -m sglang.launch_server --model-path /m --tp-size 8 --trust-remote-code --disable-cuda-graph --host 127.0.0.1 --port 30000
