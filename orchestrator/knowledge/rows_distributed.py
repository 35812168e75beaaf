"""Signature rows about the distributed runtime (nccl_error): NCCL and its `WARN` lines, the collective libraries of
other accelerators (Ascend's HCCL, Intel's oneCCL; their names are vocabulary.DISTRIBUTED's), torch.distributed below
them (c10d, Gloo, rendezvous, the TCP store), InfiniBand/RDMA, Ray under a multi-node engine, the KV transfer engines
of disaggregation. Part of the signature table (see signatures.py for the specificity bands and how the modules make
one table).
"""

from __future__ import annotations

from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.vocabulary import DISTRIBUTED_FAILURE, DISTRIBUTED_NEEDLES
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

DISTRIBUTED_ROWS: tuple[Signature, ...] = (
    # nccl_error: NCCL, the collective libraries of other accelerators, torch.distributed below them, Ray under a
    # multi-node engine, the KV transfer of disaggregation.
    # NCCL's own errors. The watchdog's own notice that it saw `either an error or timeout` says which it was only in
    # the line that follows (`Timeout at NCCL work: N`, a collective operation timeout, an NCCL error). The error NCCL
    # returns names only its class (`remote process exited or there was a network error`, `unhandled system error`)
    # and points at NCCL's debug output for the details: a `WARN` line stating the failure (nccl_warn_failure) is
    # that detail, so it ranks above this row.
    sig("nccl_error", C.NCCL_ERROR, 75,
        r"[NR]CCL [Ee]rror|nccl(?:System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)Error"
        r"|DistBackendError|Watchdog caught collective operation timeout|\bTimeout at NCCL work\b",
        ("NCCL", "nccl", "RCCL", "DistBackendError", "Watchdog caught collective"), any_level=True,
        example="RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"),
    # ProcessGroupNCCL's own report of an error its watchdog or a collective met (`NCCL watchdog thread terminated with
    # exception: CUDA error: ...`): a statement of the distributed runtime, below the cause it quotes when that cause
    # has a row of its own (an illegal access, a capture violation, out of memory), above a bare CUDA error.
    sig("process_group_nccl_report", C.NCCL_ERROR, 67,
        r"ProcessGroupNCCL(?!.{0,120}either an error or timeout).{0,80}(?:[Ee]rror|timeout)", "ProcessGroupNCCL",
        any_level=True,
        example="[E ProcessGroupNCCL.cpp:915] [Rank 0] NCCL watchdog thread terminated with exception: CUDA error: "
        "unspecified launch failure"),
    # NCCL's shared-memory transport cannot create its segment (`/dev/shm` too small, as in a container's 64 MB
    # default): the line NCCL gives as its "Last error", more specific than the wrapper that reports it.
    sig("nccl_shm_segment", C.NCCL_ERROR, 82,
        r"Error while (?:creating|attaching to|mapping|opening|truncating) shared memory segment",
        "shared memory segment", any_level=True,
        example="Error while creating shared memory segment /dev/shm/nccl-F9ffgB (size 9637888)"),
    # A CUDA call that failed inside a collective's own kernel (vLLM's and SGLang's custom all-reduce print
    # `Failed: Cuda error <file>:<line> '<reason>'`, with no level): the distributed runtime failed, at any level. A
    # reason that names a cause of its own (out of memory, an illegal access) is told by those rows, which rank higher.
    # The same check raised as an exception whose message is the CUDA error's string and the kernel's source line
    # (`RuntimeError: invalid argument` then `.../custom_all_reduce.cuh:350`, read as one message).
    sig("collective_cuda_error", C.NCCL_ERROR, 74,
        r"(?:(?i:cuda (?:error|failure)) |^(?:[\w.]+\.)?[A-Z]\w*Error: [^:]{1,80}? )"
        r"\S*(?i:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|nccl|collective)\S*\.(?:cuh?|cc|cpp|hpp|h):\d+"
        r"|(?i:cuda (?:error|failure)) \S*(?i:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|nccl|collective)"
        r"\S*:\d+",
        ("uda error", "uda failure", "UDA error", "Error: "), any_level=True,
        example="Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'"),
    # torch.distributed's network error by its type, and its store or rendezvous stating a `timeout` (failures in other
    # words are vocabulary.DISTRIBUTED's, read by distributed_failure).
    sig("dist_init_failed", C.NCCL_ERROR, 60,
        r"DistNetworkError|(?:c10d|TCPStore|gloo|init_process_group).{0,80}\btime ?out\b",
        ("DistNetworkError", "c10d", "TCPStore", "gloo", "init_process_group"),
        example="torch.distributed.DistNetworkError: The client socket has timed out after 600s while trying to "
        "connect to (127.0.0.1, 29500)."),
    # Gloo's full mesh left incomplete at rendezvous: its connectivity report (`[Gloo] Rank 8 is NOT connected to: [1]`,
    # logged at INFO after `is connected to 14 peer ranks. Expected number of connected peer ranks is : 15`) names the
    # peers a rank could not reach; what follows is the wait for them (a start-up timeout). A server that starts after
    # it outlived it (survival applies).
    sig("gloo_mesh_incomplete", C.NCCL_ERROR, 60, r"\bRank \d+ is NOT connected to:? ", "is NOT connected to",
        any_level=True, example="[Gloo] Rank 8 is NOT connected to: [1]"),
    # Ray, the runtime that places a multi-node engine's workers, that cannot give the engine its GPUs (none on the
    # node the driver runs on, a placement group it cannot create): the distributed runtime failed to set up, like a
    # rendezvous that cannot connect. Fewer GPUs than the parallel sizes ask is the sizes' (rows_config.py).
    sig("ray_placement_failed", C.NCCL_ERROR, 62,
        r"Ray does not allocate any GPUs on the driver node"
        r"|(?i:placement group .{0,80}(?:cannot|could not|failed to) (?:be )?(?:created|scheduled"
        r"|placed|fulfilled))",
        ("Ray does not allocate", "placement group"),
        example="ValueError: Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement "
        "group or running the driver on a GPU node."),
    sig("distributed_failure", C.NCCL_ERROR, 62, DISTRIBUTED_FAILURE.pattern,
        DISTRIBUTED_NEEDLES, any_level=True,
        example="RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error / connectFullMesh "
        "failed"),
    # The KV transfer engine of prefill/decode disaggregation (Mooncake, NIXL, Ascend's) moves the cache between
    # servers over RDMA: one that does not start is the distributed runtime failing, like a rendezvous that fails.
    sig("kv_transfer_engine_init", C.NCCL_ERROR, 62,
        r"(?i:\b(?:mooncake|nixl|(?:kv[ _-]?)?transfer[ _-]?engine)\b.{0,80}\b(?:initiali[sz]ation|init|start(?:up)?)\b"
        r".{0,20}\b(?:failed|error)\b)",
        ("ooncake", "OONCAKE", "ixl", "IXL", "ransfer", "RANSFER"), phase=P.MODEL_LOAD,
        example="RuntimeError: Ascend Transfer Engine initialization failed."),
    # An RDMA work request that completed in error (ibverbs' completion statuses: the transport retry counter
    # exceeded, a local protection or remote access error, a flushed request), as a KV transfer engine or a
    # communicator logs it: the network between the servers failed under the distributed runtime.
    sig("rdma_completion_error", C.NCCL_ERROR, 64,
        r"(?i:\b(?:transport|RNR) retry counter exceeded|\blocal protection error\b|\bremote access error\b"
        r"|\bwork request flushed error\b)|\bIBV_WC_(?!SUCCESS)[A-Z_]+_ERR\b",
        ("retry counter exceeded", "protection error", "access error", "lushed error", "IBV_WC_"),
        example="E0101 00:00:00.000001  100 worker_pool.cpp:290] Worker: Process failed for slice (opcode: 1, "
        "local_nic: mlx5_0, peer_nic: 10.0.0.2:15000@mlx5_0, retry_cnt: 0): transport retry counter exceeded"),
    # NCCL's own `WARN` line stating a failure, at any level: a CUDA or NCCL error, a verbs or network call that
    # failed, a connection aborted, reset or timed out. A refused connection alone is one try NCCL repeats; the retries
    # running out (`exceeded error retry count`) fail.
    sig("nccl_warn_failure", C.NCCL_ERROR, 76,
        r"NCCL WARN .{0,200}(?:(?i:cuda failure)|[Uu]nhandled|nccl\w+Error|\bibv_\w+ failed|NET/\w+ ?: .{0,80}"
        r"(?:error|failed)|[Cc]onnection (?:abort|reset)|[Tt]imeout|timed out"
        r"|Call to \w+ failed|[Bb]ootstrap.{0,60}failed|[Ee]rror while|No route to host"
        r"|[Nn]etwork is unreachable|[Ff]ailed to (?!CUDA (?:malloc|calloc))|\b[Nn]o \w+ (?:interface|device)s? found"
        r"|Minimum requirement is|with status=[1-9]|vendor err|[Uu]nable to|exceeded .{0,40}retr"
        r"|already checked in|[Aa]ttempt to use|[Mm]ismatch)",
        "NCCL WARN", any_level=True,
        example="node1:1234:5678 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'invalid device function'"),
    # Intel's oneCCL, the XPU's collective library, tags its own errors `|CCL_ERROR|`: the distributed runtime failed,
    # as NCCL's `NCCL WARN` failures say on CUDA. (oneCCL named in prose is vocabulary.DISTRIBUTED's, as HCCL is.)
    sig("ccl_error", C.NCCL_ERROR, 72, r"\|CCL_ERROR\|", "CCL_ERROR", any_level=True,
        example="|CCL_ERROR| exchange_utils.cpp:202 sendmsg_fd: condition !check_msg_retval(\"sendmsg\", ...) failed"),
    # Ray's own runtime under a multi-node engine: a worker that cannot register with its raylet, a GCS that cannot be
    # reached. The cluster the collectives run on failed, not the model.
    sig("ray_runtime_failed", C.NCCL_ERROR, 62,
        r"\b(?:Failed|Unable) to register worker\b.{0,120}\b[Rr]aylet\b"
        r"|\bRayletClient\b.{0,80}(?i:\b(?:unable|fail\w*)\b)"
        r"|\bGCS\b.{0,60}(?i:\b(?:unreachable|failed to connect|connection (?:refused|lost)"
        r"|not (?:reachable|respond\w*))\b)",
        ("register worker", "RayletClient", "GCS"), any_level=True,
        example="[2024-06-13 16:11:51,588 E 13261 13261] core_worker.cc:228: Failed to register worker 0100ff to "
        "Raylet. IOError: [RayletClient] Unable to register worker with raylet. No such file or directory"),
    # Ascend CANN reports an error as `E<module><4 digits>: [PID: n] <time> <message>`; the module letter I is HCCL,
    # the NPU's collective library: its errors are the distributed runtime's, as NCCL's are.
    sig("hccl_error_code", C.NCCL_ERROR, 66, r"(?:^|[\s:\]])EI\d{4}:", "EI",
        any_level=True,
        example="EI0009: [PID: 2225827] 2025-09-24-20:59:48.119.066 Transport init error. Reason: [Create][DestLink]"
        "Create Dest error!"),
)
