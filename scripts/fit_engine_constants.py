#!/usr/bin/env python3
"""Fit the vllm engine constants that rest on end-to-end runs, and cross-validate them.

Usage:
    python3 scripts/fit_engine_constants.py [--capsim build/capsim] [--shared ../shared]
                                            [--jobs 2] [--json FILE]

The constants of calibration/engines/vllm.yaml fitted on the serving runs of
../shared/reference/vllm_dev_runs.csv (the 18 runs in the medians: not overloaded, superseded or
DP=2):
  - kernels.attention_bandwidth_scale        grid SCALE_GRID, neutral 1.0
  - communication.allreduce_latency_per_peer grid AR_GRID_US, neutral 0 us
  - request_path (front end + per prompt token, return per emitting sequence), non-negative
    least squares on the relative TTFT error as `scripts/dev_runs.py --fit`, neutral 0.
Every run is simulated once per grid point with the request path zeroed (TP1/TP2 runs have no
peer beyond the second, so they are simulated once per scale); the request path is then added
as the linear term it is (TTFT and E2E += front end + return; TPOT keeps the step times,
docs/cost-model.md#request-path), which ignores the small change a front-end delay makes to
when requests meet in a batch.

Fit on a set of runs: for each grid point of the free step constants, the request path is
fitted (when free) on the set's inference-perf runs, and the point with the lowest mean of
(|E2E error| + |TPOT error|) / 2 over the set wins (a tie goes to the value nearer neutral).
A mean, not a median, so that the four TP4/TP8 runs that the all-reduce term touches move it.

Cross-validation: leave one group out, the groups being a model x card, and separately a whole
card; each held-out run is predicted with the constants fitted on the others. Reported for the
constants all fitted, for each constant left at its neutral value (the others still fitted), and
for none fitted. Rule (issue #32): a constant stays only where its out-of-fold error, leaving
out one model x card, beats leaving it out (its target: TPOT and E2E for the step constants,
TTFT for the request path).

Python 3 standard library only; deterministic (seed 1 for every run).
"""

import argparse
import concurrent.futures
import json
import os
import re
import statistics
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev_runs  # noqa: E402

ENGINE = os.path.join(REPO, "calibration", "engines", "vllm.yaml")
SCALE_GRID = [1.0, 1.05, 1.1, 1.15, 1.2]
AR_GRID_US = [0.0, 1.5, 3.0, 4.5]
NEUTRAL = {"scale": 1.0, "ar": 0.0}
CONSTANTS = [("scale", "attention_bandwidth_scale", "1.0"),
             ("ar", "allreduce_latency_per_peer", "0 us"),
             ("path", "request path", "0")]
TARGETS = {"scale": ("tpot_mean", "e2e_mean"), "ar": ("tpot_mean", "e2e_mean"),
           "path": ("ttft_mean",)}
METRICS = ("ttft_mean", "tpot_mean", "e2e_mean")
VARIANTS = [("all fitted", {"scale", "ar", "path"}),
            ("attention_bandwidth_scale at 1.0", {"ar", "path"}),
            ("allreduce_latency_per_peer at 0", {"scale", "path"}),
            ("request path at 0", {"scale", "ar"}),
            ("none fitted", set())]
GROUPINGS = [("model x card", lambda r: f"{r['model']} / {r['card']}"),
             ("card", lambda r: r["card"])]


def engine_text(base, scale, ar_us):
    """The vllm profile with the request path zeroed and the two step constants set."""
    for field in ("frontend", "frontend_per_prompt_token", "return", "return_per_sequence"):
        base = re.sub(rf"(\n  {field}: \{{value: )[^,]+,", r"\g<1>0s,", base)
    base = re.sub(r"(\n  attention_bandwidth_scale: \{value: )[^,]+,", rf"\g<1>{scale:g},", base)
    return re.sub(r"(\n  allreduce_latency_per_peer: \{value: )[^,]+,", rf"\g<1>{ar_us:g}us,", base)


def shipped_values(text):
    def value(field):
        m = re.search(rf"\n  {field}: \{{value: ([^,]+),", text)
        return m.group(1).strip() if m else None
    return {f: value(f) for f in ("attention_bandwidth_scale", "allreduce_latency_per_peer",
                                  "frontend", "frontend_per_prompt_token", "return",
                                  "return_per_sequence")}


