#!/usr/bin/env python3
"""Out-of-sample check of capsim's tensorrt-llm profile on TensorRT-LLM 0.14.0's published
offline-throughput table (perf-overview.md, "All data in the table below was generated using
version 0.14.0"), to separate "TP>1", "Llama-70B" and "8 query heads per KV head" (issue #9).

Source text: arthurrasmusson/TensorRT-LLM@e00d4e6564921307dd264b61fe1d46f116095e0e
docs/source/performance/perf-overview.md (a fork's copy of the v0.14 page; upstream
NVIDIA/TensorRT-LLM is too large to fetch here). Only the rows this script compares are
transcribed below, as measured output tok/s of the whole TP group (FP8 weights + FP8 KV:
"If you specify FP8 quantization, the KV cache will automatically be set to FP8 as well").

Each row is run the way scripts/validate.py runs the v0.12 rows (its Validator.offline_memory,
model_arg, simulate are reused): capsim simulate --engine tensorrt-llm --arrival offline, fixed
ISL/OSL, the page's $num_requests, KV = 0.99 of free memory, batch cap = min(max_batch_size,
KV at full length) (Guaranteed No Evict), budget = max(max_num_tokens, ISL + cap). The engine
limits are those v0.14's `trtllm-bench build --dataset` picks (tensorrt_llm/bench/build/
tuning.py calc_engine_setting/finetune_setting, read at FrankD412/TensorRT-LLM@231118eb; the
v0.14 copy itself not verified), computed from the GPU memory capsim's card gives. Nothing is
fitted. Usage: python3 scripts/trtllm_v014_check.py [--capsim PATH] [--jobs N] > out.tsv
"""
import argparse
import concurrent.futures as cf
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate as V  # noqa: E402

SRC = ("arthurrasmusson/TensorRT-LLM@e00d4e65 docs/source/performance/perf-overview.md "
       "(v0.14.0 table)")

# $num_requests per ISL/OSL (the same page, "Preparing a Dataset").
NUM_REQ = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (2048, 128): 3000,
           (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000,
           (20000, 2000): 1000}

