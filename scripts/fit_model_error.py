#!/usr/bin/env python3
"""Write calibration/model-error.yaml: capsim's out-of-fold error per class of scenario.

Usage:
    python3 scripts/fit_model_error.py [--capsim build/capsim] [--shared ../shared]
                                       [--jobs 2] [--date YYYY-MM-DD] [--out FILE]
                                       [--check FILE]

What is scored (issue #32, item 8), each run predicted by a capsim that did not see it:
  - the vLLM development runs (../shared/reference/vllm_dev_runs.csv, the runs in the medians):
    mean TTFT, TPOT and mean E2E, each run predicted with the vllm profile's constants fitted on
    the runs outside its model x card group (scripts/fit_engine_constants.py's leave-one-group-
    out cross-validation, every constant fitted);
  - the reference step-time rows scripts/validate.py scores that no constant was fitted on (its
    role "check"): batch1_decode_latency.csv (TPOT at batch 1) and lmdeploy_a100_fp16.csv (TPOT
    p50, first-token latency at batch 1). The rows fitted on (role "fit") are in sample and left
    out, as are the KV-limited LMDeploy rows and the kernel-only Vidur rows (not a latency a
    user sees) and the offline throughput sweeps (a throughput, not a latency).

Classes: the card's cost source ("measured" when calibration/kernels/<card>/ holds tables,
"roofline" otherwise), the engine profile (batch-1 rows measured on engines capsim has no
profile for are "other"), and the model's architecture (dense, moe). Every class is written at
four levels, from (cost source, engine, architecture) up to the pool of every run ("any"), with
per metric the number of runs, the median and 90th percentile of the absolute relative error and
the mean signed error (bias; + = capsim slower than measured). A reader takes a scenario's class
at the first level, most specific first, whose metric has at least MIN_RUNS runs
(docs/data-formats.md#model-error).

--check FILE regenerates the numbers and compares them with FILE: exit 3 when a class or a run
count differs, or a value moved by more than CHECK_TOLERANCE (1 point), with the differences;
0 when they agree. The ctest "model-error" runs it (label accuracy).

Python 3 standard library only; deterministic (seed 1 for every run).
"""

import argparse
import datetime
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev_runs  # noqa: E402
import fit_engine_constants as fec  # noqa: E402
import validate  # noqa: E402

OUT = os.path.join(REPO, "calibration", "model-error.yaml")
MIN_RUNS = 5
CHECK_TOLERANCE = 0.01
METRICS = ("ttft", "tpot", "e2e")
DEV_METRIC = {"ttft": "ttft_mean", "tpot": "tpot_mean", "e2e": "e2e_mean"}
# validate.py's groups scored here -> the metric they measure. Only rows of role "check".
STEP_GROUPS = {"batch1_decode_latency:modelled_engines": "tpot",
               "batch1_decode_latency:other_engines": "tpot",
               "lmdeploy_a100_fp16:tpot_p50": "tpot",
               "lmdeploy_a100_fp16:ttft_batch1": "ttft"}
# The dev runs' models that are mixtures of experts, when capsim's catalogue does not say
# (scripts/dev_runs.py's rule).
MOE_NAME = re.compile(r"mixtral|scout|gpt-oss|moe", re.I)
COMMAND = "python3 scripts/fit_model_error.py --capsim build/capsim --shared ../shared"


def cost_source(card):
    d = os.path.join(REPO, "calibration", "kernels", card)
    return "measured" if os.path.isdir(d) and any(f.endswith(".csv") for f in os.listdir(d)) \
        else "roofline"


def catalogue_moe(capsim):
    """{model name: True when it is a mixture of experts} from `capsim list models`."""
    import json
    import subprocess
    p = subprocess.run([capsim, "list", "models", "--json", "-"], capture_output=True, text=True)
    return {m["name"]: m["active_params"] < m["total_params"] for m in json.loads(p.stdout)}


def dev_samples(capsim, shared, jobs):
    """(class, metric, signed error) of every dev run, out of fold (leave one model x card out)."""
    runs, _ = fec.simulate_grid(capsim, shared, jobs)
    errs, _ = fec.cross_validate(runs, {"scale", "ar", "path"}, fec.GROUPINGS[0][1])
    out = []
    for metric in METRICS:
        for run, e in errs[DEV_METRIC[metric]]:
            arch = "moe" if MOE_NAME.search(run["model"]) else "dense"
            out.append(((cost_source(run["card"]), "vllm", arch), metric, e))
    return out


def step_samples(capsim, shared):
    """(class, metric, signed error) of validate.py's reference rows that nothing was fitted on."""
    v = validate.Validator(validate.Capsim(capsim), shared)
    v.batch1()
    v.lmdeploy()
    moe = catalogue_moe(capsim)
    out = []
    for r in v.rows:
        metric = STEP_GROUPS.get(r["group"])
        if metric is None or r["role"] != "check":
            continue
        engine = "other" if r["group"].endswith(":other_engines") else r["engine"]
        arch = "moe" if moe.get(r["model"]) else "dense"
        out.append(((cost_source(r["card"]), engine, arch), metric, r["signed"]))
    return out


def levels(cls):
    c, e, a = cls
    return [(c, e, a), (c, e, "any"), (c, "any", "any"), ("any", "any", "any")]


