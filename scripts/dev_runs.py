#!/usr/bin/env python3
"""capsim against the real vLLM v0.15.1 serving runs of ../shared/reference/vllm_dev_runs.csv.

Usage:
    python3 scripts/dev_runs.py [--capsim build/capsim] [--shared ../shared] [--fit] [--json F]

Each run is replayed end to end through `capsim simulate` with the workload the load generator
really sent (vllm_dev_runs.md): inference-perf's shared_prefix generator with its defaults of 10
groups x 10 prompts, each prompt = its group's system prompt + its own question, resent every 100
requests after one shuffle (`--prefix-groups 10 --prompts-per-group 10`); constant arrivals at a
fixed 1/rate gap in back-to-back stages; fixed output lengths (ignore_eos). The prompt carries
the ~25 tokens the measured prompt lengths show beyond system + question (re-tokenisation), the
measured excess where the row has it. Engine settings are the row's (max_num_seqs,
max_num_batched_tokens, gpu_memory_utilization, TP, DP as replicas, and the CPU KV tier of the runs
whose cpu_kv_offload says enabled: --kv-offloading-size 8, vLLM's OffloadingConnector, see
OFFLOAD_GIB_DEFAULT); precision FP16 runs as
16-bit weights and KV, FP8 as FP8 weights with a 16-bit KV cache (vLLM's default kv-cache-dtype
auto), MXFP4 as the checkpoint ships it (`--weights auto`: mxfp4 experts, bf16 attention;
16-bit math on Hopper).

Compared per run: TTFT mean/p50/p90/p99, E2E mean/p50/p90/p99 and the mean time per output token
(E2E mean - TTFT mean) / (output - 1). Runs whose notes say overloaded, superseded or DP=2 are
reported apart and left out of the medians (vllm_dev_runs.md).

--fit fits the engine profile's request path (calibration/engines/vllm.yaml `request_path`) by
non-negative least squares on relative errors: the inference-perf runs are simulated with the front end and return path set to
zero, and measured minus simulated mean TTFT is regressed on [1, prompt tokens, mean sequences
per step]: the constant is front end + return, the prompt term the tokeniser's per-token cost,
the batch term the return path's per-sequence cost. The fit uses every run in the medians; it is
checked per run and by leave-one-out in the report.

Python 3 standard library only; deterministic (seed 1 for every run).
"""

import argparse
import csv
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE = "vllm_dev_runs.csv"

CARDS = [("h100", "h100-sxm"), ("a100-80gb", "a100-80gb-sxm"), ("h200", "h200")]
# Prompt tokens beyond system + question in inference-perf's measured prompt lengths
# (vllm_dev_runs.md: "~25 tokens of re-tokenisation overhead"), where a row has no measurement.
RETOKENISE_TOKENS = 25
# inference-perf's shared_prefix defaults that the runs really used (vllm_dev_runs.md).
GROUPS, PROMPTS_PER_GROUP = 10, 10
# inference-perf's client gives up on a request after aiohttp's default total timeout, 300 s:
# its openai_client.py passes aiohttp.helpers.sentinel when no timeout is configured
# (kubernetes-sigs/inference-perf inference_perf/client/modelserver/openai_client.py), and
# aiohttp's ClientSession default is ClientTimeout(total=5 * 60). The overloaded runs agree: their
# failed requests are client timeouts and their slowest successes end just under 300 s (E2E p99
# 290-298 s). vLLM aborts a request whose client disconnects, so capsim aborts it too
# (--request-timeout); under normal load no request comes near it.
CLIENT_TIMEOUT_S = 300
# vLLM's CPU KV tier (OffloadingConnector) as the runs had it: `cpu_kv_offload` says "enabled: 8 GiB
# OffloadingConnector" on the inference-perf rows; the sim-to-real rows say only "enabled
# (cpu_kv_blocks>0 ...)", and their cpu_kv_blocks are 8 GiB over one GPU's block bytes in every
# case (Scout TP2: 8 GiB / 1.5 MiB = 5461; Llama-3.1-70B TP4: 8 GiB / 1.25 MiB = 6553), so the
# same campaign's 8 GiB. capsim sizes the tier as vLLM's CPUOffloadingSpec does (the GiB over a
# block's bytes on all ranks: TP x fewer blocks than those columns at TP > 1).
OFFLOAD_GIB_DEFAULT = 8
NO_OFFLOAD = False  # --no-offload: replay without the CPU tier (to see what it changes)
METRICS = [("ttft_mean", "ttft_mean_ms", "mean_ttft_ms"), ("ttft_p50", "ttft_p50_ms", "median_ttft_ms"),
           ("ttft_p90", "ttft_p90_ms", "p90_ttft_ms"), ("ttft_p99", "ttft_p99_ms", "p99_ttft_ms"),
           ("e2e_mean", "e2e_mean_ms", "mean_e2el_ms"), ("e2e_p50", "e2e_p50_ms", "median_e2el_ms"),
           ("e2e_p90", "e2e_p90_ms", "p90_e2el_ms"), ("e2e_p99", "e2e_p99_ms", "p99_e2el_ms"),
           ("tpot_mean", "decode_ms_per_token_est", None)]


