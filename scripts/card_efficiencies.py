#!/usr/bin/env python3
"""Card efficiencies from the measured GEMM tables, relative to the H100 anchor.

For every card with calibration/kernels/<card>/gemm-<dtype>.csv (docs/data-formats.md#measured-
kernel-tables) this measures, per dtype (bf16, fp8, nvfp4), the two numbers the roofline uses
for a GEMM (sim/cost/roofline_group.h: time = max(hypot(FLOPs / (peak x compute), bytes /
(bandwidth x memory)), floor)):

  memory    achieved share of the datasheet bandwidth in the memory-bound region: m 1-64
            tokens, weights of 64 MB or more (so the per-kernel floor does not count);
  compute   achieved share of the dense datasheet peak in the compute-bound region: shapes whose
            compute time is at least 4x their memory time, measured at 50 us or more.

Each is the median over the region's shapes of the efficiency that makes the roofline formula
give the measured time (the other efficiency held at its own fit; three alternations), on the
shapes every card's table of that dtype has (the A100's grid is the smallest).

NOT APPLIED (2026-12-06): written into the card files (--write-cards), these values made
scripts/validate.py worse where it can check them: LMDeploy A100 TPOT 5.0 -> 12.0% median error
(bias +8.8%), batch-1 decode 5.8 -> 8.1% (modelled engines 4.4 -> 7.2%, bias +8.2%), TensorRT-LLM
0.12 offline 8.2 -> 8.8%, while the vLLM development runs' TPOT went 3.85 -> 3.46%. The card
files keep their values; this script reports what the tables say (docs/cost-model.md#card-
efficiencies-not-applied).

The card values it computes are RELATIVE: the vLLM engine constants (calibration/engines/vllm.yaml:
attention scale, step overhead, request path) were fitted on H100 runs with H100's card values,
so H100 stays the anchor (its values unchanged) and every other card with tables gets

    card value = H100's card value x card's measured / H100's measured

for the same kernel class and dtype (nvfp4, which Hopper lacks, against H100's bf16). Fields:
memory_bandwidth / compute (bf16), memory_bandwidth_fp8 / compute_fp8, memory_bandwidth_fp4 /
compute_fp4 (nvfp4 tables; the card key is fp4). Cards without tables keep their values.

Scored on shapes held out of the fit (every other m; every other (n, k) in a checkerboard), and
leave-one-card-out: a card's efficiency predicted as H100's value x the mean ratio of the other
cards (what a card without tables could take), against keeping its old card-file value.

Usage:
  python3 scripts/card_efficiencies.py                  # report to stdout
  python3 scripts/card_efficiencies.py --out docs/card-efficiencies.md
  python3 scripts/card_efficiencies.py --write-cards    # set the values in calibration/cards/*.yaml
  python3 scripts/card_efficiencies.py --check          # exit 1 when a card file or the page drifts
"""

import argparse
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import kernel_validation as kv  # noqa: E402  (table reader, card reader, units)

ANCHOR = "h100-sxm"
DTYPES = ("bf16", "fp8", "nvfp4")
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5 + 1.0 / 16.0}  # as ModelSpec counts them
ACT = 2.0
MEMORY_M_MAX = 64
MEMORY_MIN_WEIGHT_BYTES = 64e6
COMPUTE_OVER_MEMORY = 4.0
COMPUTE_MIN_US = 50.0
# card-file field per (kernel class, dtype), and the anchor's dtype whose H100 value it scales.
FIELDS = {
    ("memory", "bf16"): ("memory_bandwidth", "bf16"),
    ("compute", "bf16"): ("compute", "bf16"),
    ("memory", "fp8"): ("memory_bandwidth_fp8", "fp8"),
    ("compute", "fp8"): ("compute_fp8", "fp8"),
    ("memory", "nvfp4"): ("memory_bandwidth_fp4", "bf16"),
    ("compute", "nvfp4"): ("compute_fp4", "bf16"),
}
# What a field falls back to when the card file lacks it (sim/hardware/card.h).
FALLBACK = {"memory_bandwidth_fp8": "memory_bandwidth", "memory_bandwidth_fp4": "memory_bandwidth",
            "compute_fp8": "compute", "compute_fp4": "compute"}
