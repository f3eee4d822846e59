#!/usr/bin/env python3
"""Fit a card's assumed efficiencies to published serving measurements, by grid search.

Some cards in calibration/cards/ carry efficiencies that no measurement of that card backs
(their references say ASSUMED). Where ../shared/reference/ holds enough rows for such a card,
this script re-runs those rows exactly as scripts/validate.py does (same reproduction choices,
same capsim commands) for every point of a small grid of efficiency values, picks the point with
the lowest median absolute error on the FIT rows, and reports how the chosen values do on the
rows it did not look at (CHECK rows: other tensor-parallel sizes, other sources).

The grid points run against a temporary copy of the catalogue (CAPSIM_DATA_DIR), so the
repository's card files are never modified; the chosen values are then written into the card
file by hand, citing this script and docs/card-fits.md, which it regenerates:

    python3 scripts/fit_cards.py                 # all cards below, ~3 minutes per card
    python3 scripts/fit_cards.py --out -          # print instead of writing docs/card-fits.md

Cards fitted (CARD_FITS): the L40S, whose bandwidth (0.80) and compute (0.70) fractions were
assumed from the RTX 4090 and from Hopper/Ampere; FP8 is the only precision its published rows
use, so the compute fraction fitted is `compute_fp8`.
"""

import argparse
import csv
import datetime
import os
import re
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import validate  # noqa: E402  (same reproduction of every row as the validation report)

OFFLINE = "trtllm_v0.12_offline_throughput.csv"
FIRST_TOKEN = "trtllm_v0.6_static_batching.csv"

# card -> which published GPU rows, the grid, and which rows fit vs check.
CARD_FITS = {
    "l40s": {
        "gpu": "L40S",
        "memory_bandwidth": [0.70, 0.72, 0.74, 0.76, 0.78, 0.80],
        "compute_fp8": [0.50, 0.55, 0.60, 0.65, 0.70],
        "fit": "TensorRT-LLM 0.12 offline throughput, TP1 rows (the tensorrt-llm profile's "
               "engine constants were chosen on H100/A100 TP1 rows, so TP1 isolates the card)",
    },
}


def pct(x, signed=False):
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"


