"""scripts/kernel_validation.py's held-out scoring: each table's points predicted from the others
(capsim's own lookup for GEMM, MoE and all-reduce; the same rule here for attention) and by the
roofline."""
import argparse
import difflib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from kernel_validation_roofline import *  # noqa: F401,F403,E402  (tables, statistics, the roofline mirror)


SHAPES = {
    "attention_decode": ["batch", "context", "heads", "kv_heads", "head_dim", "window"],
    "attention_prefill": ["batch", "tokens", "heads", "kv_heads", "head_dim", "window"],
    "moe": ["tokens", "hidden", "inter", "experts", "topk", "tp", "ep"],
    "allreduce": ["gpus", "bytes"],
}
# The axes a lookup interpolates along (then both at once where there are two).
AXES = {
    "attention_decode": ["context", "batch"],
    "attention_prefill": ["tokens", "batch"],
    "moe": ["tokens"],
    "allreduce": ["bytes"],
}


def log_interp(x, x0, y0, x1, y1):
    f = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + f * (math.log(y1) - math.log(y0)))


def held_out_1d(rows, shape, axis):
    """Every other point along `axis` of each series (the other shape columns fixed) left out;
    the interior ones predicted from their two neighbours."""
    series = {}
    for r in rows:
        key = tuple(r[c] for c in shape if c != axis)
        series.setdefault(key, []).append((float(r[axis]), float(r["us"])))
    errors = []
    for points in series.values():
        points.sort()
        for i in range(1, len(points) - 1, 2):
            (x0, y0), (x, y), (x1, y1) = points[i - 1], points[i], points[i + 1]
            errors.append(log_interp(x, x0, y0, x1, y1) / y - 1)
    return errors


def held_out_2d(rows, shape, a, b):
    """Every other value of `a` and of `b` left out; the points where both were left out,
    interior in both, predicted bilinearly (log-log) from the four fitted corners."""
    grids = {}
    for r in rows:
        key = tuple(r[c] for c in shape if c not in (a, b))
        grids.setdefault(key, {})[(float(r[a]), float(r[b]))] = float(r["us"])
    errors = []
    for grid in grids.values():
        xs = sorted({x for x, _ in grid})
        ys = sorted({y for _, y in grid})
        for i in range(1, len(xs) - 1, 2):
            for j in range(1, len(ys) - 1, 2):
                corners = [(xs[i + di], ys[j + dj]) for di in (-1, 1) for dj in (-1, 1)]
                if (xs[i], ys[j]) not in grid or any(c not in grid for c in corners):
                    continue
                low = log_interp(xs[i], xs[i - 1], grid[corners[0]], xs[i + 1], grid[corners[2]])
                high = log_interp(xs[i], xs[i - 1], grid[corners[1]], xs[i + 1], grid[corners[3]])
                errors.append(log_interp(ys[j], ys[j - 1], low, ys[j + 1], high) / grid[(xs[i], ys[j])] - 1)
    return errors


# The vLLM profile's fused-MoE scales (kernels.moe_compute_scale, moe_bandwidth_scale;
# docs/cost-model.md#moe), fitted here on the balanced bf16 MoE tables and checked card by card.
MOE_SCALE_GRID = ([1.0 + 0.025 * i for i in range(13)], [0.5 + 0.025 * i for i in range(23)])


def moe_scale_rows(data_dir, roofline, path):
    """One bf16 MoE table's rows as the roofline's parts at scales 1, so that any pair of scales
    costs a few operations per row: (compute s, memory s at the peak bandwidth, bandwidth
    efficiency, floor s, dispatch s, measured s). Only balanced tables with a capsim layout."""
    header, _, rows = read_table(path)
    if table_routing(header) != "balanced":
        return []
    c, e = roofline.card, roofline.engine
    rate = roofline.gemm_rate(roofline.math_of("bf16"))
    efficiency = c.bandwidth * e.bandwidth_scale
    dispatch = e.moe_dispatch_kernels
    out = []
    for r in rows:
        v = {k: float(r[k]) for k in SHAPES["moe"]}
        t, h, k, tp, ep = v["tokens"], v["hidden"], v["topk"], v["tp"], v["ep"]
        if ep > 1 and tp > 1:
            continue
        params = 3 * h * v["inter"] / tp
        pairs = t * k / ep
        hit = min(v["experts"] / ep, pairs)
        moved = t + (pairs if ep > 1 else t)
        d = term(0, (2 * t + 2 * pairs) * h * ACT, rate, dispatch, roofline.bandwidth, roofline.floor) if dispatch else 0
        out.append((2 * pairs * params / rate, (hit * params * 2.0 + 2 * moved * h * ACT) / c.memory_bandwidth,
                    efficiency, 3 * roofline.floor, d, float(r["us"]) * 1e-6))
    return out