SOURCE_KEY = "aic-gemm-efficiency"
# The card files' values before this script wrote them (main at 4dbd9d2, 2026-12-06: assumed or
# fitted end to end), the "old" the report scores; absent fields fall back as the loader does.
PREVIOUS = {
    "a100-80gb-sxm": {"memory_bandwidth": 0.78, "compute": 0.75},
    "b200": {"memory_bandwidth": 0.75, "compute": 0.73},
    "b300": {"memory_bandwidth": 0.75, "compute": 0.73},
    "gb200": {"memory_bandwidth": 0.75, "compute": 0.73},
    "h200": {"memory_bandwidth": 0.78, "compute": 0.76, "compute_fp8": 0.67},
    "l40s": {"memory_bandwidth": 0.74, "compute": 0.70, "compute_fp8": 0.60},
    "rtx-pro-6000": {"memory_bandwidth": 0.74, "compute": 0.70, "compute_fp8": 0.60},
}


def card_names(root):
    kdir = os.path.join(root, "calibration", "kernels")
    return sorted(d for d in os.listdir(kdir) if os.path.exists(os.path.join(kdir, d, "gemm-bf16.csv")))


def card_yaml(root, card):
    return kv.load_yaml(os.path.join(root, "calibration", "cards", card + ".yaml"))


def card_value(y, field):
    """A card file's efficiency.<field>, following the fallbacks the loader applies."""
    eff = y.get("efficiency", {})
    while field not in eff:
        field = FALLBACK[field]
    return kv.quantity(eff[field], field)


def previous_value(analysis, card, field):
    if card not in PREVIOUS:
        return card_value(analysis.yaml[card], field)
    while field not in PREVIOUS[card]:
        field = FALLBACK[field]
    return PREVIOUS[card][field]


def peak_of(y, dtype):
    key = "fp4" if dtype == "nvfp4" else dtype
    return kv.quantity(y["dense_peak"][key], key)


class Table:
    def __init__(self, root, card, dtype):
        y = card_yaml(root, card)
        self.card, self.dtype = card, dtype
        self.bandwidth = kv.quantity(y["memory_bandwidth"], "memory_bandwidth")
        self.peak = peak_of(y, dtype)
        self.floor = kv.quantity(y["efficiency"].get("kernel_floor", 0), "kernel_floor")
        _, _, rows = kv.read_table(os.path.join(root, "calibration", "kernels", card, f"gemm-{dtype}.csv"))
        self.rows = {}
        for r in rows:
            n, k, m, us = float(r["n"]), float(r["k"]), float(r["m"]), float(r["us"])
            self.rows[(n, k, m)] = us * 1e-6

    def flops_bytes(self, n, k, m):
        return 2 * m * n * k, n * k * WEIGHT_BYTES[self.dtype] + m * k * ACT

    def predict(self, n, k, m, memory, compute):
        f, b = self.flops_bytes(n, k, m)
        return max(math.hypot(f / (self.peak * compute), b / (self.bandwidth * memory)), self.floor)


def implied(other_s, t, work, rate):
    """The efficiency that makes hypot(other_s, work / (rate x eff)) equal t (inf when other_s
    alone already exceeds t)."""
    rest = t * t - other_s * other_s
    return work / (rate * math.sqrt(rest)) if rest > 0 else float("inf")


def fit(table, shapes):
    """(memory, compute, rows in each region) on `shapes`."""
    memory, compute = 0.75, 0.7
    mem_rows = [s for s in shapes if s[2] <= MEMORY_M_MAX and s[0] * s[1] * WEIGHT_BYTES[table.dtype] >= MEMORY_MIN_WEIGHT_BYTES]
    comp_rows = []
    for _ in range(3):
        vals = []
        for n, k, m in mem_rows:
            f, b = table.flops_bytes(n, k, m)
            vals.append(implied(f / (table.peak * compute), table.rows[(n, k, m)], b, table.bandwidth))
        memory = statistics.median(vals)
        comp_rows = []
        for n, k, m in shapes:
            f, b = table.flops_bytes(n, k, m)
            t = table.rows[(n, k, m)]
            if t * 1e6 >= COMPUTE_MIN_US and f / (table.peak * compute) >= COMPUTE_OVER_MEMORY * b / (table.bandwidth * memory):
                comp_rows.append((n, k, m))
        vals = []
        for n, k, m in comp_rows:
            f, b = table.flops_bytes(n, k, m)
            vals.append(implied(b / (table.bandwidth * memory), table.rows[(n, k, m)], f, table.peak))
        compute = statistics.median(vals) if vals else compute
    return memory, compute, mem_rows, comp_rows


