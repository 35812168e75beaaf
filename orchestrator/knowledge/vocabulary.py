"""Vocabularies that place a message in a family by the words it uses (pure data).

A message that names a GPU architecture while saying something is not supported is about the architecture;
one that names the distributed runtime (c10d, Gloo, a rendezvous, `ibv_*`) while saying something failed is
about the distributed runtime; one that names a server argument while rejecting a value is about that
argument. Each vocabulary is a few lines of data, with the literals (`*_NEEDLES`) that keep its rows' regexes off the
bulk of a log where the words are many; the rows_*.py modules turn them into signature rows.
"""

from __future__ import annotations

import re

from orchestrator.knowledge.argnames import ARGUMENT_NAMES

ARCH = (
    r"(?:(?<![A-Za-z0-9])sm_?\d{2,3}[af]?(?![A-Za-z0-9])|\bSM ?\d{2,3}[af]?\b|\bcompute[ _]capabilit(?:y|ies)\b"
    r"|\b(?:device|cuda) capability\b"
    r"|\bcapability[ :=]+\d+(?:\.\d)?\b"
    r"|(?<!odel )(?<!odel_)(?<!odel with )(?<!GGUF )\barch(?:itecture)?s?\b"
    r"(?!\W{0,5}(?:\w+\(\W{0,3})?\w*(?:For[A-Z]|Model\b))"
    r"|\bgfx\d{2,4}[a-z]?\b"
    r"|\b(?:Kepler|Maxwell|Pascal|Volta|Turing|Ampere|Ada(?: Lovelace)?|Hopper|Blackwell|CDNA\d?|RDNA\d?)\b"
    r"|\b(?:A10G?|A30|A40|A100|A800|A6000|H20|H100|H200|H800|B100|B200|B300|GB200|GB300|L4|L20|L40S?|T4|V100|P100"
    r"|RTX ?(?:PRO ?)?\d{4}\w*|MI\d{3}X?)\b"
    r"|\bfp8e4nv\b|\bfp8e4b(?:8|15)\b|\bfp8e5b16\b)"
)
"""Words that name a GPU architecture: SM numbers (also inside a kernel's name, `sparse_mla_sm120_decode`), compute
capability, gfx ids, families, models, per-arch dtypes."""

ARCH_ID = r"(?:sm_?\d{2,3}[af]?|\d{2,3}[af]|gfx\d{2,4}[a-z]?)"
"""How code names a GPU architecture as a value or a table's key: `sm_90a`, `sm120`, `120a`, `100f`, `gfx1151` (a bare
number without its `a`/`f` suffix says nothing of an architecture)."""

_REFUSAL = (
    r"(?:\bnot (?:yet )?(?:supported|available|implemented|compiled|built)\b|\bunsupported\b|\bonly supports?\b"
    r"|\bonly (?:be )?(?:supported|available|works?|runs?)\b|\brequires?\b"
    r"|\bno (?:kernel|implementation|backend)s?\b|\brefus(?:es?|ed|ing)\b"
    r"|\bdoes(?:n't| not) (?:yet )?support\b|\bnot (?:support|work)\w*\b|\bminimum (?:capability|arch\w*)\b"
    r"|\bonly\b.{0,80}\b(?:is|are) supported\b|\bno supported\b|\bsupports? only\b|\bneeds?\b"
    r"|\bmust (?:go through|be (?:routed|dispatched) to)\b"
    r"|\bno (?:matching |suitable |valid )?(?:dispatch|specializ\w*)\b)"
)
_UNKNOWN_ARCH = (
    rf"(?i:\b(?:unknown|unrecogni[sz]ed)\W+(?:(?:GPU|device|target|chip|hardware|CUDA|AMD|NVIDIA|ROCm|HIP|GCN)\W+)?){ARCH}"
)
ARCH_REFUSAL = re.compile(rf"(?i:{_REFUSAL}).{{0,100}}{ARCH}|{ARCH}.{{0,100}}(?i:{_REFUSAL})|{_UNKNOWN_ARCH}")
"""A refusal and an architecture in one message, in either order. A GPU architecture a table does not know
(`Unknown GPU architecture: gfx1101`) is a refusal too: the library has nothing for that GPU."""

