"""What scripts/validate.py and its parts share: the mapping of the reference files' free-text
columns to capsim's names, the reproduction settings of the published runs, running capsim
(class Capsim) and the error statistics. Python 3 standard library only."""

import argparse
import csv
import datetime
import json
import math
import os
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev_runs  # noqa: E402  (scripts/dev_runs.py: the vLLM development runs, end to end)
import fit_engine_constants  # noqa: E402  (out-of-fold errors of the constants fitted on them)

# ---------------------------------------------------------------------------------------------
# Mapping of the reference files' free-text columns to capsim's catalogue names.
# ---------------------------------------------------------------------------------------------

# (substring of the lower-cased gpu text, capsim card, note shown in the report). First match wins.
CARD_RULES = [
    ("h100 (vidur", "h100-sxm", "vidur 'h100' SKU: SXM assumed (NVL not excluded)"),
    ("h100 sxm", "h100-sxm", ""),
    ("h200", "h200", ""),
    ("l40s", "l40s", ""),
    ("rtx 4090", "rtx-4090", ""),
    ("rtx 3090 ti", "rtx-3090",
     "RTX 3090 Ti measured; capsim has only the non-Ti RTX 3090 (936 vs 1008 GB/s, ~7% less "
     "bandwidth), so capsim should over-predict these rows by up to ~7%"),
    ("rtx 3090", "rtx-3090", ""),
    ("a100 40gb", "a100-40gb-sxm", "A100 40GB: SXM assumed (form factor unstated)"),
    ("a100 80gb pcie", "a100-80gb-pcie", ""),
    ("a100 80gb (vidur", "a100-80gb-sxm",
     "vidur 'a100' SKU: form factor unstated, SXM assumed (the Vidur testbed is reportedly "
     "A100 80GB PCIe, 5% less bandwidth)"),
    ("a100 80gb", "a100-80gb-sxm", "A100 80GB: SXM assumed (form factor unstated)"),
    ("a100 (variant unstated", "a100-80gb-sxm", "A100 variant unstated: SXM 80GB assumed"),
    ("a10g", "a10g", ""),
    ("a10", "a10", ""),
]

# (regex on the lower-cased model text, capsim model, note). First match wins.
MODEL_RULES = [
    (r"^llama-2-7b", "llama-2-7b", ""),
    (r"^llama 7b|^llama-7b", "llama-2-7b", "LLaMA-7B has the same shapes as Llama-2-7B"),
    (r"^llama-2-13b", "llama-2-13b", ""),
    (r"^llama-2-70b", "llama-2-70b", ""),
    (r"^llama 70b", "llama-2-70b", "'LLaMA 70B' is Llama-2-70B (GQA; LLaMA-1 had no 70B)"),
    (r"^llama-3\.1-8b", "llama-3.1-8b", ""),
    (r"^llama-3-8b", "llama-3-8b", ""),
    (r"^gpt-j 6b|^gpt-j-6b", "gpt-j-6b", ""),
    (r"^mistral-7b", "mistral-7b", ""),
]

OTHER_ENGINE_NOTE = "other engine (llama.cpp/MLC/ExLlama)"

FILES = {
    "batch1": "batch1_decode_latency.csv",
    "trtllm": "trtllm_v0.6_static_batching.csv",
    "lmdeploy": "lmdeploy_a100_fp16.csv",
    "offline": "trtllm_v0.12_offline_throughput.csv",
}