def errors(table, rows, memory, compute):
    return [table.predict(n, k, m, memory, compute) / table.rows[(n, k, m)] - 1 for n, k, m in rows]


def med_abs(e):
    return statistics.median(abs(x) for x in e) if e else float("nan")


def med(e):
    return statistics.median(e) if e else float("nan")


def cell(e):
    return f"{100 * med_abs(e):.1f}% / {100 * med(e):+.1f}%" if e else "-"


class Analysis:
    def __init__(self, root):
        self.root = root
        self.cards = card_names(root)
        if ANCHOR not in self.cards:
            raise SystemExit(f"card_efficiencies.py: no calibration/kernels/{ANCHOR}/gemm-bf16.csv (the anchor)")
        self.tables = {}
        for card in self.cards:
            for dtype in DTYPES:
                path = os.path.join(root, "calibration", "kernels", card, f"gemm-{dtype}.csv")
                if os.path.exists(path):
                    self.tables[(card, dtype)] = Table(root, card, dtype)
        # The shapes every table of a dtype has, and every bf16 table (the anchor of nvfp4).
        self.common = {}
        for dtype in DTYPES:
            keys = [set(t.rows) for (c, d), t in self.tables.items() if d in (dtype, "bf16")]
            self.common[dtype] = sorted(set.intersection(*keys)) if keys else []
        self.measured = {}
        for (card, dtype), t in self.tables.items():
            self.measured[(card, dtype)] = fit(t, self.common[dtype])
        self.yaml = {card: card_yaml(root, card) for card in self.cards}

    def anchor_of(self, cls, dtype):
        field, anchor_dtype = FIELDS[(cls, dtype)]
        i = 0 if cls == "memory" else 1
        return field, card_value(self.yaml[ANCHOR], field), self.measured[(ANCHOR, anchor_dtype)][i]

    def derived(self):
        """{card: {field: (value, measured, anchor measured, anchor value)}} for every card but the anchor."""
        out = {}
        for (card, dtype), fitted in sorted(self.measured.items()):
            if card == ANCHOR:
                continue
            for i, cls in enumerate(("memory", "compute")):
                field, anchor_value, anchor_measured = self.anchor_of(cls, dtype)
                value = round(anchor_value * fitted[i] / anchor_measured, 2)
                out.setdefault(card, {})[field] = (value, fitted[i], anchor_measured, anchor_value)
        return out


def held_out(analysis):
    """Rows: (card, dtype, scheme, region, errors of old values, errors of the own fit, errors of
    the relative values), the fit made on the other half of the shapes."""
    out = []
    for (card, dtype), table in sorted(analysis.tables.items()):
        shapes = analysis.common[dtype]
        ms = sorted({s[2] for s in shapes})
        ns, ks = sorted({s[0] for s in shapes}), sorted({s[1] for s in shapes})
        schemes = {
            "every other m": lambda s: ms.index(s[2]) % 2 == 0,
            "every other (n, k)": lambda s: (ns.index(s[0]) + ks.index(s[1])) % 2 == 0,
        }
        field_m, _, _ = analysis.anchor_of("memory", dtype)
        field_c, _, _ = analysis.anchor_of("compute", dtype)
        old = (previous_value(analysis, card, field_m), previous_value(analysis, card, field_c))
        for scheme, in_fit in schemes.items():
            fit_shapes = [s for s in shapes if in_fit(s)]
            test_shapes = [s for s in shapes if not in_fit(s)]
            mem, comp, _, _ = fit(table, fit_shapes)
            # The relative value from fits on the same half of the anchor's table.
            anchor_dtype = FIELDS[("memory", dtype)][1]
            a_mem, a_comp, _, _ = fit(analysis.tables[(ANCHOR, anchor_dtype)],
                                      [s for s in analysis.common[anchor_dtype] if in_fit(s)])
            ay = analysis.yaml[ANCHOR]
            rel = (card_value(ay, field_m) * mem / a_mem, card_value(ay, field_c) * comp / a_comp)
            _, _, mem_rows, comp_rows = fit(table, test_shapes)
            for region, rows in (("memory-bound", mem_rows), ("compute-bound", comp_rows)):
                out.append((card, dtype, scheme, region, errors(table, rows, *old),
                            errors(table, rows, mem, comp), errors(table, rows, *rel)))
    return out


