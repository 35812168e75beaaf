"""Seam 2: probing a launched server over HTTP (see DESIGN.md data flow).

client.py  the one httpx client; httpx errors become the ProbeErrors of errors.py
wire.py    SGLang's answers (native /generate, OpenAI chat, SSE) read into reply objects
ready.py   the readiness wait: /health_generate, process alive and log markers, interleaved
decode.py  greedy, sampled, streamed, concurrent and liveness-after probes -> ProbeResults
answers.py known-answer and plausibility checks on answer text
"""