# Summary groups, in report order: key -> (title, unit).
GROUPS = [
    ("batch1_decode_latency", "batch1_decode_latency.csv: batch-1 ms per output token, all "
     "comparable rows"),
    ("batch1_decode_latency:modelled_engines", "  of which measured with vLLM or LMDeploy"),
    ("batch1_decode_latency:other_engines", "  of which llama.cpp / MLC / ExLlama "
     "(predicted with the vllm profile)"),
    ("trtllm_v0.6_static_batching:ttft", "trtllm_v0.6_static_batching.csv: batch-1 first-token "
     "latency (prefill)"),
    ("lmdeploy_a100_fp16:tpot_p50", "lmdeploy_a100_fp16.csv: p50 per-token latency, batch "
     "1-64 (KV-limited rows excluded)"),
    ("lmdeploy_a100_fp16:ttft_batch1", "lmdeploy_a100_fp16.csv: batch-1 first-token latency "
     "(prefill)"),
    ("simulate:trtllm_v0.12_offline", "simulate: trtllm_v0.12_offline_throughput.csv, offline "
     "output tok/s of the TP group, bias > 0 = capsim predicts more tok/s (KV-starved and "
     "unrunnable rows excluded)"),
    ("simulate:trtllm_v0.12_offline:fp8", "  of which FP8 weights and KV (H200, H100, L40S)"),
    ("simulate:trtllm_v0.12_offline:16bit", "  of which 16-bit weights and KV (H100, A100)"),
    ("simulate:lmdeploy_throughput", "simulate: lmdeploy_a100_fp16.csv, static-batch output "
     "tok/s, batch 1-64 (KV-limited rows excluded)"),
]

# Operator groups that Vidur's kernel-only sums contain (per layer: linear layers, norms,
# activation, rotary, residual adds); everything else (attention, lm_head, all-reduce, engine
# overhead) is outside what those rows measured.
KERNEL_ONLY_GROUPS = ("qkv_proj", "o_proj", "mlp", "elementwise")

# Report sections (the order rows are sorted in) -> short name used in the >30% table.
SECTION_TITLES = {
    "batch1": "batch-1 decode",
    "kernel": "kernel-only",
    "lmdeploy_kv_limited": "LMDeploy KV-limited (not in medians)",
    "lmdeploy_tpot": "LMDeploy per-token",
    "lmdeploy_ttft": "LMDeploy first-token",
    "trtllm": "TRT-LLM first-token",
}

# ---------------------------------------------------------------------------------------------
# Serving simulation (`capsim simulate`) against the published throughput sweeps
# ---------------------------------------------------------------------------------------------

# trtllm_v0.12_offline_throughput.csv: (substring of the lower-cased gpu text, capsim card or
# None = skip, note or skip reason). First match wins ("gh200" must precede "h200").
OFFLINE_CARD_RULES = [
    ("gh200", None, "GH200 has no capsim card (Grace Hopper superchip; the h200 card is a "
     "different memory system, so it is not substituted)"),
    ("h200", "h200", ""),
    ("h100 sxm", "h100-sxm", ""),
    ("a100 sxm4 80gb", "a100-80gb-sxm", ""),
    ("l40s", "l40s", ""),
]

# lower-cased model text -> (capsim model or None = skip, Hugging Face id trtllm-bench used,
# note or skip reason).
OFFLINE_MODELS = {
    "gptj 6b": ("gpt-j-6b", "EleutherAI/gpt-j-6b", ""),
    "llama v2 7b": ("llama-2-7b", "meta-llama/Llama-2-7b-hf", ""),
    "llama v2 70b": ("llama-2-70b", "meta-llama/Llama-2-70b-hf", ""),
    "llama v3 8b": ("llama-3-8b", "meta-llama/Meta-Llama-3-8B", ""),
    "llama v3 70b": ("llama-3.1-70b", "meta-llama/Meta-Llama-3-70B",
                     "Llama-3-70B run as llama-3.1-70b (same layer shapes and vocabulary)"),
    "mistral 7b": ("mistral-7b", "mistralai/Mistral-7B-v0.1",
                   "Mistral-7B-v0.1 run as capsim mistral-7b (v0.3: vocabulary 32768 vs 32000)"),
    "mixtral 8x7b": ("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", ""),
    "falcon 180b": (None, "tiiuae/falcon-180B", "Falcon-180B is not in capsim's catalogue"),
}

