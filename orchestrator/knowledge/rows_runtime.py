"""Signature rows about the server process as it runs: hangs and timeouts, kills from outside (the OOM killer, signals,
a scheduler or platform taking the process away), a port already taken, the server's own warm-up request failing,
Python exceptions no other row places, and what says only that something failed or died (native crashes, a fatal
statement, follow-ups such as `Received sigquit` that never beat a cause). Part of the signature table (see
signatures.py for the specificity bands and how the modules make one table).
"""

from __future__ import annotations

from orchestrator.knowledge.kinds import states_not_guesses
from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

NAMED_PYTHON_ERRORS = frozenset({"python_builtin_message"})
"""Rows that name a Python error by its own words: beside a follow-up on the same line they still say what failed."""

RUNTIME_ROWS: tuple[Signature, ...] = (
    # hang_or_timeout: hangs and timeouts.
    sig("watchdog_timeout", C.HANG_OR_TIMEOUT, 55,
        r"(?i:watchdog (?:timeout|timed out|.{0,40}\btime(?:d)? ?out))|Health check failed\. Server couldn't get a "
        r"response|(?i:server (?:failed to start|did not become ready) within)|(?i:\bhang(?:ing)? detected|appears to "
        r"be (?:stuck|hung|hanging)|\bdeadlock detected)",
        ("watchdog", "Watchdog", "Health check failed", "within", "hang", "stuck", "hung", "deadlock"),
        example="Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"),
    # A platform or launcher that gave the server a start-up deadline and saw it pass (Cloud Run's `container failed to
    # start and listen on the port ... within the allocated timeout`, a launcher's `did not become healthy within 600
    # s`, `timed out waiting for the server to start`): the start-up hung or was too slow, whoever says so.
    sig("startup_deadline", C.HANG_OR_TIMEOUT, 56,
        r"(?i:\b(?:failed to|did not|didn't|could not|couldn't|never|unable to) (?:start(?: up)?"
        r"|become (?:ready|healthy)|c[oa]me up|be ready|listen)\b.{0,160}?\bwithin (?:the )?(?:\w+ ){0,2}(?:timeout"
        r"|time ?limit|deadline|\d+(?:\.\d+)? ?(?:s|secs?|seconds?|m|mins?|minutes?)\b)|\btimed? ?out waiting for "
        r"(?:the )?(?:server|container|model server|endpoint|instance|pod|service|replica)s? to (?:start|become ready"
        r"|be ready|come up|listen))",
        ("within", "Within", "WITHIN", "waiting for", "Waiting for", "WAITING FOR"), phase=P.WARMUP, any_level=True,
        example="ERROR: (gcloud.run.deploy) The user-provided container failed to start and listen on the port "
        "defined provided by the PORT=8080 environment variable within the allocated timeout."),
    sig("engine_handshake_timeout", C.HANG_OR_TIMEOUT, 55,
        r"(?i)timed out waiting for (?:the )?engines?|engine core .{0,30}(?:handshake|ready).{0,30}time",
        ("imed out waiting", "ngine core"), phase=P.WARMUP,
        example='raise TimeoutError("Timed out waiting for engines to send"'),
    sig("timeout", C.HANG_OR_TIMEOUT, 40, r"\bTimeoutError\b|(?i:\btimed out\b)|\bdeadline exceeded\b",
        ("TimeoutError", "imed out", "eadline exceeded"), example="TimeoutError: timed out"),
    # Something waited for that never came: `timed out waiting for clients`, a store or a peer that did not answer, a
    # watchdog stuck behind a hung call. Said of the distributed runtime too, it is a timeout (the runtime raised no
    # error of its own). The engines' handshake has its own row, which knows its phase.
    sig("timed_out_waiting", C.HANG_OR_TIMEOUT, 63,
        r"(?i:\btimed? ?out (?:after [\d.]+ ?\w+ )?(?:while )?waiting (?:for|on)\b(?! (?:the )?(?:new )?engine))"
        r"|(?i:\bwatchdog got stuck\b)",
        ("imed out", "IMED OUT", "ime out", "Timeout waiting", "watchdog got stuck"), any_level=True,
        example="torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients "
        "joined."),
    # A deadline that passed, in any wording: a step that did not happen within its time (`failed to report ZMQ
    # addresses within timeout=30 seconds`, `did not return within 120s`), or was still not ready after waiting.
    sig("deadline_passed", C.HANG_OR_TIMEOUT, 56,
        r"(?i:\b(?:did not|didn't|failed to|could not|couldn't|cannot|can't|never|unable to|not)\b.{0,120}?\bwithin "
        r"(?:the )?(?:timeout\b|\w*timeout\w*\W|[\d.]+ ?(?:s|ms|secs?|seconds?|m|mins?|minutes?|h|hours?)\b)"
        r"|\bnot ready after waiting\b)",
        ("within", "Within", "WITHIN", "after waiting"), any_level=True,
        example="RuntimeError: DP Coordinator process failed to report ZMQ addresses within timeout=30 seconds during "
        "startup."),
    sig("c10d_wait_timeout", C.HANG_OR_TIMEOUT, 66,
        r"waitForInput.{0,200}(?i:tim(?:ed? ?out|eout))|\bSocket Timeout\b", ("waitForInput", "Socket Timeout"),
        any_level=True,
        example="[E socket.cpp:1013] [c10d] waitForInput: poll for socket returned 0, likely a timeout"),
    # Ray cannot place the bundles the engine asked for (too few GPUs, a node missing, GPUs of another type): vLLM
    # logs the wait at INFO each time it doubles, and the start-up hangs. A server that starts after the wait outlived
    # it (survival applies, as to any hang).
    sig("ray_placement_wait", C.HANG_OR_TIMEOUT, 52,
        r"(?i:\bwaiting for (?:creating |the )?(?:a )?placement group\b"
        r"|\bplacement group\b.{0,80}\b(?:pending|not (?:yet )?(?:ready|created|placed|scheduled))\b"
        r"|\bcannot be scheduled right now\b)",
        ("lacement group", "cannot be scheduled right now", "Waiting for", "The actor or task"), any_level=True,
        example="INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of specs for 150 "
        "seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]."),
    # vLLM's API server waiting on its engine core processes (logged at DEBUG every ten seconds until the handshake):
    # a log that stops there is a start-up that hung. A crash the engine reports outranks it, and a server that
    # starts after the wait outlived it (survival applies, as to any hang).
    sig("engine_core_start_wait", C.HANG_OR_TIMEOUT, 44,
        r"\bWaiting for \d+ (?:local(?:, \d+ remote)? )?core engine proc\(s\) to (?:start|connect)\b",
        "core engine proc", any_level=True,
        example="(APIServer pid=1) DEBUG 04-12 21:38:28 [v1/engine/utils.py:1143] Waiting for 1 local, 0 remote core "
        "engine proc(s) to start."),
    # A scheduler that ended the job at its time limit (Slurm's `*** JOB 12 ON node CANCELLED AT <time> DUE TO TIME
    # LIMIT ***`): the run hung or was too slow and was killed at the deadline.
    sig("job_time_limit", C.HANG_OR_TIMEOUT, 58,
        r"\bCANCELLED AT \S+ DUE TO TIME LIMIT\b|\bTIME LIMIT\b.{0,40}\bexceeded\b",
        ("DUE TO TIME LIMIT", "TIME LIMIT"), any_level=True,
        example="slurmstepd: error: *** JOB 4242 ON gpu-node-3 CANCELLED AT 2025-01-01T10:00:00 DUE TO TIME LIMIT ***"),
    # A process that stopped answering its peers' liveness checks (vLLM's `No heartbeat received from MQLLMEngine`): it
    # hangs or is stuck, whatever killed it afterwards.
    sig("heartbeat_lost", C.HANG_OR_TIMEOUT, 50,
        r"(?i:\bno heartbeats? (?:received|from)\b|\bheartbeats? (?:timeout|timed out|missed|lost|failed)\b"
        r"|\b(?:became|is|has become) (?:unresponsive|not responding)\b)",
        ("heartbeat", "Heartbeat", "HEARTBEAT", "unresponsive", "not responding"),
        example="TimeoutError: No heartbeat received from MQLLMEngine"),
    # process_killed: killed from outside (the OOM killer, a signal, a scheduler or platform).
    # The kernel's OOM killer, and memory monitors that kill workers: the cause, whatever follows. The killer named as
    # a mere possibility (`If exit code is -9 (SIGKILL), a common cause is the OS OOM killer`) kills nothing.
    sig("oom_killer", C.PROCESS_KILLED, 75,
        r"(?i)\boom[-_ ]?kill(?!er\b)|\b(?:by|from|invoked) (?:the )?(?:os |linux |kernel(?:'s)? )?oom[-_ ]?killer"
        r"|Out of memory: Kill(?:ed)? process|oom_reaper|killed (?:by|due to) (?:the )?(?:linux )?"
        r"(?:oom|out[- ]of[- ]memory)|memory monitor.{0,80}kill|due to (?:host|system|node) (?:memory|OOM)"
        r"|worker.{0,60}killed.{0,60}(?:memory|OOM)|killed due to memory pressure|memory usage threshold.{0,200}\bkill",
        ("oom", "OOM", "Oom", "Out of memory", "memory monitor", "memory", "killed"), any_level=True,
        vocabulary=states_not_guesses, example="Out of memory: Killed process 12345 (python3) total-vm:812345678kB"),
    # Ray's memory monitor names its kill an OutOfMemoryError; the memory is the host's, and the process was killed.
    sig("host_memory_kill", C.PROCESS_KILLED, 82, r"(?i)killed due to the node running low on memory",
        "running low on memory", any_level=True,
        example="ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."),
    # A process whose exit status is stated as the kill signal's (-9, or 137 from a shell), or a child that Python's
    # subprocess says `died with <Signals.SIGKILL: 9>` (or SIGTERM, SIGHUP, SIGINT: CalledProcessError's wording for a
    # child a signal ended), was killed: a statement,
    # unlike a bare `Killed`; a `(SIGKILL)` that glosses a -9 only explains the code, which decides (SGLang's `exit
    # code: -3 ... If exit code is -9 (SIGKILL), a common cause is ...` names no kill).
    sig("killed_exit_status", C.PROCESS_KILLED, 60,
        r"(?i)\b(?:exit ?code|exitcode|exit status|return ?code|returncode)\s*[:=]?\s*(?:-9|137)\b"
        r"|\bexit(?:ed)? ?(?:with )?(?:code|status)[:= ]*(?:-9|137)\b"
        r"|\bdied with <Signals\.SIG(?:KILL|TERM|HUP|INT): \d+>",
        ("xit", "XIT", "eturn", "died with <Signals."), any_level=True, by_signal=True,
        example="RuntimeError: Rank 0 scheduler died during initialization (exit code: -9)."),
    sig("killed", C.PROCESS_KILLED, 15,
        r"^Killed\b|\d Killed\s|\bKilled\s*$|\b[Ss]ignal 9\b|(?<!-9 \()SIGKILL",
        ("Killed", "ignal 9", "SIGKILL"), vocabulary=states_not_guesses, by_signal=True,
        example="Killed"),
    # The scheduler or the platform took the process away for a reason of its own: a job preempted, requeued or lost
    # with its node (Slurm's `CANCELLED AT <time> DUE TO PREEMPTION`), a pod evicted (Kubernetes), a spot instance
    # reclaimed. A vLLM sequence group `preempted` for KV space is the engine's own scheduling, not a kill: the words
    # must name a job, pod, node or instance.
    sig("taken_away", C.PROCESS_KILLED, 62,
        r"\bCANCELLED AT \S+ DUE TO (?!TIME LIMIT)"
        r"|\bThe node was low on resource\b"
        r"|(?i:\b(?:pod|node|instance|vm|job|container)\b[^.]{0,60}\b(?:was |has been |got |is being )?"
        r"(?:preempted|evicted)\b|\bspot instance\b.{0,60}\b(?:interrupt\w*|reclaim\w*|terminat\w*)\b)",
        ("CANCELLED AT", "The node was low on resource", "reempted", "victed", "Spot instance", "spot instance",
         "REEMPTED", "VICTED", "Preempted", "Evicted"), any_level=True,
        example="Warning  Evicted  kubelet  The node was low on resource: memory. Container vllm was using 60Gi."),
    # A job cancelled by its owner or its own script (slurmstepd's `*** STEP 12.0 ON node CANCELLED AT <time> ***`,
    # what it prints for a SIGTERM or SIGKILL sent by scancel or by the job's end, with no `DUE TO` reason): killed from
    # outside during start-up; once the server was ready, the run's end (a stop asked from outside, survival.py).
    sig("job_cancelled", C.PROCESS_KILLED, 62, r"\bCANCELLED AT \S+ \*\*\*", "CANCELLED AT", any_level=True,
        stop=True, example="slurmstepd: error: *** STEP 4242.1 ON gpu-node-3 CANCELLED AT 2025-01-01T10:00:00 ***"),
    # A stop asked from outside, in the words of the process that received it: SGLang's `SIGTERM received. ... Draining
    # requests and shutting down...`, vLLM's `[shutdown] API server: shutdown triggered` and `[shutdown] EngineCore:
    # trigger received signal=SIGTERM` (their SIGTERM/SIGINT handlers), torch elastic's `Received Signals.SIGTERM death
    # signal, shutting down workers` and the `SignalException: Process N got signal: 15` it raises, hf-xet's
    # `Cancellation requested; stopping current tasks.` on Ctrl-C. During start-up it is the kill, below every cause
    # stated before it (a failing API server stops its engine the same way); once the server was ready it begins the
    # shutdown, and what is logged from there on is no cause (survival.py). SGLang's `Received sigquit from a child
    # process` is no such stop: a child that failed sends it.
    sig("stop_requested", C.PROCESS_KILLED, 9,
        r"\bSIG(?:TERM|INT) received\b|\[shutdown\] API server: shutdown triggered\b"
        r"|\btrigger received signal=SIG(?:TERM|INT)\b"
        r"|\bReceived (?:Signals\.)?(?:SIG(?:TERM|INT|HUP)|15|2|1) death signal\b"
        r"|\bSignalException: Process \d+ got signal: (?:15|2|1)\b|\bCancellation requested; stopping current tasks\b",
        ("SIGTERM received", "SIGINT received", "shutdown triggered", "trigger received signal", "death signal",
         "got signal: ", "Cancellation requested"), generic=True, any_level=True, stop=True,
        example="SIGTERM received. signum=None frame=None. Draining requests and shutting down..."),
    # port_in_use: ports.
    sig("port_in_use", C.PORT_IN_USE, 85,
        r"(?i)address already in use|\[Errno 98\]|EADDRINUSE|is not available in \d+ seconds"
        r"|port (?:\d+ )?is (?:already )?(?:in use|occupied)",
        ("ddress already in use", "Errno 98", "EADDRINUSE", "is not available in", "already in use", "occupied"),
        example="zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:30233')"),
    # warmup_request_failed: the server's own warm-up request.
    sig("warmup_failed", C.WARMUP_REQUEST_FAILED, 60, r"Initialization failed\. warmup error",
        "Initialization failed", phase=P.WARMUP, wraps=True,
        example="Initialization failed. warmup error: Traceback (most recent call last):"),
    sig("warmup_statement", C.WARMUP_REQUEST_FAILED, 61,
        r"(?i)\bwarm-?up (?:request )?failed|\bdid not become ready at https?://",
        ("warmup", "Warmup", "warm-up", "did not become ready"), phase=P.WARMUP,
        example="RuntimeError: HTTP server did not become ready at http://[::1]:10762/health"),
    sig("warmup_status", C.WARMUP_REQUEST_FAILED, 62, r"res=<Response \[(?:[1-35]\d\d|4\d\d)\]>",
        "res=<Response", phase=P.WARMUP, example="AssertionError: res=<Response [403]>, res.text='Forbidden'"),
    # python_exception_other: any Python exception, and Python's own errors quoted without their type.
    # Any Python exception: a class named as one, or any class of a package's exceptions module, whatever its name
    # (`torch._dynamo.exc.Unsupported`, `triton.runtime.errors.OutOfResources`, `ray.exceptions.ActorDiedError`).
    # PyTorch's C++ backtrace header (`Exception raised from malloc at <file>:<line> (most recent call first):`, after a
    # c10::Error's message) is no exception of its own.
    sig("python_exception", C.PYTHON_EXCEPTION_OTHER, 20,
        r"^(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception)\b(?! raised from \S+ at )"
        r"|^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Failed|Failure|Fault)(?::|\s*$)"
        r"|^(?:[a-z_]\w*\.)+(?:exc|exceptions?|errors?)\.[A-Z]\w*(?::|\s*$)",
        ("Error", "Exception", "Failed", "Failure", "Fault", ".exc.", ".exceptions.", ".errors.", ".error."),
        example="AttributeError: 'NoneType' object has no attribute 'shape'"),
    # A failure stated in words, with no exception: a C++/CUDA assertion, `RuntimeError`-less fatal messages.
    sig("assertion_failed", C.PYTHON_EXCEPTION_OTHER, 22,
        r"Assertion [`'\"(]?.{1,200}[`'\")]? failed|: Assertion .{1,200} failed\.?$|\bassert(?:ion)? failed\b",
        ("Assertion", "assert"),
        example="/src/rotary.cu:72: void rope(): Assertion `q.size(1) == cos.size(0)' failed."),
    sig("scheduler_exception", C.PYTHON_EXCEPTION_OTHER, 18, r"\w hit an exception", "hit an exception",
        generic=True, example="Scheduler hit an exception: Traceback (most recent call last):"),
    sig("traceback", C.PYTHON_EXCEPTION_OTHER, 4, r"Traceback \(most recent call last\)", "Traceback",
        example="Traceback (most recent call last):"),
    # An operating system error's own words (strerror) carried by a socket, zmq or OS exception: a system call failed,
    # which says nothing about a configuration the engine refuses (`ZMQError: Operation not supported`).
    sig("os_error_message", C.PYTHON_EXCEPTION_OTHER, 42,
        r"^(?:[\w.]+\.)?(?:ZMQError|OSError|IOError|PermissionError|BlockingIOError|socket\.error): (?:\[Errno \d+\] )?"
        r"(?:Operation not (?:supported|permitted)|Permission denied|Bad file descriptor"
        r"|Resource temporarily unavailable|Too many open files)\b",
        ("ZMQError", "OSError", "IOError", "PermissionError", "BlockingIOError", "socket.error"),
        example="zmq.error.ZMQError: Operation not supported"),
    # Python's built-in errors state themselves in fixed words; quoted without their type (a server's `Failed to start
    # model server: integer division or modulo by zero`), they are still that Python exception.
    sig("python_builtin_message", C.PYTHON_EXCEPTION_OTHER, 20,
        r"\b(?:integer division or modulo by zero|(?:float )?division by zero|(?:list|tuple|string) index out of range"
        r"|object is not (?:subscriptable|callable|iterable)|unsupported operand type\(s\) for"
        r"|not enough values to unpack|too many values to unpack|missing \d+ required positional arguments?"
        r"|got an unexpected keyword argument"
        r"|takes \d+ positional arguments? but \d+ (?:were|was) given|maximum recursion depth exceeded"
        r"|dictionary changed size during iteration|cannot unpack non-iterable|referenced before assignment)\b",
        ("division", "index out of range", "object is not", "unsupported operand", "values to unpack",
         "required positional", "unexpected keyword", "positional argument", "recursion depth", "changed size",
         "non-iterable", "before assignment"),
        example="Failed to start model server: integer division or modulo by zero"),
    # unknown: what says only that something failed or died, and follow-ups that never beat a cause.
    sig("fatal_statement", C.UNKNOWN, 12,
        r"^(?:\w+ )?(?:FATAL|Fatal|fatal)(?: error)?:|^(?:CRITICAL|Critical)\b|^Error: |^error: |^ERROR: ",
        ("FATAL", "Fatal", "fatal", "CRITICAL", "Critical", "Error: ", "error: ", "ERROR: "),
        example="fatal: unable to start the scheduler"),
    # Native crashes, signals, and what only says that something died; a shell's status line for a job a signal ended
    # with a core (`Quit (core dumped)`, `Bus error (core dumped)`) is one too: its signal's name is the literal the
    # prefilter can find it by (`core dumped` alone has no rare letter to anchor on).
    sig("native_crash", C.UNKNOWN, 19,
        r"Segmentation fault|SIGSEGV|SIGABRT|SIGBUS|Caught signal (?:11|6|7|4|8)\b|Fatal Python error|core dumped"
        r"|terminate called after throwing",
        ("Segmentation fault", "SIGSEGV", "SIGABRT", "SIGBUS", "Caught signal", "Fatal Python error", "core dumped",
         "terminate called", "Quit (", "Bus error (", "Illegal instruction (", "Floating point exception (",
         "Trace/breakpoint trap ("), vocabulary=states_not_guesses,
        example="Fatal Python error: Segmentation fault"),
    # SGLang tearing itself down after a process failed: its SIGQUIT handler (`Received sigquit from a child process. It
    # usually means the child failed.`, `SIGQUIT received. ... It usually means one child failed.`) and
    # kill_process_tree, which logs `kill_process_tree called: parent_pid=N, include_parent=True, pid=N` and ends with
    # SIGKILL on its own process: the exit -9 a harness then reports is this teardown's, not a kill from outside.
    sig("own_teardown", C.UNKNOWN, 5,
        r"Received sigquit from a child|SIGQUIT received|\bkill_process_tree called\b(?!.{0,80}include_parent=False)",
        ("sigquit", "SIGQUIT", "kill_process_tree called"), generic=True, teardown=True,
        example="Received sigquit from a child process. It usually means the child failed."),
    sig("child_failed", C.UNKNOWN, 5,
        r"Child process unexpectedly failed|Subprocess \S+ \(pid=\d+\) "
        r"crashed|EngineCore failed to start|Engine core initialization failed|Engine process failed to start"
        r"|WorkerProc (?:hit an exception|failed)|Worker \S+ pid \d+ died|died, exit code|exited unexpectedly"
        r"|scheduler is dead|(?:has|have) died\b|\bis dead\b|exit(?:ed)? (?:with )?(?:code|status)[: =]+[1-9]\d*\b"
        r"|returned non-zero exit status|exitcode[:=] ?[1-9]"
        r"|(?i:\b(?:see|check) (?:the )?(?:root cause|(?:error )?(?:messages?|logs?|output|errors?)) above)"
        r"|\bdied unexpectedly\b|\bdied\b,? (?:with|shutting down)|\bdied during (?:initiali[sz]ation|start-?up)\b"
        r"|\bdied or was killed\b|\bunexpectedly exits\b|\bis already dead\b"
        r"|(?i:\b(?:process|engine\w*|worker\w*|scheduler|actor|server|rank)(?: \([^()]{0,40}\))? died\b)"
        r"|(?i:\b(?:vllm|sglang|(?:model |api |inference )?server|engine\w*|container)\b.{0,20}?\bfailed to "
        r"(?:start|launch|come up)\b"
        r"|\bfailed to (?:start|launch) (?:the )?(?:model |api |inference )?(?:server|engine)\b)"
        r"|\b[Cc]rashed container\b|\bcontainer\b.{0,60}\bcrashed\b|\bCrashLoopBackOff\b"
        r"|Back-off restarting failed container",
        ("Child process", "crashed", "Crashed", "CrashLoopBackOff", "Back-off restarting",
         "failed to start", "ailed to start", "ailed to launch", "failed to come up", "initialization failed",
         "WorkerProc", "died", "exited unexpectedly", "is dead", "is already dead", "exit", "above",
         "unexpectedly exits"), generic=True,
        example="Child process unexpectedly failed with exitcode=1. pid=4242"),
    sig("cuda_error_unnamed", C.UNKNOWN, 25,
        r"(?:CU|HIP)BLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR)|(?:CUDA|HIP) error: (?:unspecified launch failure"
        r"|unknown error)|(?:cuda|hip)ErrorLaunchFailure|CUDA_ERROR_LAUNCH_FAILED",
        ("BLAS_STATUS_", "CUDA error: ", "HIP error: ", "ErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED"),
        example="RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`"),
    # Any other CUDA/HIP runtime error stated (`CUDA error: invalid device ordinal`, as torch's C10_CUDA_CHECK and the
    # runtime's own messages print it), with or without an exception or a level around it: the device failed, though
    # the reason names no category of its own. The rows of named reasons (an illegal access, a device assert, no
    # kernel image, out of memory) outrank it.
    sig("cuda_error_stated", C.UNKNOWN, 11, r"\b(?:CUDA|HIP) error: \w", ("CUDA error: ", "HIP error: "),
        any_level=True, example="CUDA error: invalid device ordinal"),
    sig("cann_error_code", C.UNKNOWN, 13, r"^E[A-Z0-9]\d{4}: \[PID: \d+\]", "[PID: ",
        example="EE1001: [PID: 2337] 2025-04-29-08:20:47.065.474 The argument is invalid."),
)