def filtered_shared(gpu, tmp):
    """A shared/ folder with only `gpu`'s rows of the files the fit reads."""
    ref = os.path.join(tmp, "shared", "reference")
    os.makedirs(ref)
    for fname in (OFFLINE, FIRST_TOKEN):
        rows = validate.read_csv(os.path.join(SHARED, "reference", fname))
        keep = [r for r in rows if gpu in r["gpu"]]
        with open(os.path.join(ref, fname), "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(keep)
    return os.path.join(tmp, "shared")


def data_root(tmp):
    """A catalogue root whose calibration/cards is a private copy (the rest links back)."""
    root = os.path.join(tmp, "data")
    os.makedirs(os.path.join(root, "calibration"))
    os.symlink(os.path.join(REPO, "models"), os.path.join(root, "models"))
    for entry in os.listdir(os.path.join(REPO, "calibration")):
        src = os.path.join(REPO, "calibration", entry)
        if entry == "cards":
            shutil.copytree(src, os.path.join(root, "calibration", "cards"))
        else:
            os.symlink(src, os.path.join(root, "calibration", entry))
    return root


def with_efficiencies(text, bandwidth, compute_fp8, source):
    """The card file with efficiency.memory_bandwidth and efficiency.compute_fp8 set."""
    text, n = re.subn(r"(\n  memory_bandwidth: \{value: )[0-9.]+(, source: )[\w-]+\}",
                      rf"\g<1>{bandwidth:.2f}\g<2>{source}}}", text)
    if n != 1:
        raise SystemExit("fit_cards.py: efficiency.memory_bandwidth not found once in the card file")
    line = f"  compute_fp8: {{value: {compute_fp8:.2f}, source: {source}}}"
    if re.search(r"\n  compute_fp8: \{", text):
        text = re.sub(r"\n  compute_fp8: \{[^}]*\}", "\n" + line, text)
    else:
        text = re.sub(r"(\n  compute: \{[^}]*\}[^\n]*)", r"\1" + "\n" + line, text, count=1)
    # The grid's values cite a key the copied file must define.
    if f"\n  {source}:" not in text:
        text = text.replace("\nreferences:\n",
                            f"\nreferences:\n  {source}: \"fit_cards.py grid point\"\n", 1)
    return text


def evaluate(capsim, shared):
    v = validate.Validator(capsim, shared)
    v.offline()
    v.trtllm()
    offline = [r for r in v.sim_rows if r["section"] == "offline"]
    first = [r for r in v.rows]
    return offline, first


def stats(values):
    if not values:
        return "-", "-"
    return (pct(statistics.median(abs(x) for x in values)), pct(statistics.median(values), True))


def fit_card(card, spec, capsim_path):
    lines = []
    with tempfile.TemporaryDirectory(prefix="capsim-fit-cards-") as tmp:
        shared = filtered_shared(spec["gpu"], tmp)
        root = data_root(tmp)
        card_file = os.path.join(root, "calibration", "cards", f"{card}.yaml")
        original = open(card_file, encoding="utf-8").read()
        os.environ["CAPSIM_DATA_DIR"] = root
        grid = []
        try:
            capsim = validate.Capsim(capsim_path)
            base_off, base_first = evaluate(capsim, shared)
            for bw in spec["memory_bandwidth"]:
                for cf in spec["compute_fp8"]:
                    with open(card_file, "w", encoding="utf-8") as f:
                        f.write(with_efficiencies(original, bw, cf, "fit-grid"))
                    capsim = validate.Capsim(capsim_path)
                    off, first = evaluate(capsim, shared)
                    fit = [r["signed"] for r in off if r["tp"] == 1]
                    med = statistics.median(abs(x) for x in fit)
                    grid.append((med, abs(statistics.median(fit)), bw, cf, off, first))
                    print(f"{card}: memory_bandwidth {bw:.2f} compute_fp8 {cf:.2f}: TP1 median "
                          f"APE {pct(med)}%", file=sys.stderr, flush=True)
        finally:
            os.environ.pop("CAPSIM_DATA_DIR", None)
        grid.sort(key=lambda g: (round(g[0], 6), round(g[1], 6), g[2], g[3]))
        best = grid[0]

    def split(off, first):
        tp1 = [r["signed"] for r in off if r["tp"] == 1]
        tpn = [r["signed"] for r in off if r["tp"] > 1]
        # First-token rows are latencies: signed > 0 = capsim slower (opposite sense).
        ft = [r["predicted"] / r["measured"] - 1 for r in first]
        return [("fit: offline tok/s, TP1", tp1), ("check: offline tok/s, TP>1", tpn),
                ("check: batch-1 first-token latency (TRT-LLM 0.6)", ft)]

    lines.append(f"## {card}\n")
    lines.append(f"Fit rows: {spec['fit']}. Grid: memory_bandwidth "
                 f"{', '.join(f'{x:.2f}' for x in spec['memory_bandwidth'])} x compute_fp8 "
                 f"{', '.join(f'{x:.2f}' for x in spec['compute_fp8'])}; chosen = lowest median "
                 f"APE on the fit rows (ties: smallest |bias|).\n")
    lines.append(f"**Chosen: memory_bandwidth {best[2]:.2f}, compute_fp8 {best[3]:.2f}.**\n")
    lines.append("| rows | n | catalogue values: median APE % / bias % | chosen: median APE % / bias % |")
    lines.append("|---|---:|---|---|")
    for (name, before), (_, after) in zip(split(base_off, base_first), split(best[4], best[5])):
        b, a = stats(before), stats(after)
        lines.append(f"| {name} | {len(after)} | {b[0]} / {b[1]} | {a[0]} / {a[1]} |")
    lines.append("\nFirst-token rows are latencies (bias > 0 = capsim slower); offline rows are "
                 "throughputs (bias > 0 = capsim faster).\n")
    lines.append("| memory_bandwidth | compute_fp8 | TP1 median APE % | TP1 bias % |")
    lines.append("|---:|---:|---:|---:|")
    for med, _, bw, cf, off, _first in sorted(grid, key=lambda g: (g[2], g[3])):
        fit = [r["signed"] for r in off if r["tp"] == 1]
        lines.append(f"| {bw:.2f} | {cf:.2f} | {pct(med)} | {pct(statistics.median(fit), True)} |")
    lines.append("")
    return lines


def main(argv=None):
    global SHARED
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capsim", default=os.path.join(REPO, "build", "capsim"))
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(REPO), "shared"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "card-fits.md"))
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--card", choices=sorted(CARD_FITS), action="append",
                    help="fit only this card (repeatable; default: every card in CARD_FITS)")
    args = ap.parse_args(argv)
    SHARED = args.shared
    for fname in (OFFLINE, FIRST_TOKEN):
        if not os.path.isfile(os.path.join(SHARED, "reference", fname)):
            print(f"fit_cards.py: missing {os.path.join(SHARED, 'reference', fname)}", file=sys.stderr)
            return 1
    out = ["# Card efficiencies fitted to published measurements",
           "",
           f"Generated by `python3 scripts/fit_cards.py` on {args.date}. Each card below had "
           "efficiencies no measurement of that card backed; its published rows in "
           "`../shared/reference/` are re-run exactly as docs/validation.md runs them, over a "
           "grid of values, against a temporary copy of the catalogue. The chosen values are "
           "the ones in calibration/cards/ (source key `capsim-fit-card`).",
           ""]
    for card in args.card or sorted(CARD_FITS):
        out += fit_card(card, CARD_FITS[card], os.path.abspath(args.capsim))
    text = "\n".join(out)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


SHARED = None

if __name__ == "__main__":
    sys.exit(main())
