"""scripts/validate.py's report: docs/validation.md from a finished Validator, and the accuracy
baseline (write and check)."""

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

from validate_common import *  # noqa: F401,F403,E402  (the rules, settings and helpers every part uses)


# ---------------------------------------------------------------------------------------------
# Engine calibration references (quoted in the report, not interpreted)
# ---------------------------------------------------------------------------------------------

def engine_calibration():
    out = []
    d = os.path.join(REPO, "calibration", "engines")
    if not os.path.isdir(d):
        return out
    for name in sorted(os.listdir(d)):
        if not name.endswith(".yaml"):
            continue
        text = open(os.path.join(d, name), encoding="utf-8").read()
        fit = re.search(r'^\s*capsim-fit:\s*"(.*)"\s*$', text, re.M)
        step = re.search(r"^\s*step:\s*\{value:\s*([^,}]+)", text, re.M)
        uses = sorted(set(re.findall(r"^\s*(\w+):\s*\{value:\s*([^,}]+),\s*source:\s*capsim-fit",
                                     text, re.M)))
        out.append((name[:-5], step.group(1).strip() if step else "?",
                    ", ".join(f"{k} {v.strip()}" for k, v in uses),
                    fit.group(1) if fit else "(no capsim-fit reference)"))
    return out


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def md_escape(text):
    return str(text).replace("|", "\\|")


def row_table(rows, predicted_label="predicted ms"):
    lines = ["| source | gpu -> card | model | precision -> weights | tp | engine | setting | "
             f"measured ms | {predicted_label} | APE % | signed % | role | largest groups | "
             "notes |",
             "|---|---|---|---|---|---|---|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(md_escape(x) for x in (
            r["source"], f"{r['gpu']} -> {r['card']}", r["model"],
            f"{r['precision']} -> {r['weights']}/{r['kv']} KV", r["tp"], r["engine"],
            r["setting"], ms(r["measured"]), ms(r["predicted"]), pct(r["ape"]),
            pct(r["signed"], True), r["role"], r["top"], "; ".join(r["notes"]))) + " |")
    return "\n".join(lines)


def stats_line(rows):
    s = summarize(rows)
    if not s["rows"]:
        return "no rows"
    return (f"{s['rows']} rows: median APE {pct(s['median_ape'])}%, p90 APE "
            f"{pct(s['p90_ape'])}%, bias {pct(s['bias'], True)}%")


def tok(x):
    if x is None:
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def sim_table(rows):
    lines = ["| gpu -> card | model | precision -> weights | tp | setting | engine limits | "
             "requests | measured tok/s | predicted tok/s | APE % | signed % | role | regime | "
             "diagnosis (capsim run) | notes |",
             "|---|---|---|---:|---|---|---:|---:|---:|---:|---:|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(md_escape(x) for x in (
            f"{r['gpu']} -> {r['card']}", r["model"],
            f"{r['precision']} -> {r['weights']}/{r['kv']} KV", r["tp"], r["setting"],
            r["limits"], r["requests"], tok(r["measured"]), tok(r["predicted"]), pct(r["ape"]),
            pct(r["signed"], True), r["role"], r["regime"], r["diagnosis"],
            "; ".join(r["notes"]))) + " |")
    return "\n".join(lines)


def breakdown_table(rows, title, keyf):
    groups = {}
    for r in rows:
        groups.setdefault(keyf(r), []).append(r)
    lines = [f"| {title} | rows | median APE % | p90 APE % | bias % |",
             "|---|---:|---:|---:|---:|"]
    for key in sorted(groups):
        s = summarize(groups[key])
        lines.append(f"| {md_escape(key)} | {s['rows']} | {pct(s['median_ape'])} | "
                     f"{pct(s['p90_ape'])} | {pct(s['bias'], True)} |")
    return "\n".join(lines)


def tp_class(r):
    return "TP1" if r["tp"] == 1 else "TP>1"


def offline_shape(r):
    """Issue #9's split of the offline rows: decode-heavy (OSL >= ISL) or prefill-heavy."""
    isl, osl = (int(x) for x in r["setting"].split("/"))
    return "decode-heavy" if osl >= isl else "prefill-heavy"


def batch_cap(r):
    """What capped the simulated batch (Validator.offline_args's cap text)."""
    return "KV-capped" if "= KV at full length" in r["diagnosis"] else "max_batch_size-capped"