def num(text):
    m = re.match(r"\s*~?\s*([-+]?\d+(\.\d*)?([eE][-+]?\d+)?)", text or "")
    return float(m.group(1)) if m else None


def excluded(row):
    n = row["notes"].lower()
    if "overloaded" in n:
        return "overloaded"
    if "superseded" in n:
        return "superseded"
    if int(num(row["dp"]) or 1) > 1:
        return "DP=2 (router case)"
    return ""


def card_of(gpu):
    g = gpu.lower()
    for sub, card in CARDS:
        if sub in g:
            return card
    return None


# Checkpoints the runs name whose architecture is another id's config (a re-upload under another
# organisation, an FP8 re-quantisation of the same model).
SAME_ARCHITECTURE = {
    "codellama/codellama-34b-instruct-hf": "meta-llama/CodeLlama-34b-Instruct-hf",
    "redhatai/llama-4-scout-17b-16e-instruct-fp8-dynamic": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
}


def model_arg(hf_id, shared, known_ids):
    """The catalogue name when capsim knows the Hugging Face id, else the shared config path."""
    hf_id = SAME_ARCHITECTURE.get(hf_id.lower(), hf_id)
    if hf_id.lower() in known_ids:
        return known_ids[hf_id.lower()]
    path = os.path.join(shared, "model-configs", hf_id.replace("/", "__"), "config.json")
    return path if os.path.isfile(path) else None


def precision_args(text):
    t = text.lower()
    if t.startswith("fp8"):
        return ["--weights", "fp8", "--kv-cache", "auto"]
    if "mxfp4" in t:
        # The checkpoint as shipped (`--weights auto`): MXFP4 routed experts (on Hopper vLLM's
        # Triton/Marlin MXFP4 MoE kernels, 16-bit math) beside bf16 attention.
        return ["--weights", "auto", "--kv-cache", "auto"]
    return ["--weights", "fp16", "--kv-cache", "fp16"]


def offload_args(row):
    """--kv-offloading-size for a run whose cpu_kv_offload says enabled (its GiB when stated)."""
    text = row.get("cpu_kv_offload", "").lower()
    if not text.startswith("enabled"):
        return []
    m = re.search(r"(\d+(\.\d+)?)\s*gib", text)
    return ["--kv-offloading-size", m.group(1) if m else str(OFFLOAD_GIB_DEFAULT)]