def simulate_grid(capsim, shared, jobs):
    """The runs in the medians, each with {(scale, ar): {ttft, e2e, tpot, batch}} (path zeroed)."""
    import csv
    ids = dev_runs.known_models(capsim)
    rows = list(csv.DictReader(open(os.path.join(shared, "reference", dev_runs.FILE), encoding="utf-8")))
    base = open(ENGINE, encoding="utf-8").read()
    runs, tasks = [], []
    with tempfile.TemporaryDirectory(prefix="capsim-xval-") as tmp:
        engines = {}
        for s in SCALE_GRID:
            for a in AR_GRID_US:
                path = os.path.join(tmp, f"vllm-{s:g}-{a:g}.yaml")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(engine_text(base, s, a))
                engines[(s, a)] = path
        for row in rows:
            if dev_runs.excluded(row):
                continue
            args, osl, prompt, err = dev_runs.run_args(row, shared, ids)
            if args is None:
                sys.exit(f"fit_engine_constants.py: {row['exp_key']}: {err}")
            run = {"run": row["exp_key"].split(":", 1)[1], "card": dev_runs.card_of(row["gpu"]),
                   "model": row["model"].split("/")[-1], "tp": int(dev_runs.num(row["tp"])),
                   "harness": "vllm bench serve" if row["exp_key"].startswith("vllm-perf")
                   else "inference-perf", "prompt": prompt, "output": osl,
                   "measured": {"ttft_mean": dev_runs.num(row["ttft_mean_ms"]),
                                "e2e_mean": dev_runs.num(row["e2e_mean_ms"]),
                                "tpot_mean": dev_runs.num(row["decode_ms_per_token_est"])},
                   "sims": {}}
            runs.append(run)
            # The per-peer term is latency x max(0, TP - 2): runs at TP <= 2 do not see it.
            for s in SCALE_GRID:
                for a in (AR_GRID_US if run["tp"] > 2 else [0.0]):
                    tasks.append((run, s, a, args))

        def one(task):
            run, s, a, args = task
            res, err = dev_runs.Runner(capsim, engines[(s, a)]).simulate(args)
            if res is None:
                raise RuntimeError(f"{run['run']} at scale {s:g}, {a:g} us: {err}")
            return task, res
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for (run, s, a, _), res in pool.map(one, tasks):
                run["sims"][(s, a)] = {
                    "ttft_mean": res["mean_ttft_ms"], "e2e_mean": res["mean_e2el_ms"],
                    "tpot_mean": (res["mean_e2el_ms"] - res["mean_ttft_ms"]) / max(1, run["output"] - 1),
                    "batch": res["capsim"]["mean_batch_sequences"]}
    return runs, len(tasks)


def sim_at(run, s, a):
    return run["sims"][(s, a if run["tp"] > 2 else 0.0)]


def predict(run, fit):
    """{metric: predicted ms} for one run under fit = (scale, ar, [c0 ms, c1 ms/token, c2 ms/seq])."""
    s, a, coef = fit
    sim = sim_at(run, s, a)
    path = coef[0] + coef[1] * run["prompt"] + coef[2] * sim["batch"]
    return {"ttft_mean": sim["ttft_mean"] + path, "e2e_mean": sim["e2e_mean"] + path,
            "tpot_mean": sim["tpot_mean"]}


def fit_path(runs, s, a):
    """dev_runs.py --fit's request path on these runs' inference-perf members (0 when none)."""
    used = [r for r in runs if r["harness"] == "inference-perf"]
    if not used:
        return [0.0, 0.0, 0.0]
    xs, ys = [], []
    for r in used:
        sim, w = sim_at(r, s, a), 1.0 / r["measured"]["ttft_mean"]
        xs.append([w, w * r["prompt"], w * sim["batch"]])
        ys.append(w * (r["measured"]["ttft_mean"] - sim["ttft_mean"]))
    return dev_runs.nnls(xs, ys)


def fit(runs, free):
    """The constants fitted on `runs`, only those in `free` (the others neutral)."""
    best = None
    for s in (SCALE_GRID if "scale" in free else [NEUTRAL["scale"]]):
        for a in (AR_GRID_US if "ar" in free else [NEUTRAL["ar"]]):
            coef = fit_path(runs, s, a) if "path" in free else [0.0, 0.0, 0.0]
            errs = []
            for r in runs:
                p = predict(r, (s, a, coef))
                errs.append((abs(p["e2e_mean"] / r["measured"]["e2e_mean"] - 1) +
                             abs(p["tpot_mean"] / r["measured"]["tpot_mean"] - 1)) / 2)
            key = (round(statistics.mean(errs), 6), abs(s - NEUTRAL["scale"]), a)
            if best is None or key < best[0]:
                best = (key, (s, a, coef))
    return best[1]