# trtllm-bench's engine settings (max_batch_size, max_num_tokens) per Hugging Face model and TP,
# keyed by the engine's max sequence length (ISL + OSL) with "general" as the fallback, as
# `trtllm-bench build --dataset` looked them up. Copied from
# NVIDIA/TensorRT-LLM@8fcf9fc21589b366c3f79da100e289b78b7d118c
# tensorrt_llm/bench/build/benchmark_config.yml (the stored version of that file; that it is the
# exact v0.12.0 file is not verified, but its Llama-2-7B TP1 entry, 4096/8192, matches the
# v0.12 perf-overview.md example output).
TRTLLM_BENCH_CONFIG_REF = ("NVIDIA/TensorRT-LLM@8fcf9fc21589b366c3f79da100e289b78b7d118c "
                           "tensorrt_llm/bench/build/benchmark_config.yml")
TRTLLM_BENCH_SETTINGS = {
    "meta-llama/Llama-2-7b-hf": {1: {"general": (4096, 8192)}},
    "meta-llama/Llama-2-70b-hf": {2: {"general": (2048, 2048)},
                                  4: {"general": (4096, 8192), 4224: (256, 8192)},
                                  8: {"general": (8192, 16384), 2176: (1024, 16384)}},
    "tiiuae/falcon-180B": {4: {"general": (4096, 8192)}, 8: {"general": (2048, 8192)}},
    "EleutherAI/gpt-j-6b": {1: {"general": (128, 2048), 256: (2048, 2048)}},
    "meta-llama/Meta-Llama-3-8B": {1: {"general": (2048, 8192)}},
    "meta-llama/Meta-Llama-3-70B": {4: {"general": (2048, 1024)},
                                    8: {"general": (8192, 16384)}},
    "mistralai/Mixtral-8x7B-v0.1": {2: {"general": (2048, 3072)}, 4: {"general": (8192, 8192)}},
    "mistralai/Mistral-7B-v0.1": {1: {"general": (4098, 8192)}},
}
TRTLLM_BENCH_FALLBACK = (2048, 8192)

# trtllm-bench's runtime settings of the same period (context chunking on by default,
# --kv_cache_free_gpu_mem_fraction default 0.90).
TRTLLM_BENCH_RUN_REF = ("NVIDIA/TensorRT-LLM@4c224fdc8bf3e566b1ab6b1c85b91c5afa34b210 "
                        "tensorrt_llm/bench/run/dataclasses.py")

# $num_requests per ISL/OSL from the v0.12 perf-overview.md ("Preparing a Dataset").
TRTLLM_NUM_REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500,
                       (2048, 128): 3000, (2048, 2048): 1500}

# trtllm-bench 0.12 gives the KV cache this fraction of the GPU memory left free after the engine
# loads (perf-overview.md example output: "KV Memory Percentage: 99.0%"; the same run's log in
# the 0.12.0.dev2024073000 benchmarks/Suite.md allocates 62.99 GiB of KV cache of 63.62 GiB
# available = 0.990).
TRTLLM_KV_FREE_FRACTION = 0.99

# The tensorrt-llm profile's decoder buffers (memory.decoder_per_sequence_vocab, bytes per
# max_batch_size slot per vocabulary entry) and the other published figure, for the sensitivity
# runs (calibration/engines/tensorrt-llm.yaml, reference trtllm-decoder).
TRTLLM_DECODER_ALT = 35.6

# The tensorrt-llm profile's per-sequence overhead (overhead.per_sequence) is chosen on the TP1
# offline rows among these values, in us (calibration/engines/tensorrt-llm.yaml,
# capsim-fit-per-sequence); the report re-runs the grid (Validator.offline_per_seq_grid).
TRTLLM_PER_SEQ_GRID = (0.3, 6, 12, 18)

# A median of the accuracy baseline may grow by this many percentage points before
# --check-baseline fails (issue #32: "moves past the committed baseline by more than 1 point").
BASELINE_TOLERANCE_POINTS = 1.0