def run_args(row, shared, known_ids):
    """capsim simulate arguments for one run -> (args, output tokens, prompt tokens, error)."""
    card = card_of(row["gpu"])
    model = model_arg(row["model"], shared, known_ids)
    if card is None or model is None:
        return None, 0, 0, f"no capsim card/model for {row['gpu']} / {row['model']}"
    tp, dp = int(num(row["tp"])), int(num(row["dp"]) or 1)
    out = int(num(row["output_len_requested"]))
    system = int(num(row["system_prompt_len"]) or 0)
    question = int(num(row["question_len"]))
    measured_prompt = num(row["prompt_len_mean"])
    extra = RETOKENISE_TOKENS
    if measured_prompt is not None and system > 0:
        extra = max(0, round(measured_prompt) - system - question)
    args = ["--model", model, "--card", card, "--tp", str(tp), "--replicas", str(dp)]
    args += precision_args(row["precision"])
    args += ["--max-num-seqs", str(int(num(row["max_num_seqs"]))),
             "--max-num-batched-tokens", str(int(num(row["max_num_batched_tokens"]))),
             "--gpu-memory-utilization", str(num(row["gpu_memory_utilization"]) or 0.9),
             "--output-tokens", str(out)]
    if row["prefix_caching"].lower().startswith("disabled"):
        args += ["--prefix-caching", "false"]
    if not NO_OFFLOAD:
        args += offload_args(row)
    rates = row["stage_rates_rps"].split("|")
    if rates == ["inf"]:
        # vllm bench serve at a fixed concurrency (the conc in the run's name), random prompts.
        conc = int(re.search(r"conc(\d+)", row["exp_key"]).group(1))
        args += ["--concurrency", str(conc), "--requests", str(int(num(row["num_requests_sent"]))),
                 "--input-tokens", str(question)]
        return args, out, question, ""
    durations = row["stage_durations_s"].split("|")
    stages = ",".join(f"{r}@{d}s" for r, d in zip(rates, durations))
    total = sum(float(d) for d in durations)
    args += ["--arrival", "constant", "--rate", stages, "--duration", f"{total:g}s",
             "--request-timeout", f"{CLIENT_TIMEOUT_S}s",
             "--input-tokens", str(question + extra), "--prompts-per-group", str(PROMPTS_PER_GROUP),
             "--prefix-groups", str(GROUPS), "--system-prompt-tokens", str(system)]
    return args, out, system + question + extra, ""


class Runner:
    def __init__(self, capsim, engine_file=None):
        self.capsim = capsim
        self.engine_file = engine_file

    def simulate(self, args):
        cmd = [self.capsim, "simulate"] + args + ["--seed", "1", "-q", "--json", "-"]
        if self.engine_file:
            cmd += ["--engine", self.engine_file]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            return None, (p.stderr.strip() or p.stdout.strip()).splitlines()[:1]
        return json.loads(p.stdout), ""


def known_models(capsim):
    p = subprocess.run([capsim, "list", "models", "--json", "-"], capture_output=True, text=True)
    ids = {}
    try:
        listed = json.loads(p.stdout)
    except ValueError:
        sys.exit(f"dev_runs.py: `{capsim} list models` failed: {p.stderr.strip()}")
    for m in listed:
        if m.get("hf_id"):
            ids[m["hf_id"].lower()] = m["name"]
    return ids


def evaluate(runner, shared, known_ids):
    rows = list(csv.DictReader(open(os.path.join(shared, "reference", FILE), encoding="utf-8")))
    out = []
    for row in rows:
        args, osl, prompt, err = run_args(row, shared, known_ids)
        rec = {"run": row["exp_key"].split(":", 1)[1], "card": card_of(row["gpu"]) or row["gpu"],
               "model": row["model"].split("/")[-1], "tp": int(num(row["tp"])),
               "moe": bool(re.search(r"mixtral|scout|gpt-oss|moe", row["model"].lower())),
               "excluded": excluded(row), "prompt": prompt,
               "harness": "vllm bench serve" if row["exp_key"].startswith("vllm-perf") else "inference-perf", "output": osl, "error": err,
               "measured": {}, "predicted": {}}
        for key, col, _ in METRICS:
            rec["measured"][key] = num(row[col])
        rec["measured_failed"] = num(row["failures"])
        rec["sent"] = num(row["num_requests_sent"].lstrip("~").split()[0]) if row["num_requests_sent"] else None
        if args is not None:
            res, err = runner.simulate(args)
            rec["error"] = err
            if res is not None:
                for key, _, jkey in METRICS:
                    if jkey:
                        rec["predicted"][key] = res[jkey]
                rec["predicted"]["tpot_mean"] = ((res["mean_e2el_ms"] - res["mean_ttft_ms"]) /
                                                 max(1, osl - 1))
                c = res["capsim"]
                rec["batch"] = c["mean_batch_sequences"]
                rec["step_ms"] = c["mean_step_ms"]
                rec["ttft_parts"] = {k: res[f"mean_{k}_ms"] for k in
                                     ("frontend", "queue", "prefill", "first_token_return")}
                rec["completed"] = res["completed"]
                rec["failed"] = res["failed"]
        out.append(rec)
    return out