def per_seq_grid_text(v):
    """The report's "Fit vs check" line, from the per-sequence grid re-run by
    Validator.offline_per_seq_grid."""
    raw = v.profile_value("per_sequence")
    prof = re.sub(r"(\d)([a-z]+)$", r"\1 \2", raw)
    grid = [g for g in v.per_seq_grid if g[1]["rows"]]
    if not grid:
        return (f"- **Fit vs check**: the tensorrt-llm profile's per-sequence overhead ({prof} "
                f"per running sequence per step) was chosen on the TP1 rows (`fit`) and checked "
                f"on the TP>1 rows. Its step overhead was chosen on the v0.6 first-token rows.")
    best = min(grid, key=lambda g: (g[1]["median_ape"], g[0]))
    checks = [g for g in grid if g[2]["rows"]]
    us = ", ".join(f"{g[0]:g}" for g in grid[:-1]) + f" and {grid[-1][0]:g}"
    tp1 = ", ".join(pct(g[1]["median_ape"]) for g in grid[:-1]) + \
        f" and {pct(grid[-1][1]['median_ape'])}"
    check = ", ".join(f"{pct(g[2]['median_ape'])}% with {g[0]:g} us" for g in checks)
    return (f"- **Fit vs check**: the tensorrt-llm profile's per-sequence overhead ({prof} per "
            f"running sequence per step) is chosen on the {grid[0][1]['rows']} TP1 rows (`fit`; "
            f"re-run here at {us} us: median APE {tp1}%, lowest at {best[0]:g} us); the "
            f"{checks[0][2]['rows'] if checks else 0} TP>1 rows are the check (median APE "
            f"{check or '-'}). Its step overhead was chosen on the v0.6 first-token rows.")