def signed_errors(runs, fits):
    """{metric: [(run, signed error)]} for runs predicted with their own fit."""
    out = {m: [] for m in METRICS}
    for r, f in zip(runs, fits):
        p = predict(r, f)
        for m in METRICS:
            out[m].append((r, p[m] / r["measured"][m] - 1))
    return out


def summarize(pairs):
    rows = [{"ape": abs(e), "signed": e} for _, e in pairs]
    return dev_runs.summarize(rows)


def cross_validate(runs, free, group_of):
    """Each run predicted with the constants fitted on the runs outside its group."""
    fits, folds = [None] * len(runs), {}
    for g in sorted({group_of(r) for r in runs}):
        train = [r for r in runs if group_of(r) != g]
        f = fit(train, free)
        folds[g] = f
        for i, r in enumerate(runs):
            if group_of(r) == g:
                fits[i] = f
    return signed_errors(runs, fits), folds


def analyse(runs):
    """Every number the report and the decision need, as plain data."""
    result = {"runs": len(runs), "in_sample": {}, "oof": {}, "folds": {}}
    for name, free in VARIANTS:
        f = fit(runs, free)
        result["in_sample"][name] = {"fit": fit_text(f), "errors": by_metric(signed_errors(runs, [f] * len(runs)))}
    for gname, group_of in GROUPINGS:
        result["oof"][gname] = {}
        for name, free in VARIANTS:
            errs, folds = cross_validate(runs, free, group_of)
            result["oof"][gname][name] = by_metric(errs)
            if name == "all fitted":
                result["folds"][gname] = {g: fit_text(f) for g, f in folds.items()}
    # The rule, on leave-one-model x card-out.
    oof = result["oof"]["model x card"]
    result["decision"] = {}
    for (key, label, neutral), (vname, _) in zip(CONSTANTS, VARIANTS[1:4]):
        with_it = statistics.mean(oof["all fitted"][m]["median_ape"] for m in TARGETS[key])
        without = statistics.mean(oof[vname][m]["median_ape"] for m in TARGETS[key])
        result["decision"][label] = {"targets": list(TARGETS[key]), "fitted": with_it,
                                     "neutral": without, "neutral_value": neutral,
                                     "keep": with_it < without}
    return result


def by_metric(errs):
    out = {}
    for m in METRICS:
        s = summarize(errs[m])
        s["per_card_bias"] = {c: statistics.mean(e for r, e in errs[m] if r["card"] == c)
                              for c in sorted({r["card"] for r, _ in errs[m]})}
        out[m] = s
    return out


def fit_text(f):
    s, a, c = f
    return {"attention_bandwidth_scale": s, "allreduce_latency_per_peer_us": a,
            "frontend_ms": round(c[0], 4), "frontend_per_prompt_token_us": round(c[1] * 1e3, 3),
            "return_per_sequence_us": round(c[2] * 1e3, 1)}


def pct(x, signed=False):
    return dev_runs.pct(x, signed)


