#!/usr/bin/env python3
"""Batch cap that would reproduce each measured TensorRT-LLM 0.12 offline row.

A first-order test of "capsim's KV capacity (so its Guaranteed-No-Evict batch cap) is too large
at TP>1" (issue #9, docs/cost-model.md#trt-llm-decode-attention): for every row that
scripts/validate.py compares in trtllm_v0.12_offline_throughput.csv, and that capsim
over-predicts, it bisects capsim's --max-num-seqs (everything else as validate.py runs the row,
the token budget rule max(max_num_tokens, ISL + cap) included) down to the largest cap whose
throughput does not exceed the measured one, and reports the KV memory per GPU that the
smaller cap implies was missing: (cap - needed) x (ISL + OSL) x KV bytes per token per GPU.
Rows capsim under-predicts are listed with no needed cap (a smaller cap cannot raise them).

A memory term that capsim lacks would take the same bytes from every row built alike (same
card, model, TP, precision and engine limits), whatever the ISL/OSL; the summary prints, per
such build, the spread of the implied deficit across its shapes.

    CAPSIM_DATA_DIR=$PWD python3 scripts/offline_cap_inversion.py --capsim build/capsim \\
        [--json FILE]
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate as V  # noqa: E402


def invert(v, cs, m, tp, isl, osl, measured):
    args, limits, requests, cap_text, _, err = v.offline_args(m, tp, isl, osl)
    if args is None:
        return None
    i = args.index("--max-num-seqs")
    j = args.index("--max-num-batched-tokens")
    cap = int(args[i + 1])
    mnt = int(limits.split("/")[1].split()[0])
    fit, _ = cs.json(["fit", "--model", m["model"], "--card", m["card"], "--tp", str(tp),
                      "--weights", m["weights"], "--kv-cache", m["kv"], "--engine",
                      "tensorrt-llm"])
    kv_bytes = fit["per_gpu"]["kv_bytes_per_token"]

    def throughput(c):
        a = list(args)
        a[i + 1] = str(c)
        a[j + 1] = str(max(mnt, isl + c))
        res, _ = v.simulate(a)
        return res["output_throughput"] if res and res.get("completed", 0) >= requests else None

    pred = throughput(cap)
    need = None
    if pred is not None and pred > measured:
        lo, hi = 1, cap
        if throughput(1) > measured:
            need = 0
        else:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if throughput(mid) > measured:
                    hi = mid
                else:
                    lo = mid
            need = lo
    rec = {"card": m["card"], "model": m["model"], "weights": m["weights"], "tp": tp,
           "isl": isl, "osl": osl, "limits": limits.split()[0], "cap": cap,
           "kv_capped": "KV at full length" in cap_text, "measured": measured,
           "predicted": pred, "needed_cap": need, "kv_bytes_per_token": kv_bytes}
    if need is not None:
        rec["deficit_gb"] = round((cap - need) * (isl + osl) * kv_bytes / 1e9, 2)
    return rec


def summary(out):
    """The TP>1 decode-heavy (OSL >= ISL) KV-capped rows: all models, then Llama-70B alone."""
    base = [r for r in out if r["tp"] > 1 and r["osl"] >= r["isl"] and r["kv_capped"]]
    for label, rows in (("all models", base),
                        ("Llama-70B", [r for r in base if "70b" in r["model"]])):
        over = [r for r in rows if r["needed_cap"] is not None]
        if not over:
            continue
        d = sorted(r["deficit_gb"] for r in over)
        ratio = sorted(r["needed_cap"] / r["cap"] for r in over)
        big = [r["deficit_gb"] for r in over if r["predicted"] > 1.15 * r["measured"]]
        print(f"\nTP>1 decode-heavy KV-capped rows, {label}: {len(rows)}, capsim over-predicts "
              f"{len(over)}; implied deficit {d[0]:.1f} / {statistics.median(d):.1f} / "
              f"{d[-1]:.1f} GB per GPU (min / median / max); needed cap / capsim cap "
              f"{ratio[0]:.2f} / {statistics.median(ratio):.2f} / {ratio[-1]:.2f}; "
              f"{len(big)} rows over +15% need at least "
              f"{min(big) if big else float('nan'):.1f} GB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capsim", default=os.path.join(V.REPO, "build", "capsim"))
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(V.REPO), "shared"))
    ap.add_argument("--json", metavar="FILE", help="write every row's record here")
    a = ap.parse_args()
    cs = V.Capsim(a.capsim)
    v = V.Validator(cs, a.shared)
    v.offline()
    out = [r for r in (invert(v, cs, *row) for row in v.variant_rows) if r is not None]
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    print("card | model | weights | TP | ISL/OSL | cap | signed % | needed cap | deficit GB/GPU")
    for r in out:
        signed = (r["predicted"] - r["measured"]) / r["measured"] * 100
        print(f"{r['card']} | {r['model']} | {r['weights']} | {r['tp']} | {r['isl']}/{r['osl']} "
              f"| {r['cap']}{'' if r['kv_capped'] else ' (max_batch_size)'} | {signed:+.1f} | "
              f"{r['needed_cap'] if r['needed_cap'] is not None else '-'} | "
              f"{r.get('deficit_gb', '-')}")
    summary(out)
    builds = {}
    for r in out:
        if r["tp"] > 1:
            key = (r["card"], r["model"], r["weights"], r["tp"], r["limits"])
            builds.setdefault(key, []).append(r)
    print("\nsame build, several shapes: implied deficit per GPU by ISL/OSL")
    for key, rs in sorted(builds.items()):
        if len(rs) > 1 and any(r["needed_cap"] is not None for r in rs):
            print(" ".join(map(str, key)) + ": " + ", ".join(
                f"{r['isl']}/{r['osl']} " + (f"{r['deficit_gb']:.1f} GB" if "deficit_gb" in r
                                             else "none (under-predicted)") for r in rs))


if __name__ == "__main__":
    main()
