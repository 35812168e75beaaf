"""Python traceback frames of SGLang's code paths, where each simulated failure is raised from.

A frame is (file, line, function, source line). Files under `S/` are SGLang's, `T/` torch's, `P/` any other
site-package. Line numbers are plausible, not exact: nothing should match on them.
"""

from __future__ import annotations

from orchestrator.sim.releases import SGLANG, SITE

Frame = tuple[str, int, str, str]

ARG_PARSE: tuple[Frame, ...] = (
    ("<frozen runpy>", 198, "_run_module_as_main", ""),
    ("<frozen runpy>", 88, "_run_code", ""),
    ("S/launch_server.py", 32, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
    ("S/srt/server_args.py", 5592, "prepare_server_args", "return ServerArgs.from_cli_args(raw_args)"),
    ("S/srt/server_args.py", 5078, "from_cli_args", "return cls(**{attr: getattr(args, attr) for attr in attrs})"),
    ("<string>", 331, "__init__", ""),
    ("S/srt/server_args.py", 722, "__post_init__", "self._handle_attention_backend_compatibility()"),
    ("S/srt/server_args.py", 1841, "_handle_attention_backend_compatibility", "raise ValueError("),
)

_SCHEDULER_INIT: tuple[Frame, ...] = (
    ("S/srt/managers/scheduler.py", 2863, "run_scheduler_process", "scheduler = Scheduler("),
    ("S/srt/managers/scheduler.py", 352, "__init__", "self.init_model_worker()"),
    ("S/srt/managers/scheduler.py", 548, "init_model_worker", "self.tp_worker = TpModelWorker("),
    ("S/srt/managers/tp_worker.py", 247, "__init__", "self._model_runner = ModelRunner("),
    ("S/srt/model_executor/model_runner.py", 371, "__init__", "self.initialize(min_per_gpu_memory)"),
)

_STARTUP_TAILS: dict[str, tuple[Frame, ...]] = {
    "import": (
        (
            "S/srt/model_executor/model_runner.py",
            441,
            "initialize",
            "min_per_gpu_memory = self.init_torch_distributed()",
        ),
    ),
    "model_load": (
        ("S/srt/model_executor/model_runner.py", 470, "initialize", "self.load_model()"),
        ("S/srt/model_executor/model_runner.py", 893, "load_model", "self.model = self.loader.load_model("),
        ("S/srt/model_loader/loader.py", 671, "load_model", "self.load_weights_and_postprocess("),
        ("S/srt/model_loader/loader.py", 687, "load_weights_and_postprocess", "model.load_weights(weights)"),
    ),
    "memory_alloc": (
        ("S/srt/model_executor/model_runner.py", 512, "initialize", "self.init_memory_pool(min_per_gpu_memory)"),
        ("S/srt/model_executor/model_runner.py", 1785, "init_memory_pool", "self.token_to_kv_pool = MLATokenToKVPool("),
        ("S/srt/mem_cache/memory_pool.py", 1202, "__init__", "self._create_buffers()"),
    ),
    "cuda_graph_capture": (
        ("S/srt/model_executor/model_runner.py", 541, "initialize", "self.init_device_graphs()"),
        (
            "S/srt/model_executor/model_runner.py",
            2104,
            "init_device_graphs",
            "self.graph_runner = CudaGraphRunner(self)",
        ),
        ("S/srt/model_executor/cuda_graph_runner.py", 379, "__init__", "self.capture()"),
        ("S/srt/model_executor/cuda_graph_runner.py", 498, "capture", ") = self.capture_one_batch_size(bs, forward)"),
        ("S/srt/model_executor/cuda_graph_runner.py", 657, "capture_one_batch_size", "run_once()"),
        ("S/srt/model_executor/cuda_graph_runner.py", 644, "run_once", "logits_output_or_pp_proxy_tensors = forward("),
    ),
}

_EVENT_LOOP: tuple[Frame, ...] = (
    ("S/srt/managers/scheduler.py", 2871, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("T/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
    ("S/srt/managers/scheduler.py", 1012, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
    ("S/srt/managers/scheduler.py", 2036, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
)

FORWARD: tuple[Frame, ...] = (
    (
        "S/srt/managers/tp_worker.py",
        402,
        "forward_batch_generation",
        "logits_output, can_run_cuda_graph = self.model_runner.forward(",
    ),
    ("S/srt/model_executor/model_runner.py", 2265, "forward", "output = self._forward_raw("),
    ("S/srt/model_executor/model_runner.py", 2318, "_forward_raw", "ret = self.forward_decode("),
    ("S/srt/model_executor/model_runner.py", 2187, "forward_decode", "return self.model.forward("),
    ("T/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
)

SAMPLE: tuple[Frame, ...] = (
    (
        "S/srt/managers/tp_worker.py",
        417,
        "forward_batch_generation",
        "next_token_ids = self.model_runner.sample(logits_output, forward_batch)",
    ),
    ("S/srt/model_executor/model_runner.py", 2356, "sample", "next_token_ids = self.sampler("),
    ("T/nn/modules/module.py", 1775, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("T/nn/modules/module.py", 1786, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("S/srt/layers/sampler.py", 135, "forward", "batch_next_token_ids = top_k_top_p_min_p_sampling_from_probs_torch("),
    (
        "S/srt/layers/sampler.py",
        318,
        "top_k_top_p_min_p_sampling_from_probs_torch",
        "sampled_index = torch.multinomial(probs_sort, num_samples=1)",
    ),
)

PROCESS_RESULT: tuple[Frame, ...] = (
    ("S/srt/managers/scheduler.py", 2871, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("T/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
    ("S/srt/managers/scheduler.py", 1027, "event_loop_overlap", "self.process_batch_result(tmp_batch, tmp_result)"),
    ("S/srt/managers/scheduler.py", 2240, "process_batch_result", "self.process_batch_result_decode(batch, result)"),
    (
        "S/srt/managers/scheduler_output_processor_mixin.py",
        312,
        "process_batch_result_decode",
        "next_token_ids = next_token_ids.tolist()",
    ),
)

GRAPH_RAISE: tuple[Frame, ...] = (
    *_SCHEDULER_INIT,
    *_STARTUP_TAILS["cuda_graph_capture"][:3],
    ("S/srt/model_executor/cuda_graph_runner.py", 381, "__init__", "raise Exception("),
)


_ROOTS = {"S/": SGLANG, "T/": f"{SITE}/torch", "P/": SITE}


def phase_frames(phase: str) -> tuple[Frame, ...]:
    """The frames from a scheduler's entry point down to where `phase` does its work."""
    if phase in _STARTUP_TAILS:
        return _SCHEDULER_INIT + _STARTUP_TAILS[phase]
    return _EVENT_LOOP


def render(frames: tuple[Frame, ...]) -> list[str]:
    """`Traceback (most recent call last):` and the frames, as Python prints them."""
    lines = ["Traceback (most recent call last):"]
    for file, line, func, source in frames:
        root = _ROOTS.get(file[:2])
        path = f"{root}/{file[2:]}" if root else file
        lines.append(f'  File "{path}", line {line}, in {func}')
        if source:
            lines.append(f"    {source}")
    return lines