def report_lines(result):
    """The Markdown section of docs/validation.md (scripts/validate.py includes it)."""
    L = []
    A = L.append
    A("<a id=\"out-of-fold\"></a>")
    A("## Out-of-fold errors of the constants fitted on the vLLM runs")
    A("")
    A("Three constants of `calibration/engines/vllm.yaml` were fitted on the development runs "
      "above: `kernels.attention_bandwidth_scale`, `communication.allreduce_latency_per_peer` and "
      "the request path (per prompt token, per emitting sequence). "
      "`scripts/fit_engine_constants.py` fits them on a set of runs (grid "
      f"{', '.join(f'{s:g}' for s in SCALE_GRID)} for the scale, "
      f"{', '.join(f'{a:g}' for a in AR_GRID_US)} us for the all-reduce term, least squares for "
      "the request path; the point with the lowest mean of the E2E and TPOT errors wins) and "
      f"predicts each of the {result['runs']} runs in the medians with the constants fitted on "
      "the other runs: leaving out one model x card, and separately one whole card. A constant "
      "stays only where its out-of-fold error beats leaving it at its neutral value (the others "
      "still fitted). With one H200 run beside 17 H100 runs, leaving out a card is a check of "
      "that one run (and leaving out the H100 fits on the one H200 run, whose `vllm bench serve` "
      "client is not used for the request path, so that fold has none). The request path is "
      "added to runs simulated without it as the linear term it is (TTFT and E2E grow by it), "
      "so the in-sample rows differ slightly from the simulation above (a front-end delay also "
      "moves when requests meet in a batch). 17 of the 18 runs are H100 SXM: these errors say how the constants transfer "
      "across models and loads on that card, not to other cards.")
    A("")
    A("Median APE % (bias %) of mean TTFT, TPOT and mean E2E, each run predicted out of fold:")
    A("")
    A("| constants | leave out | TTFT | TPOT | E2E | worst card bias TPOT / E2E |")
    A("|---|---|---|---|---|---|")
    for name, _ in VARIANTS:
        ins = result["in_sample"][name]
        rows = [("none (in sample)", ins["errors"])] + [
            (g, result["oof"][g][name]) for g, _ in GROUPINGS]
        for gname, e in rows:
            cells = [f"{pct(e[m]['median_ape'])} ({pct(e[m]['bias'], True)})" for m in METRICS]
            worst = []
            for m in ("tpot_mean", "e2e_mean"):
                card, b = max(e[m]["per_card_bias"].items(), key=lambda kv: abs(kv[1]))
                worst.append(f"{pct(b, True)} {card}")
            A(f"| {name} | {gname} | " + " | ".join(cells) + " | " + " / ".join(worst) + " |")
    A("")
    A("Decision (leave one model x card out; mean of the target metrics' median APE):")
    A("")
    A("| constant | target | fitted % | at neutral % | kept |")
    A("|---|---|---:|---:|---|")
    for label, d in result["decision"].items():
        A(f"| {label} | {', '.join(d['targets'])} | {pct(d['fitted'])} | {pct(d['neutral'])} "
          f"(at {d['neutral_value']}) | {'yes' if d['keep'] else 'no'} |")
    A("")
    A("Fitted on all runs (in sample): " + fit_line(result["in_sample"]["all fitted"]["fit"]) + ".")
    A("")
    A("Not cross-validated here: the constants fitted on the TensorRT-LLM 0.12 offline "
      "throughput rows (the tensorrt-llm profile's `overhead.per_sequence`, chosen on the TP1 rows "
      "and checked on the TP>1 rows, [Serving simulation](#serving-simulation-against-published-"
      "throughput-sweeps); the H200's `attention_bandwidth` and the L40S's `memory_bandwidth` and "
      "`compute_fp8`, [card-fits.md](card-fits.md)). Each is a card's or an engine's own constant "
      "fitted on one card's rows, so leaving out a card does not apply; they are checked on "
      "held-out tensor-parallel sizes instead.")
    A("")
    return L


def fit_line(f):
    return (f"attention_bandwidth_scale {f['attention_bandwidth_scale']:g}, "
            f"allreduce_latency_per_peer {f['allreduce_latency_per_peer_us']:g} us, front end "
            f"{f['frontend_ms']:g} ms + {f['frontend_per_prompt_token_us']:g} us per prompt token, "
            f"return {f['return_per_sequence_us']:g} us per emitting sequence")


def run(capsim, shared, jobs):
    runs, sims = simulate_grid(capsim, shared, jobs)
    result = analyse(runs)
    result["simulations"] = sims
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capsim", default=os.path.join(REPO, "build", "capsim"))
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(REPO), "shared"))
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="capsim runs at once")
    ap.add_argument("--json", metavar="FILE", help="write the analysis as JSON")
    a = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(a.shared, "reference", dev_runs.FILE)):
        print(f"fit_engine_constants.py: {dev_runs.FILE} not found under {a.shared}/reference",
              file=sys.stderr)
        return 1
    result = run(os.path.abspath(a.capsim), a.shared, a.jobs)
    print(f"shipped: {shipped_values(open(ENGINE, encoding='utf-8').read())}")
    print("\n".join(report_lines(result)))
    for g, folds in result["folds"].items():
        print(f"folds ({g}), all fitted:")
        for name, f in folds.items():
            print(f"  without {name:45s} {fit_line(f)}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
