#!/usr/bin/env bash
# orchestrator run r-install: launches the server exactly as the sweep did.
# Secrets are not stored here: export them in your environment before running this script.
set -u
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export LD_LIBRARY_PATH='/opt/sglang nightly/lib'
export NCCL_DEBUG=INFO
cd <workdir>/runs/r-install 2>/dev/null || true
exec '/opt/sglang nightly/bin/python' -m sglang.launch_server --model-path /m --tp-size 8 --attention-backend triton --host 127.0.0.1 --port 30000