# (page model, capsim model, card) -> {(isl, osl): {tp: measured tok/s}} (FP8 columns only).
H200, H100 = "h200", "h100-sxm"
ROWS = {
    ("LLaMA v3.1 70B", "llama-3.1-70b", H200): {
        (1000, 1000): {1: 2585.0953, 2: 4600.9616, 4: 7607.5304, 8: 13081.434},
        (128, 128): {1: 3897.2623, 2: 5357.0227, 4: 8826.9618, 8: 16382.9807},
        (128, 2048): {1: 3612.2603, 2: 7054.7235, 4: 12763.4114, 8: 19266.0398},
        (128, 4096): {1: 2415.1981, 2: 5671.9561, 4: 8939.8227, 8: 13974.2854},
        (20000, 2000): {1: 240.7202, 2: 614.318, 4: 1030.9528, 8: 1898.9762},
        (2048, 128): {1: 458.1948, 2: 692.3911, 4: 1034.5773, 8: 2070.8157},
        (2048, 2048): {1: 1797.6743, 2: 3518.0774, 4: 6112.9026, 8: 9716.1934},
        (500, 2000): {1: 2826.6665, 2: 6106.5855, 4: 10816.8283, 8: 17693.705},
    },
    ("LLaMA v3.1 70B", "llama-3.1-70b", H100): {
        (1000, 1000): {2: 4116.4444, 4: 6932.8808, 8: 10730.156},
        (128, 128): {2: 5194.8171, 4: 8542.3012, 8: 15533.1169},
        (128, 2048): {2: 5869.3998, 4: 9017.4377, 8: 15190.1652},
        (128, 4096): {2: 3518.782, 4: 6431.2702, 8: 9168.709},
        (20000, 2000): {2: 397.6801, 4: 851.8542, 8: 1354.5333},
        (2048, 128): {2: 697.3907, 4: 1001.0771, 8: 1966.6072},
        (2048, 2048): {2: 2445.0093, 4: 4838.5272, 8: 7434.8117},
        (500, 2000): {2: 4605.9226, 4: 9205.3766, 8: 13109.4437},
    },
    ("LLaMA v3.1 8B", "llama-3.1-8b", H200): {
        (1000, 1000): {1: 16414.6988}, (128, 128): {1: 27778.8885}, (128, 2048): {1: 22948.5383},
        (128, 4096): {1: 15583.3035}, (20000, 2000): {1: 1649.5453}, (2048, 128): {1: 3619.4309},
        (2048, 2048): {1: 11032.9729}, (500, 2000): {1: 19510.4015}, (5000, 500): {1: 3787.6721},
    },
    ("LLaMA v3.1 8B", "llama-3.1-8b", H100): {
        (1000, 1000): {1: 14108.0361}, (128, 128): {1: 26933.1886}, (128, 2048): {1: 18995.2523},
        (128, 4096): {1: 11815.449}, (20000, 2000): {1: 1301.4754}, (2048, 128): {1: 3460.3545},
        (2048, 2048): {1: 8777.6623}, (500, 2000): {1: 14993.328}, (5000, 500): {1: 3258.2001},
    },
    ("Mixtral 8x7B", "mixtral-8x7b", H200): {
        (1000, 1000): {2: 18712.2046, 4: 32834.0923, 8: 44410.7533},
        (128, 128): {2: 24970.5594, 4: 42500.5855, 8: 54304.0436},
        (128, 2048): {2: 29314.1475, 4: 52680.8353, 8: 70409.1968},
        (128, 4096): {2: 21520.4385, 4: 32550.5267, 8: 40373.4857},
        (20000, 2000): {2: 2204.1378, 4: 4047.7473, 8: 6561.6849},
        (2048, 128): {2: 2958.0873, 4: 5229.8744, 8: 7030.9766},
        (2048, 2048): {2: 13842.834, 4: 22389.4914, 8: 28975.322},
        (500, 2000): {2: 23459.0411, 4: 39971.0236, 8: 60721.462},
        (5000, 500): {2: 3742.5293, 4: 6602.3877, 8: 8862.8164},
    },
    ("Mixtral 8x7B", "mixtral-8x7b", H100): {
        (1000, 1000): {2: 15931.8663, 4: 28015.1981, 8: 40573.0499},
        (128, 128): {2: 24321.9927, 4: 40182.7271, 8: 51030.9048},
        (128, 2048): {2: 20945.7816, 4: 40668.5928, 8: 64529.9982},
        (128, 4096): {2: 12070.6724, 4: 29120.2002, 8: 36357.7861},
        (20000, 2000): {2: 1659.5907, 4: 3290.9457, 8: 5328.5261},
        (2048, 128): {2: 2883.5166, 4: 4972.6818, 8: 6532.721},
        (2048, 2048): {2: 9334.0732, 4: 20185.8212, 8: 26176.9163},
        (500, 2000): {2: 18185.6392, 4: 31693.8787, 8: 48842.8084},
        (5000, 500): {2: 3563.8228, 4: 6020.6267, 8: 8214.9445},
    },
}
SH = [(1000, 1000), (128, 128), (128, 2048), (128, 4096), (20000, 2000), (2048, 128),
      (2048, 2048), (500, 2000), (5000, 500)]
# Larger groups at TP8 only: Llama-3.1-405B (128 query heads / 8 KV = 16), Mixtral-8x22B (48 / 8
# = 6); the H200 / H100 FP8 columns of the same table.
ROWS[("LLaMA v3.1 405B", "llama-3.1-405b", H200)] = dict(zip(SH, ({8: x} for x in (
    3391.0372, 3766.2785, 5952.1416, 3944.117, 481.5732, 444.5735, 2604.8557, 4805.86,
    655.9754))))
ROWS[("Mixtral 8x22B", "mixtral-8x22b", H200)] = dict(zip(SH, ({8: x} for x in (
    18557.43, 25179.4765, 27492.4926, 19718.8648, 2897.182, 3093.8418, 13795.9827, 24637.473,
    3889.2745))))
ROWS[("Mixtral 8x22B", "mixtral-8x22b", H100)] = dict(zip(SH, ({8: x} for x in (
    16918.03, 23729.5293, 24556.7807, 17755.0018, 2189.606, 2917.1362, 12487.6502, 19997.3914,
    3578.4843))))