def ape_rows(records, metric):
    rows = []
    for r in records:
        m, p = r["measured"].get(metric), r["predicted"].get(metric)
        if r["excluded"] or m is None or p is None or m <= 0:
            continue
        rows.append({"ape": abs(p - m) / m, "signed": (p - m) / m, "rec": r})
    return rows


def summarize(rows):
    if not rows:
        return {"rows": 0, "median_ape": None, "p90_ape": None, "bias": None}
    apes = sorted(r["ape"] for r in rows)
    k = (len(apes) - 1) * 0.9
    lo, hi = int(k), min(int(k) + 1, len(apes) - 1)
    return {"rows": len(rows), "median_ape": statistics.median(apes),
            "p90_ape": apes[lo] + (apes[hi] - apes[lo]) * (k - lo),
            "bias": statistics.mean(r["signed"] for r in rows)}


def nnls(xs, ys):
    """Least squares of ys on the columns of xs with every coefficient >= 0 (by enumerating
    which coefficients are free; at most a few columns)."""
    n = len(xs[0])
    best = None
    for k in range(n + 1):
        for free in itertools.combinations(range(n), k):
            coef = [0.0] * n
            if free:
                # Normal equations on the free columns (Gaussian elimination, tiny systems).
                a = [[sum(x[i] * x[j] for x in xs) for j in free] for i in free]
                b = [sum(x[i] * y for x, y in zip(xs, ys)) for i in free]
                sol = solve(a, b)
                if sol is None or any(v < 0 for v in sol):
                    continue
                for i, v in zip(free, sol):
                    coef[i] = v
            sse = sum((y - sum(c * xi for c, xi in zip(coef, x))) ** 2 for x, y in zip(xs, ys))
            if best is None or sse < best[0] - 1e-12:
                best = (sse, coef)
    return best[1]


def solve(a, b):
    n = len(b)
    m = [row[:] + [bv] for row, bv in zip(a, b)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) < 1e-12:
            return None
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def summaries(recs):
    """{"vllm_dev_runs:<metric>": {rows, median_ape, p90_ape, bias}} over the runs in the medians."""
    return {f"vllm_dev_runs:{key}": summarize(ape_rows(recs, key)) for key, _, _ in METRICS}


def pct(x, signed=False):
    if x is None:
        return "-"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"