def moe_scaled(row, bandwidth_scale, compute_scale):
    compute, memory, efficiency, floor, dispatch, _ = row
    return max(math.hypot(compute / compute_scale, memory / min(1.0, efficiency * bandwidth_scale)), floor) + dispatch


def fit_moe_scales(rows_by_card, cards):
    """The (bandwidth, compute) scale pair of MOE_SCALE_GRID with the least median |log error|
    over every 4th row of `cards` (two parameters; the thinning keeps the fit to seconds): the
    grid at every other step, then every step around the best."""
    rows = [r for c in cards for r in rows_by_card[c][::4]]

    def error(b, k):
        return statistics.median([abs(math.log(moe_scaled(r, b, k) / r[5])) for r in rows])

    bs, ks = MOE_SCALE_GRID
    best = min((error(b, k), i, j) for i, b in enumerate(bs) if i % 2 == 0 for j, k in enumerate(ks) if j % 2 == 0)
    _, i0, j0 = best
    best = min((error(bs[i], ks[j]), i, j) for i in range(max(0, i0 - 2), min(len(bs), i0 + 3))
               for j in range(max(0, j0 - 2), min(len(ks), j0 + 3)))
    return bs[best[1]], ks[best[2]]


def table_routing(header):
    """How the MoE table's rows were routed, for the roofline to read the same experts: balanced
    (the importer's note `routing balanced`) or else uniform, capsim's own model (the A100 table's
    `power_law_1.01` rows are skewed; uniform is the nearer of the two)."""
    return "balanced" if meta_of(header).get("note", "") == "routing balanced" else "uniform"


def roofline_of(roofline, op, dtype, r, routing="uniform"):
    v = {c: float(r[c]) for c in SHAPES[op]}
    if op == "attention_decode":
        return roofline.attention_decode(v["batch"], v["context"], v["heads"], v["kv_heads"], v["head_dim"], v["window"], dtype)
    if op == "attention_prefill":
        return roofline.attention_prefill(v["batch"], v["tokens"], v["heads"], v["kv_heads"], v["head_dim"], v["window"], dtype)
    if op == "moe":
        return roofline.moe(v["tokens"], v["hidden"], v["inter"], v["experts"], v["topk"], v["tp"], v["ep"], dtype,
                            routing=routing)
    return roofline.allreduce(v["gpus"], v["bytes"])


# ---------------------------------------------------------------------------------------------
# capsim with its MoE and all-reduce tables on (docs/cost-model.md#measured-kernels). Its lookup
# is the held-out lookup above (log time linear in log tokens / log bytes between the two
# neighbours); this checks that on held-out points against capsim itself: `capsim
# --measured-kernels roofline` given tables thinned to every other point of one series.

TABLES_CHECK_MODEL = "mixtral-8x7b"  # hidden 4096, 8 experts of 14336, top-2: in every card's bf16 MoE table
TABLES_CHECK_TP = 2


