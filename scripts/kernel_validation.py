#!/usr/bin/env python3
"""Component validation of capsim's kernel times against measured kernel tables.

For every table in calibration/kernels/<card>/gemm-<dtype>.csv (docs/data-formats.md#measured-kernel-tables)
this scores, with the capsim binary (`capsim kernels`):

  roofline   capsim's roofline time of each measured shape (the card file's efficiencies), against
             the measurement: what a card without tables gets;
  held-out m the table lookup (docs/cost-model.md#measured-kernels) built from every other token
             count m of each (n, k), predicting the token counts left out;
  held-out nk the lookup built from every other n and every other k of the grid, predicting the
             shapes whose n and k were both left out (whole weight shapes never measured).

Errors are predicted / measured - 1; the tables give the median of |error|, its 90th percentile
and the median error (bias). Writes Markdown (--out) for docs/validation.md#kernels.

Usage: python3 scripts/kernel_validation.py --capsim build/capsim [--data-dir .] [--out FILE]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile


def read_table(path):
    header, rows, columns = [], [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                header.append(line)
            elif columns is None:
                columns = line.split(",")
            elif line:
                rows.append(dict(zip(columns, line.split(","))))
    return header, columns, rows


def write_table(path, header, columns, rows):
    with open(path, "w") as f:
        f.write("\n".join(header) + "\n" + ",".join(columns) + "\n")
        for r in rows:
            f.write(",".join(r[c] for c in columns) + "\n")


def capsim_times(capsim, data_dir, card, dtype, shapes_path, table=None):
    cmd = [capsim, "--data-dir", data_dir, "kernels", "--card", card, "--dtype", dtype, "--shapes", shapes_path]
    if table:
        cmd += ["--table", table]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    cols = out[0].split(",")
    return [dict(zip(cols, line.split(","))) for line in out[1:]]


def stats(errors):
    if not errors:
        return None
    a = sorted(abs(e) for e in errors)
    p90 = a[min(len(a) - 1, int(round(0.9 * (len(a) - 1))))]
    return len(errors), statistics.median(a), p90, statistics.median(errors)


def fmt(s):
    if s is None:
        return "-"
    n, med, p90, bias = s
    return f"{100 * med:.1f}% / {100 * p90:.1f}% / {100 * bias:+.1f}% ({n})"


def errors_against(predicted, measured, key):
    out = []
    for p, m in zip(predicted, measured):
        out.append(float(p[key]) / float(m["us"]) - 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capsim", required=True)
    ap.add_argument("--data-dir", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--out", help="write the Markdown here (default: stdout)")
    args = ap.parse_args()
    root = os.path.join(args.data_dir, "calibration", "kernels")
    if not os.path.isdir(root):
        sys.exit(f"kernel_validation.py: {root}: no measured kernel tables")
    lines = [
        "| card | table | source | roofline | held-out m | held-out (n, k) |",
        "|---|---|---|---|---|---|",
    ]
    all_roofline, all_m, all_nk = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for card in sorted(os.listdir(root)):
            folder = os.path.join(root, card)
            if not os.path.isdir(folder):
                continue
            for name in sorted(os.listdir(folder)):
                if not (name.startswith("gemm-") and name.endswith(".csv")):
                    continue
                dtype = name[len("gemm-"):-len(".csv")]
                path = os.path.join(folder, name)
                header, columns, rows = read_table(path)
                meta = dict(h[2:].split(": ", 1) for h in header if ": " in h)

                roofline = capsim_times(args.capsim, args.data_dir, card, dtype, path)
                e_roof = [float(p["roofline_us"]) / float(m["us"]) - 1 for p, m in zip(roofline, rows)]

                # Every other m of each (n, k): fit on even positions, score the odd ones.
                by_nk = {}
                for r in rows:
                    by_nk.setdefault((int(r["n"]), int(r["k"])), []).append(r)
                fit_m, held_m = [], []
                for series in by_nk.values():
                    series.sort(key=lambda r: int(r["m"]))
                    for i, r in enumerate(series):
                        (fit_m if i % 2 == 0 else held_m).append(r)
                fit_path = os.path.join(tmp, f"{card}-{dtype}-fit-m.csv")
                held_path = os.path.join(tmp, f"{card}-{dtype}-held-m.csv")
                write_table(fit_path, header, columns, fit_m)
                write_table(held_path, header, columns, held_m)
                e_m = errors_against(capsim_times(args.capsim, args.data_dir, card, dtype, held_path, fit_path),
                                     held_m, "table_us")

                # Every other n and k of the grid: fit on (even n, even k), score (odd n, odd k)
                # inside the fitted grid's range.
                ns = sorted({n for n, _ in by_nk})
                ks = sorted({k for _, k in by_nk})
                fit_ns, fit_ks = set(ns[0::2]), set(ks[0::2])
                held_ns = {n for n in ns[1::2] if min(fit_ns) < n < max(fit_ns)}
                held_ks = {k for k in ks[1::2] if min(fit_ks) < k < max(fit_ks)}
                fit_nk = [r for r in rows if int(r["n"]) in fit_ns and int(r["k"]) in fit_ks]
                held_nk = [r for r in rows if int(r["n"]) in held_ns and int(r["k"]) in held_ks]
                fit_path = os.path.join(tmp, f"{card}-{dtype}-fit-nk.csv")
                held_path = os.path.join(tmp, f"{card}-{dtype}-held-nk.csv")
                write_table(fit_path, header, columns, fit_nk)
                write_table(held_path, header, columns, held_nk)
                e_nk = errors_against(capsim_times(args.capsim, args.data_dir, card, dtype, held_path, fit_path),
                                      held_nk, "table_us")

                all_roofline += e_roof
                all_m += e_m
                all_nk += e_nk
                lines.append(f"| {card} | gemm {dtype} | {meta.get('framework', '?')} | {fmt(stats(e_roof))} | "
                             f"{fmt(stats(e_m))} | {fmt(stats(e_nk))} |")
    lines.append(f"| all | gemm | | {fmt(stats(all_roofline))} | {fmt(stats(all_m))} | {fmt(stats(all_nk))} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