def leave_one_card_out(analysis):
    """Rows: (card, dtype, class, old value, class-mean value, own value, errors old, errors class mean)."""
    ratios = {}
    for (card, dtype), fitted in analysis.measured.items():
        for i, cls in enumerate(("memory", "compute")):
            _, _, anchor_measured = analysis.anchor_of(cls, dtype)
            ratios[(card, dtype, cls)] = fitted[i] / anchor_measured
    out = []
    for (card, dtype), table in sorted(analysis.tables.items()):
        if card == ANCHOR:
            continue
        _, _, mem_rows, comp_rows = fit(table, analysis.common[dtype])
        for cls, rows in (("memory", mem_rows), ("compute", comp_rows)):
            others = [r for (c, d, k), r in ratios.items() if d == dtype and k == cls and c not in (card, ANCHOR)]
            if not others:
                continue
            field, anchor_value, _ = analysis.anchor_of(cls, dtype)
            old = previous_value(analysis, card, field)
            mean_value = anchor_value * statistics.mean(others)
            own = anchor_value * ratios[(card, dtype, cls)]
            fm, _, _ = analysis.anchor_of("memory", dtype)
            fc, _, _ = analysis.anchor_of("compute", dtype)
            base = [previous_value(analysis, card, fm), previous_value(analysis, card, fc)]
            i = 0 if cls == "memory" else 1
            with_mean = list(base)
            with_mean[i] = mean_value
            out.append((card, dtype, cls, old, mean_value, own, errors(table, rows, *base),
                        errors(table, rows, *with_mean)))
    return out