def classes(samples):
    """{class: {metric: {runs, p50, p90, bias}}} at every level of every sample's class."""
    pooled = {}
    for cls, metric, e in samples:
        for level in levels(cls):
            pooled.setdefault(level, {}).setdefault(metric, []).append(e)
    out = {}
    for cls, by_metric in pooled.items():
        out[cls] = {}
        for metric in METRICS:
            if metric in by_metric:
                s = dev_runs.summarize([{"ape": abs(e), "signed": e} for e in by_metric[metric]])
                out[cls][metric] = {"runs": s["rows"], "p50": round(s["median_ape"], 4),
                                    "p90": round(s["p90_ape"], 4), "bias": round(s["bias"], 4)}
    return out


def class_order(cls):
    rank = {"any": 1}
    return tuple((rank.get(x, 0), x) for x in cls)


def yaml_text(table, date):
    L = [
        "# capsim's model error: the out-of-fold relative error of TTFT, TPOT and E2E per class of",
        "# scenario (docs/data-formats.md#model-error). Generated by scripts/fit_model_error.py; do",
        "# not edit by hand. Regenerate with:",
        f"#   {COMMAND} --date YYYY-MM-DD",
        f"generated_by: \"{COMMAND}\"",
        f"date: {date}",
        "sources:",
        "  - \"vllm_dev_runs.csv: the runs in the medians; mean TTFT, TPOT, mean E2E; each run "
        "predicted with the vllm constants fitted on the runs outside its model x card "
        "(scripts/fit_engine_constants.py)\"",
        "  - \"batch1_decode_latency.csv: TPOT at batch 1, rows no constant was fitted on "
        "(scripts/validate.py role check); engines capsim has no profile for are 'other'\"",
        "  - \"lmdeploy_a100_fp16.csv: TPOT p50 and first-token latency at batch 1, rows no "
        "constant was fitted on (role check), not KV-limited\"",
        "not_scored: \"rows constants were fitted on (in sample); Vidur kernel-only rows; offline "
        "throughput sweeps (a throughput, not a latency)\"",
        f"min_runs: {MIN_RUNS}",
        "fallback: \"a class with fewer than min_runs runs for a metric takes the pooled error of "
        "the wider class: architecture any, then engine any, then cost source any\"",
        "# bias: mean signed error, + = capsim slower than measured. p50, p90: of the absolute error.",
        "classes:",
    ]
    for cls in sorted(table, key=class_order):
        c, e, a = cls
        L.append(f"  - cost_source: {c}")
        L.append(f"    engine: {e}")
        L.append(f"    architecture: {a}")
        for metric in METRICS:
            s = table[cls].get(metric)
            if s:
                L.append(f"    {metric}: {{runs: {s['runs']}, p50: {s['p50']:.4f}, "
                         f"p90: {s['p90']:.4f}, bias: {s['bias']:+.4f}}}")
    return "\n".join(L) + "\n"


def parse_file(path):
    """{class: {metric: {runs, p50, p90, bias}}} back from a file this script wrote."""
    table, cls = {}, None
    fields = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"  - cost_source: (\S+)", line)
        if m:
            fields = {"cost_source": m.group(1)}
            continue
        m = re.match(r"    (engine|architecture): (\S+)", line)
        if m:
            fields[m.group(1)] = m.group(2)
            if m.group(1) == "architecture":
                cls = (fields["cost_source"], fields["engine"], fields["architecture"])
                table[cls] = {}
            continue
        m = re.match(r"    (\w+): \{runs: (\d+), p50: ([-+.\d]+), p90: ([-+.\d]+), bias: ([-+.\d]+)\}",
                     line)
        if m and cls:
            table[cls][m.group(1)] = {"runs": int(m.group(2)), "p50": float(m.group(3)),
                                      "p90": float(m.group(4)), "bias": float(m.group(5))}
    return table


def differences(expected, actual):
    out = []
    for cls in sorted(set(expected) | set(actual), key=class_order):
        name = "/".join(cls)
        if cls not in expected or cls not in actual:
            out.append(f"{name}: {'new' if cls not in expected else 'gone'}")
            continue
        for metric in METRICS:
            e, a = expected[cls].get(metric), actual[cls].get(metric)
            if (e is None) != (a is None):
                out.append(f"{name} {metric}: {'new' if e is None else 'gone'}")
            elif e:
                if e["runs"] != a["runs"]:
                    out.append(f"{name} {metric}: runs {e['runs']} -> {a['runs']}")
                for k in ("p50", "p90", "bias"):
                    if abs(e[k] - a[k]) > CHECK_TOLERANCE + 1e-9:
                        out.append(f"{name} {metric} {k}: {e[k]:.4f} -> {a[k]:.4f}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capsim", default=os.path.join(REPO, "build", "capsim"))
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(REPO), "shared"))
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--check", metavar="FILE", help="compare with FILE instead of writing")
    a = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(a.shared, "reference", dev_runs.FILE)):
        print(f"capsim test skipped: {dev_runs.FILE} not found under {a.shared}/reference"
              if a.check else f"fit_model_error.py: {dev_runs.FILE} not found under "
              f"{a.shared}/reference", file=sys.stdout if a.check else sys.stderr)
        return 0 if a.check else 1
    capsim = os.path.abspath(a.capsim)
    samples = dev_samples(capsim, a.shared, a.jobs) + step_samples(capsim, a.shared)
    table = classes(samples)
    if a.check:
        diff = differences(parse_file(a.check), table)
        if diff:
            print(f"{a.check} differs from what scripts/fit_model_error.py computes now "
                  f"(tolerance {CHECK_TOLERANCE:g}); regenerate it with `{COMMAND}`:")
            print("\n".join("  " + d for d in diff))
            return 3
        print(f"{a.check}: {len(table)} classes agree within {CHECK_TOLERANCE:g}")
        return 0
    text = yaml_text(table, a.date)
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, a.out)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
