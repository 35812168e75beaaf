"""Where a failure happened when the log shows no startup marker before it: the traceback's frames tell.

The innermost frame that names a phase wins (`capture_one_batch_size` inside `ModelRunner.__init__` is
graph capture). Serving is named only by the loops that serve (`event_loop_*`, `run_batch`, vLLM's
`engine_step`), never by `forward`/`sample`, which also run during warm-up, capture and profiling.
"""

from __future__ import annotations

import re

from orchestrator.harvest.records import Evidence, Hit, TracebackRecord
from orchestrator.knowledge.lines import FRAME_RE
from orchestrator.model import Phase

NEAR_LINES = 50
"""A traceback starting this many lines after an error line (the kernel text before it) explains it."""

FRAME_HINTS: tuple[tuple[re.Pattern[str], Phase], ...] = tuple(
    (re.compile(pattern), phase)
    for pattern, phase in (
        (r"in (?:parse_args|prepare_server_args|parse_cli_args|from_cli_args|check_server_args|_pull_args\w*)$"
         r"|argparse\.py|arg_utils\.py|server_args\.py\", line \d+, in |in create_engine_config$|in _verify_args$",
         Phase.ARG_PARSE),
        (r"in (?:capture|capture_one_batch_size|capture_model|_capture_graph|capture_graph|init_device_graphs)$"
         r"|cuda_graph_runner\.py|cudagraph|torch[/\\]cuda[/\\]graphs\.py", Phase.CUDA_GRAPH_CAPTURE),
        (r"in (?:init_memory_pool|profile_run|profile_max_num_token|determine_num_available_blocks"
         r"|determine_available_memory|_initialize_kv_caches|initialize_cache|init_cache_engine)$|memory_pool\.py",
         Phase.MEMORY_ALLOC),
        (r"in (?:load_model|load_weights|_load_module|weight_loader|load_state_dict|get_model|init_torch_distributed"
         r"|init_distributed_environment|initialize_model_parallel|init_worker_distributed_environment|init_device"
         r"|get_tokenizer|get_processor)$|model_loader|weight_utils\.py|model_runner\.py\", line \d+, in __init__$",
         Phase.MODEL_LOAD),
        (r"in (?:_execute_server_warmup|_wait_and_warmup|warmup\w*|_warmup\w*|warm_up\w*)$", Phase.WARMUP),
        (r"in (?:event_loop\w*|run_batch|run_engine_loop|engine_step|run_busy_loop|_process_engine_step"
         r"|process_input_requests|handle_generate_request)$", Phase.SERVING),
    )
)


def frame_phase(tb: TracebackRecord) -> Phase | None:
    """The phase the innermost phase-naming frame of a traceback belongs to."""
    frames = [line.rstrip() for line in tb.lines if FRAME_RE.search(line)]
    for frame in reversed(frames):
        for pattern, phase in FRAME_HINTS:
            if pattern.search(frame):
                return phase
    modules = sum(1 for f in frames if f.endswith("in <module>"))
    return Phase.IMPORT if modules >= 2 else None


def traceback_of(evidence: Evidence, hit: Hit) -> TracebackRecord | None:
    """The traceback a hit's line is part of, or the one that starts just after it."""
    tbs = evidence.tracebacks
    if hit.traceback is not None and hit.traceback < len(tbs):
        return tbs[hit.traceback]
    line_no = hit.line.line_no
    return next(
        (tb for tb in tbs if tb.line_no <= line_no <= tb.last_line_no or 0 < tb.line_no - line_no <= NEAR_LINES),
        None,
    )