def simulation_report(v):
    L = []
    A = L.append
    off = [r for r in v.sim_rows if r["section"] == "offline"]
    starved = [r for r in v.sim_rows if r["section"] == "offline_kv_starved"]
    lmd = [r for r in v.sim_rows if r["section"] == "lmdeploy_sim"]
    lmd_kv = [r for r in v.sim_rows if r["section"] == "lmdeploy_sim_kv_limited"]
    raised = [r for r in v.sim_rows if "(budget " in r["limits"]]
    ctx = [r for r in v.sim_rows if any("trained context" in n for n in r["notes"])]
    fallback = [r for r in v.sim_rows if any("benchmark_config.yml" in n for n in r["notes"])]

    A("## Serving simulation against published throughput sweeps")
    A("")
    A("This part runs the whole serving simulation, `capsim simulate`, and compares its "
      "`output_throughput` (output tokens/s of the replica, i.e. of the whole TP group) with "
      "published throughput sweeps. Each run is deterministic (`--seed 1`, fixed lengths).")
    A("")
    A("- **Sign**: signed error = (predicted - measured) / measured on a throughput, so "
      "**positive means capsim predicts more tokens/s** (a faster engine), the opposite sense "
      "of the step-time tables above.")
    A("- **Regime** (`../shared/docs/validation-method.md`: label what a row measures): every "
      "TensorRT-LLM row is an offline run at infinite request rate, i.e. the engine saturated; "
      "its throughput is the engine's capacity (a latency from these runs would be queueing, "
      "and none is compared). The LMDeploy rows hold a fixed number of requests in flight "
      "(closed loop, static batches), so nothing queues beyond the batch, except in the "
      "KV-limited runs, which are reported apart.")
    A("- **Diagnosis column**: from capsim's run: the batch cap (TensorRT-LLM rows), mean "
      "sequences and tokens per step, peak KV-cache use, preemptions, mean step time and the "
      "split of busy time into compute-bound, memory-bound, communication and overhead.")
    A("")
    A("### trtllm_v0.12_offline_throughput.csv: TensorRT-LLM 0.12 offline throughput")
    A("")
    A("Source: `../shared/reference/trtllm_v0.12_offline_throughput.csv` (TensorRT-LLM "
      "perf-overview.md, v0.12.0: `trtllm-bench build` + `trtllm-bench throughput`, all "
      "requests issued at once, fixed ISL/OSL, in-flight batching). Measured = total output "
      "tokens/s of the TP group. How each row is reproduced:")
    A("")
    A("- `capsim simulate --engine tensorrt-llm --arrival offline --input-tokens ISL "
      "--output-tokens OSL --requests K --seed 1`, with K = trtllm-bench's own `$num_requests` "
      "for the ISL/OSL (30000 for 128/128, 3000 for 128/2048 and 2048/128, 1500 for 128/4096 "
      "and 2048/2048), so the fill and drain of the run weigh as in the benchmark.")
    A(f"- **Engine limits** (`engine limits` column, max_batch_size/max_num_tokens): what "
      f"`trtllm-bench build --dataset` looked up for the model, TP and ISL + OSL in "
      f"`{TRTLLM_BENCH_CONFIG_REF}` (the stored version of that file; its Llama-2-7B TP1 entry, "
      f"4096/8192, is the one the v0.12 perf-overview.md example prints). Where the file has "
      f"no entry for the TP ({len(fallback)} rows) "
      f"{TRTLLM_BENCH_FALLBACK[0]}/{TRTLLM_BENCH_FALLBACK[1]} is assumed and the row says so.")
    A(f"- **KV cache**: trtllm-bench gives the KV cache {TRTLLM_KV_FREE_FRACTION:.0%} of the "
      "memory left free after the engine loads (perf-overview.md example: \"KV Memory "
      "Percentage: 99.0%\"; the same example's log in the 0.12.0.dev2024073000 "
      "benchmarks/Suite.md allocates 62.99 GiB of KV cache of 63.62 GiB available, 0.990). The script asks `capsim fit` for capsim's own weight, activation "
      "and runtime sizes at the row's limits and sets `--gpu-memory-utilization` so that "
      "capsim's KV cache is that fraction of capsim's free memory (the value is in the "
      "diagnosis column). capsim's runtime memory for this engine includes TensorRT-LLM's "
      "decoder buffers, allocated for max_batch_size slots x the vocabulary before the KV "
      "cache is sized (`memory.decoder_per_sequence_vocab` of the tensorrt-llm profile, "
      f"{v.decoder_profile_bytes():g} B per slot per vocabulary entry; "
      "docs/cost-model.md#sampler-buffers): with max_batch_size 8192 and Llama-3's "
      f"128,256-token vocabulary that is {v.decoder_profile_bytes() * 8192 * 128256 / 1e9:.1f} "
      "GB per GPU. The sensitivity table shows the offline rows without them and with the "
      "other published figure.")
    A("- **Scheduling**: trtllm-bench runs the Guaranteed-No-Evict capacity policy: a request "
      "starts only when the KV blocks for its whole ISL + OSL can be reserved. capsim has no "
      "such policy; with fixed lengths it is reproduced exactly by capping `--max-num-seqs` at "
      "min(max_batch_size, KV blocks / blocks of one full sequence) (`batch cap` in the "
      "diagnosis), so nothing is ever preempted.")
    A(f"- **Chunked context**: trtllm-bench of that period runs with context chunking on "
      f"(`ExecutorSettingsConfig.chunking = True` -> `enable_chunked_context`, "
      f"{TRTLLM_BENCH_RUN_REF}); capsim's "
      f"tensorrt-llm profile has chunked prefill off and no flag to turn it on, and without "
      f"chunking a prompt that does not fit the step's token budget next to the running "
      f"decodes would wait until they finish (or forever when max_num_tokens < ISL). The "
      f"token budget is therefore raised to max(max_num_tokens, ISL + batch cap), shown as "
      f"`(budget N)` ({len(raised)} rows).")
    A(f"- **Context**: trtllm-bench builds each engine with max_seq_len = ISL + OSL and "
      f"TensorRT-LLM serves past the checkpoint's trained context (GPT-J 2048, Llama-2 4096), "
      f"while capsim rejects such requests as vLLM does; those {len(ctx)} rows run from a copy "
      f"of the catalogue's config.json with the context raised to ISL + OSL (the context "
      f"enters no cost).")
    A("- **Mappings**: H200 SXM -> `h200`, H100 SXM -> `h100-sxm`, A100 SXM4 80GB -> "
      "`a100-80gb-sxm`, L40S -> `l40s`; GH200 is skipped (no capsim card; not substituted by "
      "`h200`, whose memory system differs). LLaMA v2 7B/70B -> `llama-2-7b`/`llama-2-70b`, "
      "LLaMA v3 8B -> `llama-3-8b`, LLaMA v3 70B -> `llama-3.1-70b` (same shapes), GPT-J 6B "
      "-> `gpt-j-6b`, Mistral 7B (v0.1) -> `mistral-7b` (v0.3 config: vocabulary 32768 vs "
      "32000), Mixtral 8x7B -> `mixtral-8x7b`; Falcon 180B is skipped (not in the "
      "catalogue). FP8 -> `--weights fp8 --kv-cache fp8` (trtllm-bench sets the KV cache to "
      "FP8 with FP8 weights); 'Mixed' (FP16/BF16) -> bf16 weights and KV.")
    A(per_seq_grid_text(v))
    A("- **Apart from the medians**: the rows the source marks as KV-starved (16-bit 70B at "
      "TP2 on 80 GB cards: the weights nearly fill the GPUs) and any row capsim cannot run "
      "as published.")
    A("")
    A(f"Result: {stats_line(off)} (FP8: "
      f"{stats_line([r for r in off if r['weights'] == 'fp8'])}; 16-bit: "
      f"{stats_line([r for r in off if r['weights'] != 'fp8'])}).")
    A("")
    A("#### Error by slice")
    A("")
    A(breakdown_table(off, "card, weights", lambda r: f"{r['card']}, {r['weights']}"))
    A("")
    A(breakdown_table(off, "ISL/OSL", lambda r: r["setting"]))
    A("")
    A(breakdown_table(off, "model, TP", lambda r: f"{r['model']}, TP{r['tp']}"))
    A("")
    A(breakdown_table(off, "TP", lambda r: f"TP{r['tp']}"))
    A("")
    # Issue #9's shape split, crossed with TP and with the KV dtype and what capped the batch:
    # the decode-heavy bias sits in the TP>1 rows, and within them in the 16-bit rows and the
    # rows whose batch the KV cache caps (docs/cost-model.md#trt-llm-decode-attention).
    A(breakdown_table(off, "TP, shape", lambda r: f"{tp_class(r)}, {offline_shape(r)}"))
    A("")
    A(breakdown_table(off, "weights and KV, TP, shape",
                      lambda r: f"{r['weights']}, {tp_class(r)}, {offline_shape(r)}"))
    A("")
    A(breakdown_table(off, "batch cap, TP, shape",
                      lambda r: f"{batch_cap(r)}, {tp_class(r)}, {offline_shape(r)}"))
    A("")
    A("#### Sensitivity to the reproduction choices")
    A("")
    A("The compared rows re-run with one choice changed at a time (same rows, same request "
      "counts):")
    A("")
    A("| variant | what changes | rows | median APE % | p90 APE % | bias % | rows capsim "
      "could not run |")
    A("|---|---|---:|---:|---:|---:|---:|")
    for name, desc, s, failed in v.variants:
        A(f"| {name} | {md_escape(desc)} | {s['rows']} | {pct(s['median_ape'])} | "
          f"{pct(s['p90_ape'])} | {pct(s['bias'], True)} | {failed} |")
    A("")
    A("#### Rows")
    A("")
    A(sim_table(off))
    A("")
    A("#### KV-starved rows (reported apart)")
    A("")
    A("The source marks these runs as batch-limited: 16-bit 70B weights nearly fill 2 x 80 "
      f"GB, so the few sequences that fit set the throughput. {stats_line(starved)}.")
    A("")
    A(sim_table(starved))
    A("")
    apart = [a for a in v.sim_apart if a["file"] == FILES["offline"]]
    A("#### Rows capsim cannot run as published")
    A("")
    if not apart:
        A("None.")
    else:
        A("| gpu -> card | model | precision | tp | setting | measured tok/s | why |")
        A("|---|---|---|---:|---|---:|---|")
        for a in apart:
            A(f"| {md_escape(a['gpu'])} -> {a['card']} | {a['model']} | "
              f"{md_escape(a['precision'])} | {a['tp']} | {a['setting']} | "
              f"{tok(a['measured'])} | {md_escape(a['why'])} |")
    A("")
    A("#### Skipped rows")
    A("")
    counts = {}
    for s in v.sim_skipped:
        key = (s[0], s[1], s[2], s[6])
        counts.setdefault(key, []).append(f"{s[3].split(' ')[0]} TP{s[4]} {s[5]}")
    if not counts:
        A("None.")
    else:
        A("| file | gpu | model | rows | reason |")
        A("|---|---|---|---:|---|")
        for (fname, gpu, model, reason), items in sorted(counts.items()):
            A(f"| {fname} | {md_escape(gpu)} | {md_escape(model)} | {len(items)} | "
              f"{md_escape(reason)} |")
    A("")
    A("### lmdeploy_a100_fp16.csv: LMDeploy TurboMind static-batch throughput")
    A("")
    A("Source: `../shared/reference/lmdeploy_a100_fp16.csv`, rows with metric "
      "`output_tok_per_s_total` (lmdeploy v0.1.0a1 static benchmark: `batch` concurrent "
      "requests with fixed prompt/output lengths; output tokens/s of the TP group). "
      "Predicted: `capsim simulate --engine lmdeploy --scheduler static --concurrency B "
      "--requests max(3B, 8) --card a100-80gb-sxm --weights fp16 --kv-cache fp16 --tp N "
      "--input-tokens ISL --output-tokens OSL --seed 1`, with the profile's defaults "
      "otherwise: B requests start together, prefill in one step and decode until all finish, "
      "then the next B start. The diagnosis column sets the step time the measurement implies "
      "(batch / throughput, which counts the prefill and every gap between steps) beside "
      "capsim's mean step and the same run's measured p50 per-token latency (one decode "
      "step). Batch-1 rows are `fit` (the lmdeploy profile's overheads were chosen on "
      "batch-1 rows of this file), the rest `check`. Runs whose batch at full length cannot "
      "hold its KV cache (the test of the per-token section above) are reported apart.")
    A("")
    A(f"Result: {stats_line(lmd)}.")
    A("")
    A(breakdown_table(lmd, "batch", lambda r: f"batch {int(r['sort'][2]):2d}"))
    A("")
    A(breakdown_table(lmd, "model, TP", lambda r: f"{r['model']}, TP{r['tp']}"))
    A("")
    A(sim_table(lmd))
    A("")
    A("#### KV-limited runs (reported apart)")
    A("")
    A(f"{stats_line(lmd_kv)}.")
    A("")
    A(sim_table(lmd_kv))
    A("")
    return L