def report_lines(recs):
    """The Markdown section of docs/validation.md for the development runs."""
    L = []
    A = L.append
    A("<a id=\"vllm-dev-runs\"></a>")
    A("## vLLM v0.15.1 serving runs, end to end (vllm_dev_runs.csv)")
    A("")
    path = engine_path_values()
    A("Each run replayed through `capsim simulate` with the workload the load generator really "
      "sent (scripts/dev_runs.py: 10 groups x 10 recurring prompts, constant arrivals in the "
      "run's stages, fixed output lengths) and the run's engine settings (with the 8 GiB CPU KV "
      "tier, `--kv-offloading-size 8`, where `cpu_kv_offload` says enabled: "
      "[cost-model.md](cost-model.md#cpu-kv-offloading)); the default `vllm` "
      "profile, whose request path (docs/cost-model.md#request-path) was fitted on these runs' "
      f"mean TTFT (`python3 scripts/dev_runs.py --fit`, the 17 inference-perf runs: {path}). "
      "TPOT = (E2E mean - TTFT mean) / (output - 1), vllm_dev_runs.md's recommended per-token "
      "truth. inference-perf runs are replayed with its client's 300 s total timeout (aiohttp's "
      "default; `--request-timeout 300s`: a request not answered by then is aborted and counts as "
      "failed, as the overloaded runs' failures are). Runs marked overloaded, superseded or DP=2 "
      "are listed but not in the medians; "
      "the one `vllm bench serve` run (gpt-oss-120b on H200, 64 requests started at once) is "
      "checked, not fitted.")
    A("")
    A("| metric | runs | median APE % | p90 APE % | bias % |")
    A("|---|---:|---:|---:|---:|")
    for key, _, _ in METRICS:
        s = summarize(ape_rows(recs, key))
        A(f"| {key} | {s['rows']} | {pct(s['median_ape'])} | {pct(s['p90_ape'])} | "
          f"{pct(s['bias'], True)} |")
    A("")
    A("Split (median APE % / bias % of TTFT mean, TPOT, E2E mean):")
    A("")
    A("| split | runs | TTFT | TPOT | E2E |")
    A("|---|---:|---|---|---|")
    splits = [("card", lambda r: r["card"]), ("TP", lambda r: f"TP{r['tp']}"),
              ("dense/MoE", lambda r: "MoE" if r["moe"] else "dense"),
              ("harness", lambda r: r["harness"])]
    for name, key in splits:
        for value in sorted({key(r) for r in recs if not r["excluded"] and r["predicted"]}):
            sub = [r for r in recs if key(r) == value]
            cells = []
            for metric in ("ttft_mean", "tpot_mean", "e2e_mean"):
                s = summarize(ape_rows(sub, metric))
                cells.append(f"{pct(s['median_ape'])} / {pct(s['bias'], True)}")
            n = summarize(ape_rows(sub, "ttft_mean"))["rows"]
            A(f"| {name}: {value} | {n} | " + " | ".join(cells) + " |")
    A("")
    A("Per run (measured / predicted; ms). TTFT parts: capsim's mean front end + queue + "
      "prefill + return.")
    A("")
    A("| run | card | TP | model | TTFT mean | TTFT p90 | TPOT | E2E mean | TTFT parts | note |")
    A("|---|---|---:|---|---|---|---|---|---|---|")
    for r in sorted(recs, key=lambda r: (bool(r["excluded"]), r["model"], r["run"])):
        m, p = r["measured"], r["predicted"]
        if not p:
            A(f"| {r['run']} | {r['card']} | {r['tp']} | {r['model']} | | | | | | "
              f"not simulated: {r['error']} |")
            continue

        def cell(k):
            if m.get(k) is None or p.get(k) is None:
                return "-"
            return f"{m[k]:.1f} / {p[k]:.1f}"
        parts = " + ".join(f"{v:.1f}" for v in r["ttft_parts"].values())
        note = r["excluded"] or ""
        if r.get("measured_failed") or r.get("failed"):
            # Client timeouts (CLIENT_TIMEOUT_S): the latencies above cover the answered requests.
            sent = f" of {r['sent']:.0f}" if r.get("sent") else ""
            note += (f"{'; ' if note else ''}failed (client timeouts) {r.get('measured_failed') or 0:.0f} / "
                     f"{r.get('failed') or 0}{sent}")
        A(f"| {r['run']} | {r['card']} | {r['tp']} | {r['model']} | {cell('ttft_mean')} | "
          f"{cell('ttft_p90')} | {cell('tpot_mean')} | {cell('e2e_mean')} | {parts} | {note} |")
    A("")
    return L


def engine_path_values():
    """The shipped vllm profile's request path, as text for the report."""
    text = open(os.path.join(REPO, "calibration", "engines", "vllm.yaml"), encoding="utf-8").read()
    vals = {}
    for field in ("frontend", "frontend_per_prompt_token", "return", "return_per_sequence"):
        m = re.search(rf"\n  {field}: \{{value: ([^,]+),", text)
        vals[field] = m.group(1) if m else "?"
    return (f"front end {vals['frontend']} + {vals['frontend_per_prompt_token']} per prompt token, "
            f"return {vals['return']} + {vals['return_per_sequence']} per emitting sequence")