DISTRIBUTED = (
    r"(?:\bc10d\b|\b[Gg]loo\b|\bGLOO\b|\b[Rr]endezvous\b|\brdzv\w*|\bTCPStore\b|\bProcessGroup\w*|\bibv_\w+"
    r"|\bRDMA\b|\bconnectFullMesh\b|(?<!\.)\binit_process_group\b(?!\()|\btorch\.distributed\b|\bDistStore\w*"
    r"|\bMASTER_ADDR\b|\bIB devices?\b|\bInfiniBand\b|\bbootstrap(?:_addr\w*| server)\b"
    r"|\bHCC[LSP]\w*|\bhccl\w*|\boneCCL\b|\bCCL_[A-Z][A-Z_]+|\bNVSHMEM\w*|\bnvshmem\w*)"
)
"""Words that name the distributed runtime below NCCL, and the NCCL of other accelerators: c10d, Gloo, rendezvous, the
TCP store, InfiniBand verbs, NVSHMEM (DeepEP's GPU-to-GPU transport), Ascend's HCCL/HCCS and Intel's oneCCL (`CCL_*`).
A method called by name (`ray::Actor.init_process_group()` in a Ray task's header, `dist.init_process_group(` in code)
is the code that ran, not a statement about the runtime. A disaggregated request's `bootstrap_room` names that one
request's KV transfer (`Decode transfer failed for request ... bootstrap_room=...: Aborted`), not the runtime: no word
here."""
DISTRIBUTED_NEEDLES = (
    "c10d", "loo", "LOO", "endezvous", "rdzv", "TCPStore", "ProcessGroup", "ibv_", "RDMA", "connectFullMesh",
    "init_process_group", "torch.distributed", "DistStore", "MASTER_ADDR", "IB dev", "nfiniBand", "bootstrap_addr",
    "bootstrap server", "HCC", "hccl", "oneCCL", "CCL_", "NVSHMEM", "nvshmem",
)
"""Literals of which every message naming one of DISTRIBUTED's words holds one (the prefilter's and the row's)."""
_BREAKAGE = (
    r"(?i:\bfail(?:ed|ure|s)?\b|\berror\b|\brefused\b|\bNo route to host\b|\bunreachable\b|\breset by peer\b"
    r"|\babort(?:ed)?\b|\bclosed\b|\bcannot (?:connect|reach)\b|\bbroken pipe\b|\blost (?:the )?connection\b"
    r"|\btimed out\b)"
)
DISTRIBUTED_FAILURE = re.compile(
    rf"{DISTRIBUTED}.{{0,200}}{_BREAKAGE}|{_BREAKAGE}.{{0,120}}{DISTRIBUTED}|(?i:\bno\s+){DISTRIBUTED}"
)
"""The runtime failing (in either order), or missing outright (`No IB devices found`)."""

KERNEL_LIBRARIES = (
    r"(?:deep_gemm|deep_ep|flashinfer\w*|flash_attn\w*|flash_mla\w*|flashmla\w*|vllm_flash_attn\w*|sgl_kernel\w*"
    r"|cutlass\w*|trtllm\w*|aiter\w*|fa3\w*|fa4\w*|tilelang\w*|triton_kernels?|marlin\w*|machete\w*|_custom_ops|ops)"
)
"""Kernel libraries a server imports only where the GPU has kernels for them (names as Python sees them)."""

CUDA_RESULT = (
    r"(?:\b(?:CUresult|cudaError(?:_t)?|CUDA (?:driver |runtime )?(?:API )?(?:error|failure|call failed|result))\b"
    r"|\bcu(?:Mem\w+|Malloc\w*|Ctx\w+|Module\w+|LaunchKernel\w*|GraphInstantiate\w*)\b.{0,40}?"
    r"\b(?:failed|error|returned|result))"
    r"[^0-9\n]{0,24}?(?<![\w.])"
)
"""A CUDA driver or runtime call's numeric result, up to the number: `CUresult error  result=2`, `CUDA driver error: 2`,
`cuMemCreate failed with error 700`. The driver API and the runtime API share their numbers for the codes the rows
read: 2 out of memory, 209 no kernel image for this GPU, 700 an illegal address, 710 a device-side assert."""
CUDA_CODE_END = r"(?![\w.])"
"""Where a result's number ends (`2`, not `2.5` or `20`)."""
CUDA_RESULT_NEEDLES = ("CUresult", "cudaError", "CUDA", "cuMem", "cuMalloc", "cuCtx", "cuModule", "cuLaunch", "cuGraph")
"""Literals of which every message stating a CUDA call's result holds one."""

_ARG_TOKEN = re.compile(r"(?<![\w.\-/])-{0,2}([a-z][a-z0-9]*(?:[_-][a-z0-9]+)+)(?![\w\-])")


def names_argument(message: str) -> bool:
    """Whether a message names a server argument the tool knows (`--max-model-len` or `max_model_len`)."""
    return any(m.group(1).replace("-", "_") in ARGUMENT_NAMES for m in _ARG_TOKEN.finditer(message))


def names_no_argument(message: str) -> bool:
    """Whether a message names no server argument: one that does is about the argument first."""
    return not names_argument(message)