def report(v, date, summary):
    L = []
    A = L.append
    A("# capsim validation report")
    A("")
    A(f"Generated by scripts/validate.py on {date}; do not edit by hand "
      "(`python3 scripts/validate.py --out docs/validation.md`).")
    A("")
    A("## Method")
    A("")
    A("capsim's `roofline` command predicts the time of one engine step (`step_seconds`) from "
      "the model's shapes, the card's datasheet peaks and calibrated efficiencies, and the "
      "engine profile's overheads. This report compares that prediction with published "
      "measurements of the same thing, row by row, following "
      "`../shared/docs/validation-method.md`:")
    A("")
    A("- **Per row**: APE = |predicted - measured| / measured, and the signed error "
      "(predicted - measured) / measured; positive means capsim predicts a slower step.")
    A("- **Per source and metric**: the median and the 90th percentile of APE (linear "
      "interpolation between ranks) and the bias, the mean signed error.")
    A("- **What is predicted**: a decode row is `capsim roofline --batch B --context C` with "
      "C = prompt + output/2 (the mean context over the generation); a first-token row is a "
      "prefill-only step, `--batch 0 --prefill <prompt>`. The engine, precision of weights "
      "and KV cache, TP and card are the row's own (mappings below).")
    A("- **Apart from the medians**: rows that measure something other than one engine step "
      "are reported in their own tables and excluded from the medians: Vidur's kernel-only "
      "sums (no attention, lm_head, all-reduce or CPU overhead), and LMDeploy runs whose "
      "batch cannot hold its KV cache (the engine ran fewer sequences at once than the "
      "stated batch, so the per-token latency belongs to a different batch).")
    A("- **Fit vs check**: the engine overheads were chosen on some of these rows (column "
      "`role` = fit; see [Engine overheads](#engine-overheads)); the other rows (`check`) "
      "are out of sample. The summary gives both.")
    A("- **Mappings**: A100 80GB -> `a100-80gb-sxm` (form factor unstated in every source; "
      "the PCIe part has 5% less bandwidth), A100 40GB -> `a100-40gb-sxm`, H100 SXM and "
      "Vidur's H100 -> `h100-sxm`, RTX 3090 Ti -> `rtx-3090` (the non-Ti card, ~7% less "
      "bandwidth), LLaMA-7B -> `llama-2-7b` (same shapes), 'LLaMA 70B' -> `llama-2-70b`. "
      "8-bit GGUF (Q8_0) -> `--weights int8`, 4-bit (Q4_0, MLC q4f16_1, GPTQ) -> "
      "`--weights int4`: capsim's int8/int4 have the same weight bytes, and batch-1 decode "
      "is bandwidth-bound, but they do not model the dequantisation kernels' efficiency. "
      "llama.cpp, MLC and ExLlama rows use the `vllm` engine profile (capsim has no profile "
      "for them). FP8 -> `--weights fp8 --kv-cache fp8`.")
    A("- **Resolution**: LMDeploy's table prints latencies in seconds with 3 decimals, so "
      "values are rounded to 1 ms (+/-0.5 ms: +/-5% at 10 ms; the reference README says 10 ms "
      "resolution, but values such as 0.009, 0.017 and 0.019 s show 1 ms); TRT-LLM's "
      "first-token latencies are whole milliseconds. Rows under 20 ms carry a rounding "
      "error of 2.5-7% that no model can remove; each row's notes give its bound.")
    A("")
    A("## Summary")
    A("")
    A("| source (metric) | rows | median APE % | p90 APE % | bias % | check rows | check "
      "median APE % | check bias % |")
    A("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key, title in GROUPS:
        if key not in summary:
            continue
        s = summary[key]
        c = summarize([r for r in v.group_rows(key) if r["role"] == "check"])
        A(f"| {md_escape(title.strip())} (`{key}`) | {s['rows']} | {pct(s['median_ape'])} | "
          f"{pct(s['p90_ape'])} | {pct(s['bias'], True)} | {c['rows']} | "
          f"{pct(c['median_ape'])} | {pct(c['bias'], True)} |")
    for key, s in summary.items():
        if key.startswith("vllm_dev_runs:"):
            A(f"| vllm_dev_runs.csv: simulate end to end, {key.split(':')[1]} (`{key}`) | "
              f"{s['rows']} | {pct(s['median_ape'])} | {pct(s['p90_ape'])} | "
              f"{pct(s['bias'], True)} | | | |")
        if key.startswith("vllm_dev_runs_out_of_fold:"):
            A(f"| vllm_dev_runs.csv: {key.split(':')[1]}, each run out of fold (constants fitted "
              f"without its model x card, [Out-of-fold errors](#out-of-fold)) (`{key}`) | "
              f"{s['rows']} | {pct(s['median_ape'])} | {pct(s['p90_ape'])} | "
              f"{pct(s['bias'], True)} | | | |")
    kernel = [r for r in v.rows if r["section"] == "kernel"]
    kvl = [r for r in v.rows if r["section"] == "lmdeploy_kv_limited"]
    A("")
    A(f"Not in the medians: {len(kernel)} Vidur kernel-only rows ({stats_line(kernel)}, "
      f"against capsim's matching operator groups) and {len(kvl)} KV-limited LMDeploy rows "
      f"({stats_line(kvl)}).")
    if v.simulation:
        starved = [r for r in v.sim_rows if r["section"] == "offline_kv_starved"]
        lmd_kv = [r for r in v.sim_rows if r["section"] == "lmdeploy_sim_kv_limited"]
        A("")
        A(f"Serving simulation, not in the medians: {len(starved)} TensorRT-LLM rows the "
          f"source marks KV-starved ({stats_line(starved)}) and {len(lmd_kv)} KV-limited "
          f"LMDeploy throughput rows ({stats_line(lmd_kv)}); signed errors of throughputs are "
          f"positive where capsim predicts more tokens/s. See "
          f"[Serving simulation](#serving-simulation-against-published-throughput-sweeps).")
    A("")

    big = [r for r in v.rows if r["ape"] > 0.30 and r["section"] != "kernel"]
    A("### Rows off by more than 30%")
    A("")
    if not big:
        A("None.")
    else:
        A("| table | source | card | model | tp | setting | measured ms | predicted ms | "
          "signed % | largest groups |")
        A("|---|---|---|---|---:|---|---:|---:|---:|---|")
        for r in big:
            A(f"| {SECTION_TITLES[r['section']]} | {md_escape(r['source'])} | {r['card']} | "
              f"{r['model']} | {r['tp']} | "
              f"{md_escape(r['setting'])} | {ms(r['measured'])} | {ms(r['predicted'])} | "
              f"{pct(r['signed'], True)} | {r['top']} |")
    A("")

    A("## batch1_decode_latency.csv: batch-1 decode, ms per output token")
    A("")
    A("Source: `../shared/reference/batch1_decode_latency.csv`. Measured = ms per output token "
      "at batch 1; predicted = one decode step at batch 1 with context prompt + output/2 "
      "(128 where the context is unstated or `tg128`).")
    A("")
    A(row_table([r for r in v.rows if r["section"] == "batch1"]))
    A("")
    A("### Kernel-only rows (not comparable to a full step)")
    A("")
    A("Vidur's rows sum the per-layer medians of every non-attention kernel (linear layers, "
      "norms, activation, rotary, residual adds) times the layer count; they exclude "
      "attention, lm_head, sampling, all-reduce and CPU overhead, so they are a lower bound "
      "on a real step and are not in the medians. `predicted ms` here is the sum of "
      "capsim's matching operator groups (" + ", ".join(KERNEL_ONLY_GROUPS) + "), per GPU; "
      "the notes give capsim's full step for comparison.")
    A("")
    A(row_table(kernel, "predicted ms (same groups)"))
    A("")

    A("## trtllm_v0.6_static_batching.csv: batch-1 first-token latency")
    A("")
    A("Source: `../shared/reference/trtllm_v0.6_static_batching.csv`, rows with metric "
      "`ttft_ms` (TRT-LLM v0.5 static engine, batch 1, prefill of the input plus one token). "
      "Predicted: `--engine tensorrt-llm --batch 0 --prefill <input_len>`.")
    A("")
    A(row_table([r for r in v.rows if r["section"] == "trtllm"]))
    A("")

    A("## lmdeploy_a100_fp16.csv: LMDeploy TurboMind on A100 80GB, FP16")
    A("")
    A("Source: `../shared/reference/lmdeploy_a100_fp16.csv` (lmdeploy v0.1.0a1 static "
      "benchmark: `batch` concurrent requests with fixed prompt/output lengths). Card assumed: "
      "`a100-80gb-sxm` (the source says A100-80G x8, form factor unstated; the PCIe part "
      "has 5% less bandwidth, so capsim would predict ~5% slower decode on it).")
    A("")
    A("### p50 per-token latency")
    A("")
    A("Predicted: `--engine lmdeploy --weights fp16 --batch B --context (input + output/2)`; "
      "in a static batch every sequence has the same context, so one decode step is one "
      "output token of every request.")
    A("")
    A(row_table([r for r in v.rows if r["section"] == "lmdeploy_tpot"]))
    A("")
    A("### KV-limited runs (reported apart)")
    A("")
    A("These runs' batch at full length (input + output tokens per sequence) needs more KV "
      "cache than the GPU has after the weights (checked with `capsim fit`; a necessary "
      "condition that ignores activations and runtime memory, so only runs that cannot fit "
      "at all are listed). TurboMind then runs fewer sequences at once, or evicts and "
      "recomputes, so the measured per-token latency is not that of a batch-B step; their "
      "first-token latencies (tens of seconds) show requests waiting in waves.")
    A("")
    A(row_table(kvl))
    A("")
    A("### Batch-1 first-token latency")
    A("")
    A("Predicted: the prompt's prefill step (`--engine lmdeploy --batch 0 --prefill <input_len>`; "
      "none for a 1-token prompt) plus one decode step (`--batch 1 --context <input_len + 1>`). "
      "Why the decode step: TurboMind v0.1 streams the first token from its first generation "
      "iteration, which is what the measured rows show (a 128-token prompt costs a prefill plus "
      "a decode step, a 1-token prompt one step). That reading is a hypothesis about the "
      "benchmark, applied to every row alike; no constant is fitted to these rows. Rows at "
      "batch 16-64 include queueing behind the other requests' prefills and are not compared.")
    A("")
    A(row_table([r for r in v.rows if r["section"] == "lmdeploy_ttft"]))
    A("")

    if v.simulation:
        L.extend(dev_runs.report_lines(v.dev_runs))
        if v.xval:
            L.extend(fit_engine_constants.report_lines(v.xval))
        L.extend(simulation_report(v))

    A("## Engine overheads")
    A("")
    A("Per-step and per-sequence overheads and efficiency scales of the engine profiles "
      "(`calibration/engines/*.yaml`) marked `source: capsim-fit`, with the rows their "
      "reference says they were chosen on. Rows with `role` = fit above are those rows; the "
      "summary's check columns exclude them.")
    A("")
    A("| engine | step overhead | constants marked capsim-fit | chosen on (from the yaml) |")
    A("|---|---|---|---|")
    for name, step, uses, fit in engine_calibration():
        A(f"| {name} | {md_escape(step)} | {md_escape(uses)} | {md_escape(fit)} |")
    A("")
    A("All of the TRT-LLM first-token rows are in the fit set of the tensorrt-llm profile, so "
      "that source has no out-of-sample rows here; the card efficiencies "
      "(`calibration/cards/*.yaml`) come from Vidur's kernel profiles and datasheets, not from "
      "these rows.")
    A("")
    # The component check has its own generated page (scripts/kernel_validation.py); only the
    # link lives here, so that regenerating this file keeps it.
    A("<a id=\"kernels\"></a>")
    A("## Kernels: predicted vs measured kernel times (component validation)")
    A("")
    A("capsim's kernel times (roofline, and the measured-table lookup on held-out shapes) against "
      "the measured GEMM, attention, MoE and all-reduce tables of `calibration/kernels/`, per op, "
      "card and dtype: [kernel-validation.md](kernel-validation.md), written whole by "
      "`scripts/kernel_validation.py`.")
    A("")

    A("## Skipped rows")
    A("")
    if v.skipped:
        A("| file | source | gpu | model | precision | setting | reason |")
        A("|---|---|---|---|---|---|---|")
        for s in v.skipped:
            A("| " + " | ".join(md_escape(x) for x in s) + " |")
    else:
        A("None.")
    A("")
    A("## Not compared")
    A("")
    for fname, count, what, why in v.not_compared:
        A(f"- `{fname}`: {count} {what}: {why}.")
    A("- `consumer_gpu_single_stream.csv` is not compared yet (its decode rows repeat "
      "batch1_decode_latency.csv).")
    if not v.simulation:
        A("- `trtllm_v0.12_offline_throughput.csv` and the LMDeploy throughput rows: the "
          "serving simulation was not run (`--no-simulate`).")
    A("")
    return "\n".join(L)


def baseline_of(summary):
    """The accuracy baseline: each in-sample median of the summary, in percent, with its rows.
    The out-of-fold medians are left out: the ctest does not refit (--no-cross-validate)."""
    return {"about": "Median APE per source of scripts/validate.py's summary (percent). The "
                     "accuracy ctest (tests/accuracy/accuracy_test.py) fails when one grows by "
                     f"more than {BASELINE_TOLERANCE_POINTS:g} point or is scored on other rows. "
                     "Change this file only in a commit that says why "
                     "(python3 scripts/validate.py --no-cross-validate --write-baseline FILE).",
            "tolerance_points": BASELINE_TOLERANCE_POINTS,
            "medians": {key: {"rows": s["rows"], "median_ape_pct": round(100 * s["median_ape"], 2)}
                        for key, s in sorted(summary.items())
                        if s["median_ape"] is not None
                        and not key.startswith("vllm_dev_runs_out_of_fold:")}}


def check_baseline(summary, baseline):
    """-> (failures, notes): lines naming each median that moved past the baseline."""
    failures, notes = [], []
    tol = float(baseline.get("tolerance_points", BASELINE_TOLERANCE_POINTS))
    for key, base in sorted(baseline["medians"].items()):
        s = summary.get(key)
        if s is None or s["median_ape"] is None:
            failures.append(f"{key}: no longer scored (baseline {base['median_ape_pct']:.2f}% "
                            f"on {base['rows']} rows)")
            continue
        now = 100 * s["median_ape"]
        if s["rows"] != base["rows"]:
            failures.append(f"{key}: scored on {s['rows']} rows, baseline {base['rows']} "
                            f"(median {now:.2f}%, baseline {base['median_ape_pct']:.2f}%)")
        elif now > base["median_ape_pct"] + tol:
            failures.append(f"{key}: median APE {now:.2f}%, baseline {base['median_ape_pct']:.2f}% "
                            f"(+{now - base['median_ape_pct']:.2f} points, more than {tol:g})")
        elif now < base["median_ape_pct"] - tol:
            notes.append(f"{key}: median APE {now:.2f}%, baseline {base['median_ape_pct']:.2f}% "
                         f"(better by {base['median_ape_pct'] - now:.2f} points: lower the "
                         "baseline in a commit that says why)")
    return failures, notes
