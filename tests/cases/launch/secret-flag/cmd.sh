#!/usr/bin/env bash
# orchestrator run r-secret: launches the server exactly as the sweep did.
# Secrets are not stored here: export them in your environment before running this script.
set -u
: "${HF_TOKEN:?HF_TOKEN must be set in the environment (a secret, never written to disk)}"
export HF_TOKEN
: "${ORCH_API_KEY:?ORCH_API_KEY must be set in the environment (a secret, never written to disk)}"
export ORCH_API_KEY
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
cd <workdir>/runs/r-secret 2>/dev/null || true
exec python -m sglang.launch_server --model-path /m --tp-size 8 --api-key "${ORCH_API_KEY}" --attention-backend flashinfer --host 127.0.0.1 --port 30000
