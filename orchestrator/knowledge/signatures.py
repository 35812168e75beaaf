"""The failure signature table: general patterns of SGLang, vLLM, PyTorch, CUDA, NCCL and Python messages.

Adding a signature is adding a row. Sources: reference/sglang-facts.md section 4, the real crash logs in
../shared/fixtures/crash-logs/, and the messages of the libraries they quote. Specificity bands:
90+ the cause named outright (NaN in sampling, argparse rejection); 70-89 a specific CUDA/NCCL/memory/kernel
failure; 40-69 a recognisable kind of error; 20 any Python exception; below 20 what only shows that something
died (a signal, `Killed`, a bare traceback header) and generic follow-ups, which never beat a cause.
Patterns are searched in a line's message, with its timestamp/rank/level prefix removed.
"""

from __future__ import annotations

from orchestrator.knowledge.kinds import states_not_guesses
from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.rows_device import DEVICE_ROWS
from orchestrator.knowledge.rows_runtime import RUNTIME_ROWS
from orchestrator.knowledge.worded import WORDED
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

SIGNATURES: tuple[Signature, ...] = (
    *DEVICE_ROWS,
    # Imports and shared libraries.
    sig("import_names_what", C.IMPORT_ERROR, 72,
        r"No module named|cannot import name|undefined symbol|cannot open shared object file"
        r"|(?:DLL|dll) load failed|(?:version|symbol) `?\S+'? not found",
        ("No module named", "cannot import name", "undefined symbol", "shared object", "load failed", "not found"),
        phase=P.IMPORT,
        example="ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory"),
    sig("import_failed", C.IMPORT_ERROR, 70,
        r"ModuleNotFoundError|ImportError|No module named|cannot import name|undefined symbol"
        r"|cannot open shared object file|(?i:could not load .{0,60}librar(?:y|ies))"
        r"|(?i:(?:failed to|cannot|unable to) (?:load|import|open) (?:the )?(?:shared )?librar)",
        ("ModuleNotFoundError", "ImportError", "No module named", "cannot import name", "undefined symbol",
         "shared object", "ould not load", "librar"), phase=P.IMPORT,
        example="[sgl_kernel] CRITICAL: Could not load any common_ops library!"),
    # Checkpoints and weights.
    sig("state_dict_mismatch", C.WEIGHTS_LOAD_ERROR, 65,
        r"Error\(s\) in loading state_dict|size mismatch for \S+|(?:Missing|Unexpected) key\(s\) in state_dict",
        ("state_dict", "size mismatch"), phase=P.MODEL_LOAD,
        example="RuntimeError: Error(s) in loading state_dict for Linear:"),
    sig("checkpoint_file", C.WEIGHTS_LOAD_ERROR, 65,
        r"SafetensorError|HeaderTooLarge|MetadataIncompleteBuffer|(?i:incomplete metadata)|file not fully covered"
        r"|does not appear to have a file named|Cannot find any model weights|(?i:no (?:model )?weights? files? found)"
        r"|(?i:(?:no such file or directory|not found|does not exist|can(?:no|')t find|could not find)"
        r".{0,80}(?:\.(?:safetensors|bin|pt|pth|gguf)\b|[/\\'\"](?:config|model\.safetensors\.index)\.json\b))",
        ("Safetensor", "HeaderTooLarge", "MetadataIncomplete", "metadata", "fully covered", "file named",
         "weights", "Weights", ".safetensors", ".bin", ".pt", ".gguf", "config.json", "index.json"), phase=P.MODEL_LOAD,
        example="safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge"),
    sig("hub_lookup_failed", C.WEIGHTS_LOAD_ERROR, 65,
        r"RepositoryNotFoundError|GatedRepoError|LocalEntryNotFoundError|HFValidationError|EntryNotFoundError"
        r"|is not a local folder and is not a valid model identifier|couldn't connect to '?https?://huggingface\.co"
        r"|OfflineModeIsEnabled|(?i:cannot access gated repo|trying to access a gated repo)"
        r"|Access to model \S+ is restricted",
        ("NotFoundError", "GatedRepoError", "HFValidationError", "is not a local folder", "connect to", "OfflineMode",
         "gated repo", "is restricted"),
        phase=P.MODEL_LOAD,
        example="OSError: /models/x is not a local folder and is not a valid model identifier listed on "
        "'https://huggingface.co/models'"),
    sig("weight_names", C.WEIGHTS_LOAD_ERROR, 62,
        r"(?i)\b(?:missing|unexpected|unused|unknown|unmatched) (?:keys?|weights?|parameters?|params|tensors?)\b"
        r".{0,20}(?:in|from|for|when|while|:|\()|\b(?:weight|param(?:eter)?|tensor|key)s? .{1,120} (?:not|was not|were "
        r"not|is not|are not) (?:found|present|loaded|initialized) in (?:the )?(?:checkpoint|state[_ ]dict|params_dict"
        r"|model|safetensors)|\b(?:shape|size|dtype) mismatch\b.{0,100}\b(?:weight|param\w*|checkpoint|loaded)"
        r"|\b(?:weight|param\w*|checkpoint|loaded_weight)\w*\b.{0,100}\b(?:shape|size) mismatch"
        r"|(?:failed to|could not|cannot|unable to) load (?:the )?(?:model )?(?:weights|checkpoint|state[_ ]dict)"
        r"|There is no (?:module or )?parameter named",
        ("issing", "nexpected", "nused", "nknown", "nmatched", "not found", "not present", "not loaded",
         "not initialized", "mismatch", "load", "parameter named"), phase=P.MODEL_LOAD,
        example="ValueError: Missing weights in checkpoint: model.layers.0.mlp.experts.w13_weight_scale"),
    # A LoRA adapter whose files are not where it was pointed (vLLM's `No adapter found for <path>`, PEFT's and
    # vLLM's missing `adapter_config.json` / `adapter_model.*`): the adapter checkpoint does not load.
    sig("adapter_files_missing", C.WEIGHTS_LOAD_ERROR, 65,
        r"No adapter found for|(?i:(?:no such file or directory|not found|does not exist|can(?:no|')t find|could not "
        r"find|missing).{0,80}adapter_(?:config\.json|model\.(?:safetensors|bin|pt)))"
        r"|(?i:adapter_(?:config\.json|model\.(?:safetensors|bin|pt)).{0,60}(?:not found|does not exist|missing))",
        ("No adapter found", "adapter_config", "adapter_model"),
        example="ValueError: Loading lora sql failed: No adapter found for /data/adapters/sql-lora"),
    # A LoRA adapter whose modules are not the ones the model's LoRA support knows (vLLM's `While loading <path>,
    # expected target modules in {...} but received [...]`, `mismatch of LoRA layer names`, a target module the base
    # model does not have): the adapter's weights do not fit the model, as a checkpoint's names may not.
    sig("adapter_modules_mismatch", C.WEIGHTS_LOAD_ERROR, 64,
        r"(?i:\bexpected (?:lora )?(?:target )?modules? in\b|\bmismatch of lora (?:layer|module|weight) names\b"
        r"|\b(?:lora|adapter)\b.{0,80}\btarget[_ ]modules?\b.{0,80}\b(?:not (?:supported|found|present|in)|mismatch\w*"
        r"|unexpected|unsupported|do(?:es)? not match)\b)",
        ("xpected target module", "xpected module", "xpected lora", "XPECTED", "ismatch of", "ISMATCH OF",
         "target_module", "target module", "Target module", "TARGET"),
        phase=P.MODEL_LOAD,
        example="ValueError: While loading /adapters/a, expected target modules in {'q_proj', 'v_proj'} but received "
        "['vision_tower.layers.0.mlp.fc1']"),
    sig("parameter_key_error", C.WEIGHTS_LOAD_ERROR, 50,
        r"^KeyError: '(?:\w+\.)+\w*(?:weight|bias|scale|qweight|qzeros|scales|g_idx|zero_point)\w*'",
        "KeyError", phase=P.MODEL_LOAD, example="KeyError: 'layers.0.mlp.down_proj.weight_scale'"),
    # Tokenizers and chat templates.
    sig("tokenizer_load_failed", C.TOKENIZER_OR_TEMPLATE_ERROR, 65,
        r"(?i)(?:failed to|unable to|cannot|can't|could not|couldn't) (?:load|instantiate|find|initialize) "
        r"(?:the )?(?:\S+ )?(?:tokenizer|processor)\b|Unrecognized (?:\w+ )?(?:processor|tokenizer)\b"
        r"|Tokenizer class \S+ does not exist",
        ("okenizer", "rocessor"), phase=P.MODEL_LOAD,
        example="RuntimeError: Failed to load the tokenizer. If you are using a LLaMA-based model, use "
        "'hf-internal-testing/llama-tokenizer' instead of the original tokenizer."),
    sig("chat_template_error", C.TOKENIZER_OR_TEMPLATE_ERROR, 65,
        r"jinja2\.exceptions\.\w+|TemplateError|TemplateSyntaxError|ChatTemplate\w*Error|(?i:chat[ _]template.{0,80}"
        r"(?:error|not found|not set|invalid|missing|failed|does not exist|no longer allowed|must provide|does not "
        r"define|is not a (?:built-in|valid|registered|known)))|(?i:no chat template)",
        ("jinja2", "Template", "template"),
        example="jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/user/assistant"),
    # The server's own warm-up request.
    sig("warmup_failed", C.WARMUP_REQUEST_FAILED, 60, r"Initialization failed\. warmup error",
        "Initialization failed", phase=P.WARMUP, wraps=True,
        example="Initialization failed. warmup error: Traceback (most recent call last):"),
    sig("warmup_statement", C.WARMUP_REQUEST_FAILED, 61,
        r"(?i)\bwarm-?up (?:request )?failed|\bdid not become ready at https?://",
        ("warmup", "Warmup", "warm-up", "did not become ready"), phase=P.WARMUP,
        example="RuntimeError: HTTP server did not become ready at http://[::1]:10762/health"),
    sig("warmup_status", C.WARMUP_REQUEST_FAILED, 62, r"res=<Response \[(?:[1-35]\d\d|4\d\d)\]>",
        "res=<Response", phase=P.WARMUP, example="AssertionError: res=<Response [403]>, res.text='Forbidden'"),
    # Hangs and timeouts.
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
    # Any Python exception.
    sig("python_exception", C.PYTHON_EXCEPTION_OTHER, 20,
        r"^(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception)\b"
        r"|^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Failed|Failure|Fault)(?::|\s*$)",
        ("Error", "Exception", "Failed", "Failure", "Fault"),
        example="AttributeError: 'NoneType' object has no attribute 'shape'"),
    # A failure stated in words, with no exception: a C++/CUDA assertion, `RuntimeError`-less fatal messages.
    sig("assertion_failed", C.PYTHON_EXCEPTION_OTHER, 22,
        r"Assertion [`'\"(]?.{1,200}[`'\")]? failed|: Assertion .{1,200} failed\.?$|\bassert(?:ion)? failed\b",
        ("Assertion", "assert"),
        example="/src/rotary.cu:72: void rope(): Assertion `q.size(1) == cos.size(0)' failed."),
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
    sig("scheduler_exception", C.PYTHON_EXCEPTION_OTHER, 18, r"\w hit an exception", "hit an exception",
        generic=True, example="Scheduler hit an exception: Traceback (most recent call last):"),
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
    # A process whose exit status is stated as the kill signal's (-9, or 137 from a shell) was killed: a statement,
    # unlike a bare `Killed`; a `(SIGKILL)` that glosses a -9 only explains the code, which decides (SGLang's `exit
    # code: -3 ... If exit code is -9 (SIGKILL), a common cause is ...` names no kill).
    sig("killed_exit_status", C.PROCESS_KILLED, 60,
        r"(?i)\b(?:exit ?code|exitcode|exit status|return ?code|returncode)\s*[:=]?\s*(?:-9|137)\b"
        r"|\bexited with (?:code|status) (?:-9|137)\b",
        ("xit", "XIT", "eturn"), any_level=True,
        example="RuntimeError: Rank 0 scheduler died during initialization (exit code: -9)."),
    sig("killed", C.PROCESS_KILLED, 15,
        r"^Killed\b|\d Killed\s|\bKilled\s*$|\b[Ss]ignal 9\b|(?<!-9 \()SIGKILL"
        r"|(?i:exit(?:ed)? ?(?:with )?(?:code|status)[:= ]*(?:-9|137)\b|exitcode[:=] ?-9\b"
        r"|return ?code[:= ]*(?:-9|137)\b)",
        ("Killed", "ignal 9", "SIGKILL", "exit", "Exit", "EXIT", "code"), vocabulary=states_not_guesses,
        example="Killed"),
    sig("traceback", C.PYTHON_EXCEPTION_OTHER, 4, r"Traceback \(most recent call last\)", "Traceback",
        example="Traceback (most recent call last):"),
    sig("child_failed", C.UNKNOWN, 5,
        r"Received sigquit from a child|SIGQUIT received|Child process unexpectedly failed|Subprocess \S+ \(pid=\d+\) "
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
        ("sigquit", "SIGQUIT", "Child process", "crashed", "Crashed", "CrashLoopBackOff", "Back-off restarting",
         "failed to start", "ailed to start", "ailed to launch", "failed to come up", "initialization failed",
         "WorkerProc", "died", "exited unexpectedly", "is dead", "is already dead", "exit", "above",
         "unexpectedly exits"), generic=True,
        example="Received sigquit from a child process. It usually means the child failed."),
    *WORDED,
    *RUNTIME_ROWS,
)

LEVEL_ROWS: tuple[Signature, ...] = (
    sig("error_statement", C.UNKNOWN, 11, r"", (), example="ERROR 01-01 12:00:00 worker.py:12] worker 3 failed"),
)
"""Rows matched by a line's level (ERROR, CRITICAL, FATAL), not its words: an error no other row names.
Never fatal on their own line (the readiness wait does not stop on them): whether the server survived
an error logged at ERROR level shows only in the lines after it."""

BY_ID: dict[str, Signature] = {s.id: s for s in (*SIGNATURES, *LEVEL_ROWS)}

NEEDLES: tuple[str, ...] = tuple(dict.fromkeys(n for s in SIGNATURES for n in s.needles))