def engine_without_path(tmpdir):
    """A copy of the vllm profile with the front end and return path zeroed (for the fit)."""
    src = os.path.join(REPO, "calibration", "engines", "vllm.yaml")
    text = open(src, encoding="utf-8").read()
    for field in ("frontend", "frontend_per_prompt_token", "return", "return_per_sequence"):
        text = re.sub(rf"(\n  {field}: \{{value: )[^,]+,", r"\g<1>0s,", text)
    path = os.path.join(tmpdir, "vllm-no-path.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


ALLREDUCE_GRID_US = [0, 1, 2, 2.5, 3, 3.5, 4, 5, 6, 8]


def engine_with_allreduce_per_peer(tmpdir, us):
    """A copy of the vllm profile with communication.allreduce_latency_per_peer set to `us`."""
    src = os.path.join(REPO, "calibration", "engines", "vllm.yaml")
    text = open(src, encoding="utf-8").read()
    line = f"  allreduce_latency_per_peer: {{value: {us:g}us, source: dev-runs-allreduce}}"
    if re.search(r"\n  allreduce_latency_per_peer: \{", text):
        text = re.sub(r"\n  allreduce_latency_per_peer: \{[^}]*\}", "\n" + line, text)
    else:
        text = re.sub(r"(\n  allreduce_latency_pcie: \{[^}]*\})", r"\1" + "\n" + line, text, count=1)
    path = os.path.join(tmpdir, f"vllm-ar-{us:g}.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def fit_allreduce(capsim, shared, known_ids):
    """Grid search of the all-reduce latency added per GPU beyond the second, on the TP > 1
    inference-perf runs: the value whose TP4 runs' E2E bias is closest to 0 among those with the
    lowest median E2E error over all inference-perf runs. -> [(us, median E2E APE, TP4 bias,
    check-run TPOT error)]."""
    table = []
    with tempfile.TemporaryDirectory(prefix="capsim-devfit-ar-") as tmp:
        for us in ALLREDUCE_GRID_US:
            recs = evaluate(Runner(capsim, engine_with_allreduce_per_peer(tmp, us)), shared, known_ids)
            used = [r for r in recs if not r["excluded"] and r["predicted"]
                    and r["harness"] == "inference-perf"]
            e2e = statistics.median(abs(r["predicted"]["e2e_mean"] / r["measured"]["e2e_mean"] - 1)
                                    for r in used)
            tp4 = [r["predicted"]["e2e_mean"] / r["measured"]["e2e_mean"] - 1 for r in used if r["tp"] == 4]
            check = [r["predicted"]["tpot_mean"] / r["measured"]["tpot_mean"] - 1 for r in recs
                     if not r["excluded"] and r["predicted"] and r["harness"] != "inference-perf"]
            table.append((us, e2e, statistics.median(tp4) if tp4 else 0.0,
                          check[0] if check else float("nan")))
    best_e2e = min(round(t[1], 4) for t in table)
    chosen = min((t for t in table if round(t[1], 4) == best_e2e), key=lambda t: abs(t[2]))
    return table, chosen


def fit(capsim, shared, known_ids):
    with tempfile.TemporaryDirectory(prefix="capsim-devfit-") as tmp:
        recs = evaluate(Runner(capsim, engine_without_path(tmp)), shared, known_ids)
    # The inference-perf runs only: the one `vllm bench serve` run starts 64 requests at once in
    # synchronised waves, a different client whose TTFT is checked, not fitted.
    used = [r for r in recs if not r["excluded"] and r["predicted"] and r["harness"] == "inference-perf"]
    xs = [[1.0, float(r["prompt"]), float(r["batch"])] for r in used]
    ys = [r["measured"]["ttft_mean"] - r["predicted"]["ttft_mean"] for r in used]
    # Relative residuals (each run's equation divided by its measured TTFT), so the fit
    # minimises the errors the validation reports rather than the largest runs' milliseconds.
    ws = [1.0 / r["measured"]["ttft_mean"] for r in used]

    def solve_on(idx):
        return nnls([[xi * ws[i] for xi in xs[i]] for i in idx], [ys[i] * ws[i] for i in idx])
    coef = solve_on(range(len(used)))
    # Leave-one-out: each run's mean TTFT predicted with the path fitted on the others.
    loo = []
    for k in range(len(used)):
        c = solve_on([i for i in range(len(used)) if i != k])
        pred = used[k]["predicted"]["ttft_mean"] + sum(ci * xi for ci, xi in zip(c, xs[k]))
        loo.append(abs(pred - used[k]["measured"]["ttft_mean"]) / used[k]["measured"]["ttft_mean"])
    return coef, used, ys, statistics.median(loo)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capsim", default=os.path.join(REPO, "build", "capsim"))
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(REPO), "shared"))
    ap.add_argument("--fit", action="store_true", help="fit the vllm profile's request path")
    ap.add_argument("--fit-allreduce", action="store_true",
                    help="fit the vllm profile's all-reduce latency per GPU beyond the second")
    ap.add_argument("--json", metavar="FILE", help="write the per-run records as JSON")
    ap.add_argument("--no-offload", action="store_true",
                    help="replay without the runs' CPU KV tier (--kv-offloading-size), to see its effect")
    a = ap.parse_args(argv)
    global NO_OFFLOAD
    NO_OFFLOAD = a.no_offload
    if not os.path.isfile(os.path.join(a.shared, "reference", FILE)):
        print(f"dev_runs.py: {FILE} not found under {a.shared}/reference", file=sys.stderr)
        return 1
    ids = known_models(a.capsim)
    if a.fit_allreduce:
        table, chosen = fit_allreduce(a.capsim, a.shared, ids)
        print("all-reduce latency per GPU beyond the second (vllm profile), inference-perf runs:")
        for us, e2e, tp4, check in table:
            print(f"  {us:4g} us: median E2E APE {100 * e2e:5.2f}%  TP4 E2E bias {100 * tp4:+6.2f}%  "
                  f"check (vllm bench serve, TP8) TPOT {100 * check:+6.1f}%")
        print(f"chosen: {chosen[0]:g} us")
        return 0
    if a.fit:
        coef, used, ys, loo = fit(a.capsim, a.shared, ids)
        print(f"request path fit on {len(used)} runs (measured - simulated mean TTFT, ms):")
        print(f"  constant (front end + return) {coef[0]:.3f} ms")
        print(f"  per prompt token              {coef[1] * 1e3:.3f} us")
        print(f"  per sequence in the step      {coef[2] * 1e3:.3f} us")
        print(f"  leave-one-out median error of mean TTFT {100 * loo:.1f}%")
        for r, y in zip(used, ys):
            f = coef[0] + coef[1] * r["prompt"] + coef[2] * r["batch"]
            print(f"  {r['run'][:48]:48s} residual {y:7.2f} fitted {f:7.2f} "
                  f"(prompt {r['prompt']}, batch {r['batch']:.1f})")
        return 0
    recs = evaluate(Runner(a.capsim), a.shared, ids)
    for key, _, _ in METRICS:
        s = summarize(ape_rows(recs, key))
        if s["rows"]:
            print(f"{key:10s} runs {s['rows']:2d}  median APE {100 * s['median_ape']:5.1f}%  "
                  f"p90 {100 * s['p90_ape']:5.1f}%  bias {100 * s['bias']:+6.1f}%")
    for r in recs:
        m, p = r["measured"], r["predicted"]
        if not p:
            print(f"  {r['run'][:50]:50s} not simulated: {r['error']}")
            continue
        print(f"  {r['run'][:50]:50s} {'(' + r['excluded'] + ')' if r['excluded'] else '':14s} "
              f"TTFT {m['ttft_mean']:8.1f}/{p['ttft_mean']:8.1f}  TPOT {m['tpot_mean']:6.2f}/"
              f"{p['tpot_mean']:6.2f}  E2E {m['e2e_mean']:9.1f}/{p['e2e_mean']:9.1f}"
              + (f"  failed {r.get('measured_failed') or 0:.0f}/{r.get('failed') or 0}"
                 if r.get("measured_failed") or r.get("failed") else ""))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(recs, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