# 5000/500 Llama-3.1-70B values are on the page's second chunk; H200 TP1 533.6128, TP2
# 936.7014, TP4 1386.4827, TP8 2711.5057; H100 TP1 125.4236, TP2 886.6758, TP4 1313.893, TP8
# 2444.9643.
ROWS[("LLaMA v3.1 70B", "llama-3.1-70b", H200)][(5000, 500)] = {
    1: 533.6128, 2: 936.7014, 4: 1386.4827, 8: 2711.5057}
ROWS[("LLaMA v3.1 70B", "llama-3.1-70b", H100)][(5000, 500)] = {
    2: 886.6758, 4: 1313.893, 8: 2444.9643}


LAYERS = {"llama-3.1-70b": 80, "llama-3.1-8b": 32, "mixtral-8x7b": 32, "llama-3.1-405b": 126,
          "mixtral-8x22b": 56}


def finetune_setting(kv_max_requests, isl, osl):
    """trtllm-bench build's (max_batch_size, max_num_tokens) from its KV estimate (pp 1)."""
    raw_bs = min(kv_max_requests, 4096)
    raw_token = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_token < 4096:
        tok = max(2048, 256 * math.ceil(raw_token / 256))
    elif raw_token < 8192:
        tok = 512 * math.ceil(raw_token / 512)
    else:
        tok = 1024 * math.ceil(raw_token / 1024)
    return bs, tok


def bench_build_limits(v, model, card, tp, isl, osl):
    """calc_engine_setting: (GPU memory x TP - params x 1 B) x 0.95 / (KV GiB per token x seq)."""
    res, err = v.capsim.json(["fit", "--model", model, "--card", card, "--tp", str(tp),
                              "--weights", "fp8", "--kv-cache", "fp8", "--engine", "tensorrt-llm",
                              "--context", str(isl + osl)])
    if res is None:
        return None, err
    g = res["per_gpu"]
    gib = 1024 ** 3
    total = g["visible_bytes"] * tp / gib
    engine = res["total_params"] * 1.0 / gib
    per_token = res["kv_bytes_per_token_total"] / gib  # capsim's KV bytes/token, whole model
    kv_req = (total - engine) * 0.95 / (per_token * (isl + osl))
    return finetune_setting(kv_req, isl, osl), ""


KV_FREE = [V.TRTLLM_KV_FREE_FRACTION]
MNT = [0]  # > 0: max_num_tokens override (sensitivity to the unverified v0.14 heuristic)


def run_row(v, page_model, model, card, tp, isl, osl, measured):
    lim, err = bench_build_limits(v, model, card, tp, isl, osl)
    out = {"page_model": page_model, "model": model, "card": card, "tp": tp, "isl": isl,
           "osl": osl, "measured": measured}
    if lim is None:
        out["err"] = err
        return out
    mbs, mnt = lim
    if MNT[0] > 0:
        mnt = MNT[0]
    util, blocks, block, err = v.offline_memory(
        {"model": model, "card": card, "weights": "fp8", "kv": "fp8"}, tp, mbs, mnt, isl + osl,
        KV_FREE[0])
    if util is None:
        out["err"] = err
        return out
    kv_cap = blocks // -(-(isl + osl) // block)
    if kv_cap < 1:
        out["err"] = "KV holds no full sequence"
        return out
    cap = min(mbs, kv_cap)
    budget = max(mnt, isl + cap)
    req = NUM_REQ[(isl, osl)]
    model_arg, _ = v.model_arg(model, isl + osl)
    args = ["--model", model_arg, "--card", card, "--tp", str(tp), "--weights", "fp8",
            "--kv-cache", "fp8", "--engine", "tensorrt-llm", "--arrival", "offline",
            "--requests", str(req), "--input-tokens", str(isl), "--output-tokens", str(osl),
            "--max-num-seqs", str(cap), "--max-num-batched-tokens", str(budget),
            "--gpu-memory-utilization", f"{util:.4f}"]
    res, err = v.simulate(args)
    out.update({"mbs": mbs, "mnt": mnt, "kv_cap": kv_cap, "cap": cap, "budget": budget,
                "requests": req})
    if res is None or res.get("completed", 0) < req:
        out["err"] = err or "incomplete"
        return out
    out["capsim"] = res["output_throughput"]
    out["signed"] = (out["capsim"] - measured) / measured
    # cost-model.md's residual metric: capsim's mean step x (predicted / measured - 1), per layer
    # and per context token a step decodes (mean batch x (ISL + OSL/2)), in ns.
    c = res.get("capsim", {})
    layers = LAYERS[model]
    ctx = c.get("mean_batch_sequences", 0) * (isl + osl / 2)
    out["step_ms"] = c.get("mean_step_ms", 0)
    out["batch"] = c.get("mean_batch_sequences", 0)
    if ctx > 0:
        out["ns_ctx"] = (out["step_ms"] * 1e6 * (out["capsim"] / measured - 1)) / (layers * ctx)
    return out