def thinned_data_dir(data_dir, card, tmp, replaced):
    """A data dir that is `data_dir` (links) except for the tables of calibration/kernels/<card>/
    named in `replaced` (file name -> (header, columns, rows)), written as given."""
    data_dir = os.path.abspath(data_dir)
    root = os.path.join(tmp, f"tables-check-{card}")
    kernels = os.path.join(data_dir, "calibration", "kernels")
    os.makedirs(os.path.join(root, "calibration", "kernels", card))
    for name in os.listdir(data_dir):
        if name != "calibration":
            os.symlink(os.path.join(data_dir, name), os.path.join(root, name))
    for name in os.listdir(os.path.join(data_dir, "calibration")):
        if name != "kernels":
            os.symlink(os.path.join(data_dir, "calibration", name), os.path.join(root, "calibration", name))
    for name in os.listdir(kernels):
        if name != card:
            os.symlink(os.path.join(kernels, name), os.path.join(root, "calibration", "kernels", name))
    for name in os.listdir(os.path.join(kernels, card)):
        target = os.path.join(root, "calibration", "kernels", card, name)
        if name in replaced:
            write_table(target, *replaced[name])
        else:
            os.symlink(os.path.join(kernels, card, name), target)
    return root


def lookup_inside(points, x):
    """capsim's lookup inside a measured series [(x, us)], ascending: log-log between neighbours."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 if x == x0 else y1 if x == x1 else log_interp(x, x0, y0, x1, y1)
    raise ValueError(f"{x} outside the series")


def check_capsim_tables(capsim, data_dir, card, roofline, tmp):
    """Runs capsim with the tables on, its MoE and all-reduce tables thinned to every other point
    of Mixtral-8x7B's TP-2 series and of every all-reduce series, at each held-out interior token
    count; returns (MoE points, all-reduce points, largest relative difference between capsim's
    groups and the lookup of this script (+ the router GEMM's roofline, x layers), all-reduce
    source). Raises BadInput where they differ by more than 1e-6."""
    folder = os.path.join(data_dir, "calibration", "kernels", card)
    moe_header, moe_columns, moe_rows = read_table(os.path.join(folder, "moe-bf16.csv"))
    ar_header, ar_columns, ar_rows = read_table(os.path.join(folder, "allreduce-bf16.csv"))
    conf = model_config(data_dir, TABLES_CHECK_MODEL)
    h, E, k, inter, layers = (conf["hidden_size"], conf["num_local_experts"], conf["num_experts_per_tok"],
                              conf["intermediate_size"], conf["num_hidden_layers"])
    layout = tuple(str(v) for v in (h, inter, E, k, TABLES_CHECK_TP, 1))
    mine = sorted((r for r in moe_rows if tuple(r[c] for c in SHAPES["moe"][1:]) == layout),
                  key=lambda r: float(r["tokens"]))
    held = {id(r) for r in mine[1:-1:2]}
    fit_moe = [(float(r["tokens"]), float(r["us"])) for r in mine if id(r) not in held]
    ar_series = {}
    for r in ar_rows:
        ar_series.setdefault(r["gpus"], []).append(r)
    fit_ar_rows = [r for rows in ar_series.values() for r in sorted(rows, key=lambda r: float(r["bytes"]))[0::2]]
    fit_ar = sorted((float(r["bytes"]), float(r["us"])) for r in fit_ar_rows if r["gpus"] == str(TABLES_CHECK_TP))
    data = thinned_data_dir(data_dir, card, tmp, {
        "moe-bf16.csv": (moe_header, moe_columns, [r for r in moe_rows if id(r) not in held]),
        "allreduce-bf16.csv": (ar_header, ar_columns, fit_ar_rows)})
    rate, worst, n_moe, n_ar, ar_source = roofline.gemm_rate(roofline.math_of("bf16")), 0.0, 0, 0, ""
    for r in mine[1:-1:2]:
        t = float(r["tokens"])
        cmd = [capsim, "--measured-kernels", "--data-dir", data, "roofline", "--card", card, "--engine", ENGINE,
               "--model", TABLES_CHECK_MODEL, "--tp", str(TABLES_CHECK_TP), "--batch", r["tokens"], "--context", "1",
               "--json", "-"]
        j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        groups = {g["group"]: g["seconds"] for g in j["groups"]}
        router = term(2 * t * h * E, h * E * ACT, rate, 1, roofline.bandwidth, roofline.floor)
        pairs = [(groups["moe_mlp"], layers * (lookup_inside(fit_moe, t) * 1e-6 + router), "moe_mlp")]
        n_moe += 1
        ar_source = j["allreduce_source"]
        nbytes = t * h * ACT
        if ar_source.startswith("measured") and fit_ar[0][0] <= nbytes <= fit_ar[-1][0]:
            pairs.append((groups["all_reduce"], (2 * layers + 1) * lookup_inside(fit_ar, nbytes) * 1e-6, "all_reduce"))
            n_ar += 1
        for theirs, ours, group in pairs:
            diff = abs(theirs / ours - 1)
            if diff > 1e-6:
                raise BadInput(f"`{' '.join(cmd)}`: {group} {theirs:.9g} s, the lookup here {ours:.9g} s "
                               f"(sim/hardware/measured_moe.cc or measured_allreduce.cc changed?)")
            worst = max(worst, diff)
    return n_moe, n_ar, worst, ar_source


# ---------------------------------------------------------------------------------------------

def meta_of(header):
    return dict(h[2:].split(": ", 1) for h in header if ": " in h)


def score_gemm(capsim, data_dir, card, dtype, path, tmp):
    header, columns, rows = read_table(path)
    roofline = capsim_times(capsim, data_dir, card, dtype, path)
    e_roof = [float(p["roofline_us"]) / float(m["us"]) - 1 for p, m in zip(roofline, rows)]
    measured = [float(m["us"]) for m in rows]

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
    e_m = errors_against(capsim_times(capsim, data_dir, card, dtype, held_path, fit_path), held_m, "table_us")

    # Every other n and k of the grid: fit on (even n, even k), score (odd n, odd k) inside the
    # fitted grid's range.
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
    e_nk = errors_against(capsim_times(capsim, data_dir, card, dtype, held_path, fit_path), held_nk, "table_us")
    return Scores(meta_of(header), e_roof, measured, [e_m, e_nk])


def score_op(roofline, op, dtype, path):
    known = KV_BYTES if op.startswith("attention") else WEIGHT_BYTES if op == "moe" else {"bf16": 2.0}
    if dtype not in known:
        raise BadInput(f"{path}: dtype {dtype}: no roofline mirror for it in {op}; accepted: {', '.join(known)}")
    header, _, rows = read_table(path)
    routing = table_routing(header) if op == "moe" else "uniform"
    e_roof, measured, windows, skipped = [], [], [], 0
    for r in rows:
        p = roofline_of(roofline, op, dtype, r, routing)
        if p is None:
            skipped += 1
        else:
            e_roof.append(p * 1e6 / float(r["us"]) - 1)
            measured.append(float(r["us"]))
            windows.append(float(r.get("window", 0)))
    held = [held_out_1d(rows, SHAPES[op], a) for a in AXES[op]]
    if len(AXES[op]) == 2:
        held.append(held_out_2d(rows, SHAPES[op], *AXES[op]))
    return Scores(meta_of(header), e_roof, measured, held, skipped, windows)


class Scores:
    """One table's errors: the roofline's (with the measured times of the same rows), and the
    held-out lookup's along each axis."""
    BIG_US = 100.0  # kernels this long are past any fixed cost

    def __init__(self, meta, roofline, measured, held, skipped=0, windows=None):
        self.meta, self.roofline, self.measured, self.held, self.skipped = meta, roofline, measured, held, skipped
        self.windows = windows or [0.0] * len(roofline)  # attention's window column per roofline row

    def roofline_big(self, window=None):
        """Roofline errors of the kernels measured at BIG_US or more; `window` picks the attention
        rows with that window (0 = full attention)."""
        return [e for e, us, w in zip(self.roofline, self.measured, self.windows)
                if us >= self.BIG_US and (window is None or w == window)]

    def fastest_us(self):
        return min(self.measured) if self.measured else None

    def all_held(self):
        return [e for errors in self.held for e in errors]


def tables_of(root):
    """(card, op, dtype, path) of every table, sorted."""
    out = []
    for card in sorted(os.listdir(root)):
        folder = os.path.join(root, card)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            m = re.fullmatch(r"(gemm|attention_decode|attention_prefill|moe|allreduce)-([a-z0-9_]+)\.csv", name)
            if m:
                out.append((card, m.group(1), m.group(2), os.path.join(folder, name)))
    return out


def pct(x):
    return f"{100 * x:.1f}%"
