"""Signature rows about what the server loads before it serves: modules, shared libraries and compiled extensions
(import_error), the checkpoint, its weights, adapters and the model hub (weights_load_error), the tokenizer, processor
and chat template (tokenizer_or_template_error). Part of the signature table (see signatures.py for the specificity
bands and how the modules make one table).
"""

from __future__ import annotations

from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.vocabulary import (
    CHECKPOINT_FAULT,
    CHECKPOINT_NEEDLES,
    CHECKPOINT_PARTS,
    KERNEL_LIBRARIES,
    PACKAGE_ABSENT,
    TOKENIZER_FAULT,
    TOKENIZER_OBJECTS,
    names_no_argument_nor_fallback,
    reports_no_caught_import,
    states_without_fallback,
)
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

LOADING_ROWS: tuple[Signature, ...] = (
    # import_error: imports, shared libraries and compiled extensions.
    sig("import_names_what", C.IMPORT_ERROR, 72,
        r"No module named|cannot import name|undefined symbol|cannot open shared object file"
        r"|(?:DLL|dll) load failed|(?:version|symbol) `?\S+'? not found",
        ("No module named", "cannot import name", "undefined symbol", "shared object", "load failed", "not found"),
        phase=P.IMPORT, vocabulary=reports_no_caught_import,
        example="ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory"),
    # The import failing in other words than the ones above name (which always outrank this row).
    sig("import_failed", C.IMPORT_ERROR, 70,
        r"ModuleNotFoundError|ImportError|(?i:could not load .{0,60}librar(?:y|ies))"
        r"|(?i:(?:failed to|cannot|unable to) (?:load|import|open) (?:the )?(?:shared )?librar)",
        ("ModuleNotFoundError", "ImportError", "ould not load", "librar"), phase=P.IMPORT,
        vocabulary=reports_no_caught_import,
        example="[sgl_kernel] CRITICAL: Could not load any common_ops library!"),
    sig("op_namespace_missing", C.IMPORT_ERROR, 70,
        rf"(?:_OpNamespace|torch\.ops\.\w+|module '[\w.]*\b(?:_C|_ops|ops|_kernels?|common_ops)\w*'"
        rf"|module '{KERNEL_LIBRARIES}(?:\.\w+)*')"
        r".{0,80}has no attribute",
        "has no attribute", phase=P.IMPORT,
        example="AttributeError: '_OpNamespace' 'sgl_kernel' object has no attribute 'fused_add_rmsnorm'"),
    # (A kernel library's own module lacking a function, `module 'sgl_kernel' has no attribute 'allreduce'`, is the
    # same mismatch as the row above: a build of the library for another version or platform than its caller.)
    sig("extension_load_failed", C.IMPORT_ERROR, 72,
        r"(?i:failed to (?:import|load)|could not (?:import|load)).{0,160}(?:undefined symbol|symbol not found"
        r"|cannot open shared object|DLL load failed|version `[^`']+' not found)", ("ailed to", "ould not"),
        phase=P.IMPORT, any_level=True,
        example="WARNING 05-30 10:51:41 [_custom_ops.py:21] Failed to import from vllm._C with ImportError(\"dlopen("
        "/x/vllm/_C.abi3.so, 0x0002): symbol not found in flat namespace '___kmpc_dispatch_deinit'\")"),
    # A package named as absent, with the advice to install it (vocabulary.PACKAGE_ABSENT).
    sig("package_absent", C.IMPORT_ERROR, 58, PACKAGE_ABSENT.pattern, ("nstall", "NSTALL", "pgrade", "PGRADE"),
        phase=P.IMPORT,
        vocabulary=states_without_fallback,
        example="RuntimeError: cuda.bindings is not available. Install it with: pip install cuda-python"),
    # A device extension module (torch_npu, torch_mlu, intel_extension_for_pytorch, ...) named but never imported:
    # the import that defines it did not happen.
    sig("device_extension_undefined", C.IMPORT_ERROR, 60,
        r"^(?:[\w.]+\.)?NameError: name '(?:torch_(?:npu|mlu|musa|gcu|xla)\w*|intel_extension_for_pytorch|ipex"
        r"|habana_frameworks\w*|vllm_ascend\w*|sglang_npu\w*)' is not defined",
        "NameError", phase=P.IMPORT, example="NameError: name 'torch_npu' is not defined"),
    # weights_load_error: checkpoints, weights, adapters and the model hub.
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
    # A checkpoint named beside what is wrong with it (vocabulary.CHECKPOINT_FAULT).
    sig("checkpoint_fault", C.WEIGHTS_LOAD_ERROR, 57, CHECKPOINT_FAULT.pattern,
        CHECKPOINT_NEEDLES, phase=P.MODEL_LOAD,
        vocabulary=states_without_fallback,
        example="RuntimeError: No model weights found in: `/data/models/glm-4.6`"),
    sig("weights_incomplete", C.WEIGHTS_LOAD_ERROR, 55,
        r"(?i:(?:didn't|did not|could not|couldn't|failed to) finish (?:the )?(?:model |weights? )?load(?:ing)?)"
        r"|\b(?:param(?:_data)?|loaded_weight)\.shape\b.{0,40}(?:!=|==|,|torch\.Size|mismatch)",
        ("finish", ".shape"), phase=P.MODEL_LOAD,
        example="ValueError: TP rank 1 could finish the model loading, but there are other ranks that didn't finish "
        "loading."),
    # The model hub refused the download (401/403 for a gated or private repository, 404 for one that is not there):
    # the checkpoint cannot be fetched, as `GatedRepoError` says in other words.
    sig("hub_http_refused", C.WEIGHTS_LOAD_ERROR, 64,
        r"\b(?:401|403|404) Client Error: .{0,80} for url: https?://(?:huggingface\.co|hf\.co|[\w.\-]*modelscope\.\w+)/",
        ("Client Error",), phase=P.MODEL_LOAD,
        example="requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
        "https://huggingface.co/org/model/resolve/main/config.json"),
    # The same for the checkpoint: an exception that names the checkpoint, its safetensors shards, its index or its
    # state dict is about the weights not loading (the specific loader rows above say more where they match).
    sig("checkpoint_named", C.WEIGHTS_LOAD_ERROR, 44,
        rf"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b.*?{CHECKPOINT_PARTS}",
        ("heckpoint", "afetensors", "state_dict", "weight_map", "index.json", "pytorch_model", ".gguf"),
        example="RuntimeError: checkpoint shard model-00003-of-00004.safetensors is truncated"),
    # tokenizer_or_template_error: tokenizers, processors and chat templates.
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
    # The tokenizer or chat template named beside what is wrong with it (vocabulary.TOKENIZER_FAULT), unless the message
    # names a server argument (`--tokenizer-mode must be one of`): then the argument rows decide. Like the other rows
    # built from a vocabulary, it leaves alone a notice that goes on to say what the server does instead (`; using
    # eos_token as pad_token`): a fallback survived, not a failure.
    sig("tokenizer_fault", C.TOKENIZER_OR_TEMPLATE_ERROR, 58, TOKENIZER_FAULT.pattern,
        ("okeni", "OKENI", "emplate", "EMPLATE", "pecial token", "iktoken", "ocab file"), phase=P.MODEL_LOAD,
        vocabulary=names_no_argument_nor_fallback,
        example="ValueError: tokenizer does not define required token <|image_pad|>"),
    # Transformers has no tokenizer or processor class for the checkpoint's config: the tokenizer cannot be built (its
    # `... for this kind of AutoModel` twin is the model not being supported).
    sig("auto_tokenizer_unmapped", C.TOKENIZER_OR_TEMPLATE_ERROR, 66,
        r"Unrecognized configuration class .{0,240}? to build an Auto(?:Tokenizer|Processor|ImageProcessor"
        r"|FeatureExtractor)\b",
        "Unrecognized configuration class", phase=P.MODEL_LOAD,
        example="ValueError: Unrecognized configuration class <class 'transformers_modules.m.configuration_m.MConfig'>"
        " to build an AutoTokenizer."),
    # An exception or a failure statement that names the tokenizer, a processor class, the vocabulary or the chat
    # template is about them (`'Qwen2VLProcessor' object has no attribute 'image_token'`, `Unable to load vocabulary
    # from file`, `No tokenizer file found`); a logits processor is sampling's, not the tokenizer's.
    sig("tokenizer_named", C.TOKENIZER_OR_TEMPLATE_ERROR, 44,
        rf"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b.*?{TOKENIZER_OBJECTS}"
        rf"|(?i:\b(?:failed to|unable to|cannot|can't|could not|couldn't|no)\b).{{0,80}}?{TOKENIZER_OBJECTS}",
        ("okeniz", "rocessor", "ocabular", "template", "Template"),
        example="AttributeError: 'Qwen2VLProcessor' object has no attribute 'image_token'"),
)