def write_summary(results, path):
    """Per (model, card, TP), in row order: decode-heavy (OSL >= ISL, validate.py's split) and
    prefill-heavy signed % of capsim over measured, median [min, max] (rows)."""
    import statistics as st
    keys = []
    for r in results:
        k = (r["model"], r["card"], r["tp"])
        if k not in keys:
            keys.append(k)
    f = lambda xs: (f"{st.median(xs):+.1f} [{min(xs):+.1f}, {max(xs):+.1f}] ({len(xs)})"
                    if xs else "-")
    with open(path, "w") as out:
        out.write("| model | card | TP | decode-heavy signed % median [min, max] (rows) "
                  "| prefill-heavy |\n|---|---|---|---|---|\n")
        for k in keys:
            rs = [r for r in results if (r["model"], r["card"], r["tp"]) == k and "signed" in r]
            d = [100 * r["signed"] for r in rs if r["osl"] >= r["isl"]]
            p = [100 * r["signed"] for r in rs if r["osl"] < r["isl"]]
            out.write(f"| {k[0]} | {k[1]} | {k[2]} | {f(d)} | {f(p)} |\n")


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--capsim", default=os.path.join(root, "build", "capsim"))
    ap.add_argument("--shared", default=os.path.join(root, "..", "shared"))
    ap.add_argument("--summary", default="", help="also write the per (model, card, TP) "
                    "decode-heavy / prefill-heavy signed %% medians as a Markdown table here")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="substring filter on 'model card'")
    ap.add_argument("--kv-free", type=float, default=V.TRTLLM_KV_FREE_FRACTION,
                    help="KV cache share of free memory (validate.py: 0.99; trtllm-bench's "
                         "--kv_cache_free_gpu_mem_fraction default of the period: 0.90)")
    ap.add_argument("--mnt", type=int, default=0,
                    help="override max_num_tokens for every row (0: v0.14 heuristic)")
    a = ap.parse_args()
    KV_FREE[0] = a.kv_free
    MNT[0] = a.mnt
    v = V.Validator(V.Capsim(a.capsim), a.shared)
    work = []
    for (pm, model, card), shapes in ROWS.items():
        if a.only and a.only not in f"{model} {card}":
            continue
        for (isl, osl), by_tp in shapes.items():
            for tp, meas in by_tp.items():
                work.append((pm, model, card, tp, isl, osl, meas))
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        results = list(ex.map(lambda w: run_row(v, *w), work))
    print("\t".join(["model", "card", "tp", "isl", "osl", "measured", "capsim", "signed_pct",
                     "mbs", "mnt", "kv_cap", "cap", "mean_batch", "step_ms", "ns_per_layer_ctx_tok",
                     "note"]))
    for r in results:
        print("\t".join(str(x) for x in [
            r["model"], r["card"], r["tp"], r["isl"], r["osl"], f"{r['measured']:.1f}",
            f"{r['capsim']:.1f}" if "capsim" in r else "-",
            f"{100 * r['signed']:+.1f}" if "signed" in r else "-",
            r.get("mbs", "-"), r.get("mnt", "-"), r.get("kv_cap", "-"), r.get("cap", "-"),
            f"{r['batch']:.0f}" if "batch" in r else "-",
            f"{r['step_ms']:.1f}" if "step_ms" in r else "-",
            f"{r['ns_ctx']:+.2f}" if "ns_ctx" in r else "-", r.get("err", "")]))
    if a.summary:
        write_summary(results, a.summary)
    if v.tmpdir:
        import shutil
        shutil.rmtree(v.tmpdir, ignore_errors=True)


if __name__ == "__main__":
    main()