CACHE = (
    r"(?i:\bkv[ _-]?cache\b|\b(?:mamba|ssm|linear[ -]attention|hybrid)\W{0,3}(?:\w+\W{0,3})?(?:state )?cache\b"
    r"|\bstate cache\b|\b(?:swa|kv|full kv) pool\b|\bcache blocks\b)"
)
"""Words that name the cache the memory left after the weights is for: the KV cache, a hybrid model's mamba/state cache,
a sliding-window pool, the blocks they are cut into."""
CACHE_SHORTAGE = re.compile(
    rf"{CACHE}.{{0,80}}(?i:\btoo small\b|\binsufficient\b|\bnot enough\b|\bexhausted\b|\bcannot hold\b"
    rf"|\bleaves no room\b|\bno (?:free|available) (?:space|blocks|memory)\b|\bexceeds?\b|\bsmaller than\b)"
    rf"|(?i:\b(?:not enough|insufficient|no)\b (?:\w+ )?(?:memory|space|room)\b.{{0,60}}?\bfor\b).{{0,60}}?{CACHE}"
    rf"|(?i:\bexceeds? (?:the )?available\b (?:\w+ )?){CACHE}"
    r"|(?i:\b(?:increase|raise)\b (?:the )?`?-{0,2}(?:\w+[_-])?(?:mem(?:ory)?[_-](?:fraction|ratio|utilization)"
    r"|gpu[_-]memory[_-]utilization)\w*)"
    r"|(?i:\bmax_total_num_tokens\b.{0,60}(?:too small|<=? ?0|must be (?:positive|larger|greater)))"
)
"""A cache the memory left does not hold, in the words the servers use: the cache too small, exhausted or exceeded, no
memory for it, a demand that exceeds it, a token budget (`max_total_num_tokens`) that came out too small, or the advice
to give it a larger share of the memory."""

TOKENIZER = (
    r"(?i:\b(?:fast |slow )?tokeni[sz]ers?\b(?! ?manager|_worker)|\bchat[ _]templates?\b|\bspecial tokens?\b"
    r"|\btiktoken\b|\bvocab(?:ulary)? files?\b)"
)
"""Words that name the tokenizer or its chat template (not SGLang's tokenizer manager process): also the BPE library
tiktoken and a vocabulary file (openai_harmony's `HarmonyError: invalid tiktoken vocab file: ...` when gpt-oss's
encoding does not load)."""
TOKENIZER_OBJECTS = (
    r"(?:\b(?!\w*Logits)\w*(?:Tokenizer|Processor)(?:Fast)?\b|\b(?:de)?tokeniz\w*|\bvocabular(?:y|ies)\b"
    r"|\bchat[_ ]template\b)"
)
"""Words an exception uses when it is about the tokenizer: a tokenizer or processor class (not a logits processor), the
act of tokenizing, the vocabulary, the chat template."""
_TOKENIZER_FAULT = (
    r"(?i:\bdoes(?: not|n't) (?:define|contain|have|match)\b|\bmissing\b|\bmust (?:contain|define|have|be)\b"
    r"|\bcould not (?:locate|find|load)\b|\bcan(?:no|')t (?:apply|load|find|use)\b|\bunrecogni[sz]ed\b|\bnot set\b"
    r"|\bneeds?\b|\bonly\b.{0,40}\bsupported\b|\binvalid\b|\bfailed to\b|\bnot (?:found|a valid)\b)"
)
TOKENIZER_FAULT = re.compile(
    rf"{TOKENIZER}.{{0,120}}{_TOKENIZER_FAULT}|{_TOKENIZER_FAULT}.{{0,120}}{TOKENIZER}"
    rf"|(?i:\bonly\b)(?:\W+\w+){{0,2}}?\W+{TOKENIZER}.{{0,40}}(?i:\bsupported\b)"
)
"""The tokenizer or chat template named beside what is wrong with it."""