def report(analysis):
    L = []
    A = L.append
    A("<!-- Written by scripts/card_efficiencies.py; do not edit by hand. -->")
    A("# Card efficiencies from the measured GEMM tables")
    A("")
    A("Written by `python3 scripts/card_efficiencies.py --out docs/card-efficiencies.md` from the GEMM tables of")
    A("`calibration/kernels/<card>/gemm-<dtype>.csv` (NVIDIA AIConfigurator's vLLM kernel databases,")
    A("`calibration/kernels/SOURCES.md`). The roofline times one GEMM as `max(hypot(FLOPs / (peak x compute),")
    A("bytes / (bandwidth x memory)), floor)` with bytes = weights + input activations")
    A("([cost-model.md](cost-model.md#card-efficiencies)). Measured here, on the shapes every table of the dtype has:")
    A("")
    A(f"- **memory**: the efficiency that makes that formula give the measured time, median over m 1-{MEMORY_M_MAX}")
    A(f"  and weights of {MEMORY_MIN_WEIGHT_BYTES / 1e6:.0f} MB or more (the other efficiency at its own fit);")
    A(f"- **compute**: the same over the shapes whose compute time is at least {COMPUTE_OVER_MEMORY:g}x their memory")
    A(f"  time, measured at {COMPUTE_MIN_US:g} us or more.")
    A("")
    A(f"Card values are relative to the anchor `{ANCHOR}`, whose values the vLLM engine constants were fitted")
    A("with: `value = H100's card value x card's measured / H100's measured`, same kernel class and dtype")
    A("(nvfp4 against H100's bf16). `--write-cards` writes them; `--check` (ctest `card_efficiencies_drift`)")
    A("fails when a card file differs from them.")
    A("")
    A("## Measured and card values")
    A("")
    A("| card | dtype | memory measured | compute measured | rows (memory / compute) | memory field: old -> new | compute field: old -> new |")
    A("|---|---|---:|---:|---|---|---|")
    derived = analysis.derived()
    for (card, dtype), (mem, comp, mrows, crows) in sorted(analysis.measured.items()):
        y = analysis.yaml[card]
        cols = []
        for cls in ("memory", "compute"):
            field, _, _ = analysis.anchor_of(cls, dtype)
            if card == ANCHOR:
                cols.append(f"`{field}` {card_value(y, field):.2f} (anchor)")
            else:
                old = previous_value(analysis, card, field)
                cols.append(f"`{field}` {old:.2f} -> {derived[card][field][0]:.2f}")
        A(f"| {card} | {dtype} | {mem:.3f} | {comp:.3f} | {len(mrows)} / {len(crows)} | {cols[0]} | {cols[1]} |")
    A("")
    A("## Does the memory-bound efficiency depend on m?")
    A("")
    A(f"Median achieved share of the bandwidth per m (the formula's memory efficiency, weights >= "
      f"{MEMORY_MIN_WEIGHT_BYTES / 1e6:.0f} MB, compute at the fitted value):")
    A("")
    ms = [1, 2, 4, 8, 16, 32, 48, 64]
    A("| card | dtype | " + " | ".join(f"m={m}" for m in ms) + " |")
    A("|---|---|" + "---:|" * len(ms))
    for (card, dtype), table in sorted(analysis.tables.items()):
        _, comp, mem_rows, _ = analysis.measured[(card, dtype)]
        cells = []
        for m in ms:
            vals = []
            for n, k, mm in mem_rows:
                if mm != m:
                    continue
                f, b = table.flops_bytes(n, k, m)
                vals.append(implied(f / (table.peak * comp), table.rows[(n, k, m)], b, table.bandwidth))
            cells.append(f"{statistics.median(vals):.2f}" if vals else "-")
        A(f"| {card} | {dtype} | " + " | ".join(cells) + " |")
    A("")
    A("## Held-out shapes")
    A("")
    A("The efficiencies fitted on half of each table's shapes; the roofline GEMM time scored on the other half,")
    A("in the region the efficiency governs. Cell: median |error| / median error, error = predicted / measured - 1")
    A("(negative: capsim too fast). **old**: the card file's values before this script (`PREVIOUS`); **own**: the card's own")
    A("measured efficiencies (absolute); **relative**: H100's values x the ratio (what the card files get; for")
    A("H100 itself its card values).")
    A("")
    A("| card | dtype | held out | region | old | own | relative |")
    A("|---|---|---|---|---|---|---|")
    for card, dtype, scheme, region, e_old, e_own, e_rel in analysis.held:
        A(f"| {card} | {dtype} | {scheme} | {region} | {cell(e_old)} | {cell(e_own)} | {cell(e_rel)} |")
    A("")
    A("## Leave one card out: a card without tables")
    A("")
    A("Each card with tables predicted as if it had none: H100's value x the mean ratio of the other cards")
    A("(not H100) for the class and dtype (**class mean**), against its old card-file value; scored on all of")
    A("its table's shapes in the region.")
    A("")
    A("| card | dtype | class | old value | class mean | own (relative) | error with old | error with class mean |")
    A("|---|---|---|---:|---:|---:|---|---|")
    better = worse = 0
    for card, dtype, cls, old, mean_value, own, e_old, e_mean in analysis.loco:
        A(f"| {card} | {dtype} | {cls} | {old:.2f} | {mean_value:.2f} | {own:.2f} | {cell(e_old)} | {cell(e_mean)} |")
        if e_old and e_mean:
            better += med_abs(e_mean) < med_abs(e_old)
            worse += med_abs(e_mean) >= med_abs(e_old)
    A("")
    A(f"The class mean beats the old value in {better} of {better + worse} card x dtype x class cases.")
    A("")
    return "\n".join(L) + "\n"


def set_field(text, field, value, comment=None):
    """The card file text with efficiency.<field> set to {value, source: SOURCE_KEY}."""
    line = f"  {field}: {{value: {value:.2f}, source: {SOURCE_KEY}}}"
    pattern = rf"\n  {field}: \{{[^}}\n]*\}}[^\n]*"
    if re.search(pattern, text):
        return re.sub(pattern, lambda _: "\n" + line, text, count=1)
    anchor = {"memory_bandwidth_fp8": "memory_bandwidth", "memory_bandwidth_fp4": "memory_bandwidth_fp8",
              "compute_fp8": "compute", "compute_fp4": "compute_fp8"}[field]
    while not re.search(rf"\n  {anchor}: \{{", text):
        anchor = FALLBACK[anchor]
    text, n = re.subn(rf"(\n  {anchor}: \{{[^}}\n]*\}}[^\n]*)", lambda mo: mo.group(1) + "\n" + line, text, count=1)
    if n != 1:
        raise SystemExit(f"card_efficiencies.py: efficiency.{anchor} not found once")
    return text