# Sensitivity runs of the offline comparison: name -> description (see Validator.offline_args).
OFFLINE_VARIANTS = [
    ("primary", "as compared above"),
    ("prefill_first", "`--scheduler prefill-first` (whole prompts in prefill-only steps, a "
     "prompt longer than the budget alone), published max_num_tokens unchanged"),
    ("no_kv_cap", "no guaranteed-no-evict cap: max_num_seqs = max_batch_size, capsim admits on "
     "free blocks and preempts (vLLM behaviour)"),
    ("kv_free_0.90", "KV cache = 0.90 of free memory (the --kv_cache_free_gpu_mem_fraction "
     "default of trtllm-bench's code of that period) instead of the 0.99 the v0.12 example "
     "output shows"),
    ("decoder_none", "no decoder buffers (the tensorrt-llm profile's "
     "memory.decoder_per_sequence_vocab taken as 0: capsim before it modelled them)"),
    ("decoder_35.6", f"decoder buffers of {TRTLLM_DECODER_ALT} B per max_batch_size slot per "
     "vocabulary entry (the 0.12.0.dev2024073000 log) instead of the profile's value"),
]


# ---------------------------------------------------------------------------------------------
# capsim
# ---------------------------------------------------------------------------------------------

class Capsim:
    """Runs the capsim binary, caching results; waits for the binary while it is rebuilt."""

    def __init__(self, path, wait_s=300):
        self.path = path
        self.wait_s = wait_s
        self.cache = {}

    def _run(self, args):
        deadline = time.monotonic() + self.wait_s
        while True:
            if os.path.isfile(self.path) and os.access(self.path, os.X_OK):
                try:
                    return subprocess.run([self.path] + args, capture_output=True, text=True,
                                          timeout=120)
                except OSError as exc:  # e.g. "Text file busy" while the linker writes it
                    err = exc
            else:
                err = "not found"
            if time.monotonic() > deadline:
                sys.exit(f"validate.py: cannot run {self.path}: {err}")
            time.sleep(3)

    def json(self, args):
        """capsim <args> --json - -> (dict or None, error text)."""
        key = tuple(args)
        if key not in self.cache:
            proc = self._run(list(args) + ["--json", "-"])
            result = None
            if proc.returncode in (0, 1):  # `fit` exits 1 for "does not fit" with valid JSON
                try:
                    result = json.loads(proc.stdout)
                except ValueError:
                    result = None
            err = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            self.cache[key] = (result, err[0] if err and result is None else "")
        return self.cache[key]

    def catalogue(self, what):
        proc = self._run(["list", what])
        if proc.returncode != 0:
            sys.exit(f"validate.py: `capsim list {what}` failed: {proc.stderr.strip()}")
        names, seen_rule = set(), False
        for line in proc.stdout.splitlines():
            if re.match(r"^\s*-{5,}\s*$", line):
                seen_rule = True
                continue
            if seen_rule and line.strip():
                names.add(line.split()[0])
        return names


def roofline_args(model, card, tp, weights, kv, engine, batch, context, prefill=0):
    args = ["roofline", "--model", model, "--card", card, "--tp", str(tp), "--weights", weights,
            "--kv-cache", kv, "--engine", engine, "--batch", str(batch),
            "--context", str(max(1, context))]
    if prefill:
        args += ["--prefill", str(prefill)]
    return args


# ---------------------------------------------------------------------------------------------
# Parsing helpers
# ---------------------------------------------------------------------------------------------

def map_card(gpu):
    g = gpu.lower()
    for sub, card, note in CARD_RULES:
        if sub in g:
            return card, note
    return None, ""


def map_model(model):
    m = model.lower().strip()
    for pattern, name, note in MODEL_RULES:
        if re.search(pattern, m):
            return name, note
    return None, ""


def map_precision(text):
    """Reference precision text -> (capsim weights, capsim kv-cache, note)."""
    t = text.lower()
    if t.startswith("fp8"):
        return "fp8", "fp8", ""
    if "q8_0" in t or "8-bit" in t:
        return "int8", "fp16", ("8-bit weight-only (GGUF Q8_0) run as capsim int8 (W8A8): same "
                                "weight bytes, decode is bandwidth-bound")
    if "q4" in t or "4-bit" in t:
        return "int4", "fp16", "4-bit weight-only quantisation run as capsim int4"
    if t.startswith("bf16"):
        return "bf16", "bf16", ""
    if t.startswith("fp16") or t.startswith("f16"):
        return "fp16", "fp16", ""
    return None, None, ""