CHECKPOINT = (
    r"(?i:\bcheckpoints?\b|\bweights?(?: files?)?\b|\bsafetensors\b|\bstate[_ ]dict\b|\bconfig\.json\b"
    r"|\bconfiguration of\b|\bserialized model\b|\bshards?\b|\bquantization config\b|\bhf_quant_config\.json\b"
    r"|\bgguf\b)"
)
"""Words that name a checkpoint: its files, weights, tensors' container (safetensors, GGUF), its config."""
CHECKPOINT_PARTS = (
    r"(?:\b[Cc]heckpoints?\b|\bsafetensors?\b|\.safetensors\b|\bstate_dict\b|\bweight_map\b"
    r"|\bmodel\.safetensors\.index\.json\b|\bpytorch_model\b|\.gguf\b)"
)
"""Words an exception uses when it is about the checkpoint's files: the checkpoint, its safetensors shards, its index
and weight map, its state dict, a GGUF file (narrower than CHECKPOINT: `weights` alone is not enough here)."""
CHECKPOINT_NEEDLES = (
    "heckpoint", "HECKPOINT", "eight", "EIGHT", "afetensors", "AFETENSORS", "gguf", "GGUF", "Gguf", "tate_dict",
    "tate dict", "TATE_DICT", "TATE DICT", "config.json", "onfiguration of", "ONFIGURATION OF", "erialized model",
    "ERIALIZED MODEL", "hard", "HARD", "uantization config", "UANTIZATION CONFIG", "quant_config",
)
"""Literals of which every message naming one of CHECKPOINT's words holds one (in any case the words are written)."""
_CHECKPOINT_FAULT = (
    r"(?i:\bincomplete\b|\bempty\b|\bcorrupt\w*|\bchecksum mismatch\b|\bnot (?:a valid|found|loaded|initiali[sz]ed)\b"
    r"|\bno (?:\w+ ){0,2}found\b|\bmissing\b|\bcan(?:no|')t (?:load|find|read|open)\b|\bcould not (?:load|find|read)\b"
    r"|\bfailed to (?:load|read|open|map|parse)\b|\bnot loaded properly\b|\bnever loaded\b)"
)
CHECKPOINT_FAULT = re.compile(
    rf"{CHECKPOINT}.{{0,120}}{_CHECKPOINT_FAULT}|{_CHECKPOINT_FAULT}.{{0,120}}{CHECKPOINT}"
    rf"|(?i:\bno (?:\w+ )?){CHECKPOINT}(?i: (?:\w+ )?found\b)"
)
"""A checkpoint named beside what is wrong with it."""

PACKAGE_ABSENT = re.compile(
    r"(?i:\b(?:please |to )?install (?:it|them)?\b.{0,20}\b(?:with|via|using)?\s*`?pip install\b|\bplease install\b"
    r"|\bis not installed\b|\bnot installed\b|\brequires (?:the )?installation of\b|\bpackage is required\b"
    r"|\b(?:unavailable|not available|missing) in (?:this|the installed|your) (?:\w+ ){0,2}(?:install(?:ation)?|version"
    r"|build)\b|\bthe installed \w+ is\b.{0,80}\bupgrade\b|\bplease upgrade\b)"
)
"""A message that says a package is absent and how to install it: the import (or the wheel) is what failed."""

_CAUGHT_IMPORT = re.compile(r"\b[Ff]ailed to import (?:from )?[\w.]+ with [\w.]+\(")
"""vLLM's and SGLang's notice of an optional import they caught (`Failed to import amdsmi with ModuleNotFoundError("No
module named 'amdsmi'")`, logged as a warning that SGLang's log format shows without its level): the server goes on
without the module. (A compiled extension that is there but does not load is extension_load_failed's, at any level.)"""


def reports_no_caught_import(message: str) -> bool:
    """Whether a message is not the notice of an optional import that was caught and logged."""
    return _CAUGHT_IMPORT.search(message) is None


_SOCKET_ERRNO = re.compile(
    r"\b(?:Address family|Protocol family|Protocol|Socket type) not supported(?: by protocol(?: family)?)?\b"
)
"""The C library's words for a socket the system cannot create (EAFNOSUPPORT, EPFNOSUPPORT, EPROTONOSUPPORT,
ESOCKTNOSUPPORT: IPv6 turned off on the host, a transport the kernel lacks): the network failing under whoever
opened it, not a setting the engine refuses."""


def names_no_socket_errno(message: str) -> bool:
    """Whether a message's `not supported` is not the C library's statement that a socket cannot be created."""
    return _SOCKET_ERRNO.search(message) is None


_CARRIES_ON = re.compile(
    r"(?i)[;,.:)]\s*(?:(?:so|we|it|this|will)\s+){0,2}(?:using|use|defaulting|default(?:s)? to|falling back|fall back"
    r"|setting|set to|disabling|disabled|skipping|skipped|reducing|reduced|assuming|ignoring|ignored|continuing"
    r"|proceeding|retrying|clamping|capping|adjusting)\b"
)
"""A notice goes on to say what the server did instead (`; using eos_token as pad_token`, `, reducing to 128`): it
reports a fallback the launch survives, not a failure."""


def states_without_fallback(message: str) -> bool:
    """Whether a message states its problem without going on to say what the server does instead."""
    return _CARRIES_ON.search(message) is None


def names_no_argument_nor_fallback(message: str) -> bool:
    """A tokenizer statement that is neither an argument's rejection nor a notice of a fallback."""
    return names_no_argument(message) and states_without_fallback(message)