def reference_text(card, fields):
    parts = []
    for field, (value, measured, anchor_measured, anchor_value) in sorted(fields.items()):
        parts.append(f"{field} {value:.2f} = {anchor_value:.2f} x {measured:.3f} / {anchor_measured:.3f}")
    return (f"calibration/kernels/{card}/gemm-*.csv against calibration/kernels/{ANCHOR}/gemm-*.csv (NVIDIA "
            f"AIConfigurator vLLM GEMM tables, calibration/kernels/SOURCES.md), by scripts/card_efficiencies.py "
            f"(docs/card-efficiencies.md): the GEMM memory-bound (m 1-{MEMORY_M_MAX}, weights >= 64 MB) and "
            f"compute-bound efficiencies measured on this card, relative to the H100's measured ones and times the "
            f"H100 card value (the anchor of the vLLM engine constants): " + "; ".join(parts) +
            ". nvfp4 against H100's bf16.")


def write_cards(root, derived):
    for card, fields in derived.items():
        path = os.path.join(root, "calibration", "cards", card + ".yaml")
        text = open(path, encoding="utf-8").read()
        for field, (value, *_rest) in fields.items():
            text = set_field(text, field, value)
        ref = f"  {SOURCE_KEY}: \"{reference_text(card, fields)}\""
        if re.search(rf"\n  {SOURCE_KEY}: [^\n]*", text):
            text = re.sub(rf"\n  {SOURCE_KEY}: [^\n]*", lambda _: "\n" + ref, text, count=1)
        else:
            text = text.replace("\nreferences:\n", "\nreferences:\n" + ref + "\n", 1)
        basis = (f"measured GEMM tables of this card (calibration/kernels/{card}/), relative to H100 SXM's "
                 f"(scripts/card_efficiencies.py)")
        if re.search(r"\n  attention_bandwidth: \{", text):
            basis += "; decode attention's KV reads: efficiency.attention_bandwidth's own source"
        text, n = re.subn(r"\n  data: \{[^\n]*\}",
                          lambda _: f"\n  data: {{value: measured, basis: \"{basis}\", source: {SOURCE_KEY}}}",
                          text, count=1)
        if n != 1:
            raise SystemExit(f"{path}: efficiency.data not found once")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def check(analysis, derived):
    bad = []
    for card, fields in derived.items():
        y = analysis.yaml[card]
        eff = y.get("efficiency", {})
        for field, (value, *_rest) in fields.items():
            have = kv.quantity(eff[field], field) if field in eff else None
            if have is None or abs(have - value) > 1e-9:
                bad.append(f"calibration/cards/{card}.yaml: efficiency.{field} is {have}, the tables give {value:.2f}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=REPO, help="repository root holding calibration/")
    ap.add_argument("--out", default="-", help="report file ('-' = stdout)")
    ap.add_argument("--write-cards", action="store_true", help="write the derived values into the card files")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a card file's value or docs/card-efficiencies.md differs from what "
                         "the tables give (77: PyYAML missing)")
    a = ap.parse_args()
    try:
        analysis = Analysis(a.data_dir)
    except kv.MissingDependency as e:
        print(f"card_efficiencies.py: skipped: {e}", file=sys.stderr)
        return 77
    except (kv.BadInput, OSError, KeyError) as e:
        print(f"card_efficiencies.py: {e}", file=sys.stderr)
        return 2
    derived = analysis.derived()
    if a.write_cards:
        write_cards(a.data_dir, derived)
    analysis.held = held_out(analysis)
    analysis.loco = leave_one_card_out(analysis)
    text = report(analysis)
    if a.check:
        bad = check(analysis, derived)
        doc = os.path.join(a.data_dir, "docs", "card-efficiencies.md")
        have = open(doc, encoding="utf-8").read() if os.path.exists(doc) else ""
        if have != text:
            bad.append(f"{doc} differs from what the tables give; regenerate: python3 scripts/card_efficiencies.py "
                       f"--out docs/card-efficiencies.md")
        for b in bad:
            print(b, file=sys.stderr)
        if not bad:
            n = sum(len(f) for f in derived.values())
            print(f"card_efficiencies.py: {n} efficiencies of {len(derived)} card files and docs/card-efficiencies.md "
                  f"match the tables")
        return 1 if bad else 0
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