def parse_context(text):
    """batch1 context text -> (decode context for the prediction, description)."""
    t = text.lower()
    m = (re.search(r"(\d+)\s*prompt\s*\+\s*(\d+)\s*gen", t)
         or re.search(r"(\d+)\s*in\s*/\s*(\d+)\s*out", t))
    if m:
        prompt, out = int(m.group(1)), int(m.group(2))
        return prompt + out // 2, f"{prompt} in / {out} out"
    return 128, f"'{text}': context 128 assumed"


def short_source(src):
    s = src.lower()
    if "vidur" in s:
        return "vidur profile"
    m = re.search(r"(llama\.cpp|llm-perf-bench|tensorrt-llm)[^#]*(pr #\d+)", s)
    if m:
        return {"llama.cpp": "llama.cpp", "llm-perf-bench": "llm-perf-bench",
                "tensorrt-llm": "TRT-LLM"}[m.group(1)] + " " + m.group(2).upper()
    if "lmdeploy" in s and "issue" in s:
        m = re.search(r"issue #?(\d+)", s)
        return "lmdeploy issue #" + (m.group(1) if m else "?")
    if "lmdeploy" in s:
        return "lmdeploy a100_fp16.md"
    if "tensorrt-llm" in s:
        return "TRT-LLM performance.md"
    m = re.search(r"https?://([^/\s]+)", src)
    return m.group(1) if m else src[:30]


def engine_of_batch1(row):
    """batch1 row -> (capsim engine, kind) with kind in {'lmdeploy','vllm','other','kernel'}."""
    text = (row["source"] + " " + row["precision"] + " " + row["how_measured"]).lower()
    if "vidur" in row["source"].lower():
        return "vllm", "kernel"
    if "lmdeploy" in text or "turbomind" in text:
        return "lmdeploy", "lmdeploy"
    if "vllm" in text:
        return "vllm", "vllm"
    return "vllm", "other"


def rounding_note(measured_ms):
    """Rows under 20 ms: the 1 ms rounding of the published value is a visible error."""
    if measured_ms >= 20:
        return ""
    return f"under 20 ms: 1 ms rounding = +/-{0.5 / measured_ms * 100:.0f}%"


def implied_rate(res, measured_ms):
    """What the measurement implies for the dominant resource, next to capsim's achievable."""
    t = measured_ms / 1e3
    if res.get("prefill_tokens", 0) and not res.get("batch", 0):
        return (f"measured implies {res['flops_per_gpu'] / t / 1e12:.0f} TFLOPS/GPU and "
                f"{res['bytes_per_gpu'] / t / 1e9:.0f} GB/s/GPU (capsim achievable "
                f"{res['achieved_flops_per_s'] / 1e12:.0f} TFLOPS, "
                f"{res['achieved_bytes_per_s'] / 1e9:.0f} GB/s)")
    return (f"measured implies {res['bytes_per_gpu'] / t / 1e9:.0f} GB/s/GPU "
            f"(capsim achievable {res['achieved_bytes_per_s'] / 1e9:.0f})")


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def num(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------

def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default, statistics 'inclusive')."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(rows):
    apes = [r["ape"] for r in rows]
    signed = [r["signed"] for r in rows]
    if not rows:
        return {"rows": 0, "median_ape": None, "p90_ape": None, "bias": None}
    return {"rows": len(rows),
            "median_ape": round(statistics.median(apes), 4),
            "p90_ape": round(percentile(apes, 0.9), 4),
            "bias": round(statistics.fmean(signed), 4)}


def pct(x, signed=False):
    if x is None:
        return "-"
    return f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}"


def ms(x):
    if x is None:
        return "-"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


# ---------------------------------------------------------------------------------------------
# Row building
# ---------------------------------------------------------------------------------------------
