"""scripts/kernel_validation.py's ground: reading and writing the tables, error statistics, and
the mirror of capsim's roofline (sim/cost/roofline_cost.cc, sim/cost/expert_parallel.cc) for the
ops capsim has no one-kernel command for, checked against `capsim roofline --json`."""
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

ENGINE = "vllm"  # the tables time vLLM's kernels


class BadInput(Exception):
    pass


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
    return [float(p[key]) / float(m["us"]) - 1 for p, m in zip(predicted, measured)]


# ---------------------------------------------------------------------------------------------
# The card and engine constants, read as sim/hardware/card.cc and sim/llm/engine_profile.cc read
# them (only the fields the roofline of one kernel needs).

UNIT_SCALE = {
    "PB/s": 1e15, "TB/s": 1e12, "GB/s": 1e9, "MB/s": 1e6,
    "PFLOPS": 1e15, "TFLOPS": 1e12, "GFLOPS": 1e9, "POPS": 1e15, "TOPS": 1e12, "GOPS": 1e9,
    "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0,
}


def quantity(node, where):
    value = node.get("value") if isinstance(node, dict) else node
    if isinstance(value, (int, float)):
        return float(value)
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([A-Za-z/]*)\s*", str(value))
    if not m or (m.group(2) and m.group(2) not in UNIT_SCALE):
        raise BadInput(f"{where}: '{value}' is not a number with one of the units {', '.join(UNIT_SCALE)}")
    return float(m.group(1)) * (UNIT_SCALE[m.group(2)] if m.group(2) else 1.0)


class MissingDependency(Exception):
    pass


def load_yaml(path):
    try:
        import yaml  # PyYAML (Debian python3-yaml): the card and engine files
    except ImportError:
        raise MissingDependency("PyYAML is not installed (python3-yaml); it reads the card and engine files")
    with open(path) as f:
        return yaml.safe_load(f)


class Card:
    def __init__(self, data_dir, name):
        path = os.path.join(data_dir, "calibration", "cards", name + ".yaml")
        y = load_yaml(path)
        eff = y.get("efficiency", {})
        ic = y.get("interconnect", {})
        self.name = name
        self.memory_bandwidth = quantity(y["memory_bandwidth"], f"{path}: memory_bandwidth")
        self.peak = {}
        for key, node in y["dense_peak"].items():
            self.peak["nvfp4" if key == "fp4" else key] = quantity(node, f"{path}: dense_peak.{key}")
        self.compute = quantity(eff["compute"], f"{path}: efficiency.compute")
        self.compute_fp8 = quantity(eff["compute_fp8"], f"{path}: efficiency.compute_fp8") if "compute_fp8" in eff else 0.0
        self.bandwidth = quantity(eff["memory_bandwidth"], f"{path}: efficiency.memory_bandwidth")
        # The per-format GEMM efficiencies; 0 = as the 16-bit ones (sim/hardware/card.h).
        self.compute_of = {"fp8": self.compute_fp8}
        self.bandwidth_of = {}
        for key, field, into in (("nvfp4", "compute_fp4", self.compute_of),
                                 ("fp8", "memory_bandwidth_fp8", self.bandwidth_of),
                                 ("nvfp4", "memory_bandwidth_fp4", self.bandwidth_of)):
            into[key] = quantity(eff[field], f"{path}: efficiency.{field}") if field in eff else 0.0
        self.attention_bandwidth = (quantity(eff["attention_bandwidth"], f"{path}: efficiency.attention_bandwidth")
                                    if "attention_bandwidth" in eff else 0.0)
        self.kernel_floor = quantity(eff["kernel_floor"], f"{path}: efficiency.kernel_floor") if "kernel_floor" in eff else 0.0
        self.nvlink = quantity(ic["nvlink_bandwidth"], f"{path}: interconnect.nvlink_bandwidth") if "nvlink_bandwidth" in ic else 0.0
        self.nvlink_gpus = (quantity(ic["nvlink_gpus"], f"{path}: interconnect.nvlink_gpus") if "nvlink_gpus" in ic
                            else (8 if self.nvlink > 0 else 0))
        generation = int(quantity(ic.get("pcie_generation", 4), f"{path}: interconnect.pcie_generation"))
        lanes = quantity(ic.get("pcie_lanes", 16), f"{path}: interconnect.pcie_lanes")
        per_lane = {3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}.get(generation, 0.985e9)
        self.pcie = per_lane * lanes
        p2p = ic.get("peer_to_peer", False)
        self.peer_to_peer = bool(p2p.get("value") if isinstance(p2p, dict) else p2p)
        self.half = "bf16" if "bf16" in self.peak else "fp16"  # native_half()


class Engine:
    def __init__(self, data_dir, name):
        path = os.path.join(data_dir, "calibration", "engines", name + ".yaml")
        y = load_yaml(path)
        k, c = y["kernels"], y["communication"]

        def q(section, key, default=None):
            if key not in section:
                if default is None:
                    raise BadInput(f"{path}: {key}: missing")
                return default
            return quantity(section[key], f"{path}: {key}")
        self.compute_scale = q(k, "compute_efficiency_scale")
        self.bandwidth_scale = q(k, "bandwidth_efficiency_scale")
        self.attention_compute_scale = q(k, "attention_compute_scale")
        self.attention_bandwidth_scale = q(k, "attention_bandwidth_scale")
        self.moe_dispatch_kernels = q(k, "moe_dispatch_kernels")
        self.moe_compute_scale = q(k, "moe_compute_scale", 1.0)
        self.moe_bandwidth_scale = q(k, "moe_bandwidth_scale", 1.0)
        self.latency_nvlink = q(c, "allreduce_latency_nvlink")
        self.latency_pcie = q(c, "allreduce_latency_pcie")
        self.latency_per_peer = q(c, "allreduce_latency_per_peer", 0.0)


# ---------------------------------------------------------------------------------------------
# One kernel's roofline, mirroring sim/cost/roofline_group.h (roofline_term), roofline_cost.cc
# (rates, attention groups, MoE groups under TP, all-reduce) and expert_parallel.cc (MoE groups
# under expert parallelism, DP 1). check_mirror() holds it to `capsim roofline`.

LINK_EFFICIENCY = 0.8  # sim/hardware/link_efficiency.h
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5 + 1.0 / 16.0}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
ACT = 2.0


def term(flops, nbytes, rate, kernels, bandwidth, floor):
    return max(math.hypot(flops / rate, nbytes / bandwidth), kernels * floor)


class Roofline:
    def __init__(self, card, engine):
        self.card, self.engine = card, engine
        c, e = card, engine
        self.bandwidth = c.memory_bandwidth * min(1.0, c.bandwidth * e.bandwidth_scale)
        # The step's memory-bound groups at the bandwidth of its math format's GEMMs
        # (roofline_cost.cc weight_bytes_per_s of the deployment's compute precision).
        self.bandwidth_of = {p: c.memory_bandwidth * min(1.0, (v or c.bandwidth) * e.bandwidth_scale)
                             for p, v in c.bandwidth_of.items()}
        self.attention_rate = c.peak[c.half] * min(1.0, c.compute * e.compute_scale * e.attention_compute_scale)
        read = c.attention_bandwidth if c.attention_bandwidth > 0 else c.bandwidth
        self.attention_bandwidth = c.memory_bandwidth * min(1.0, read * e.bandwidth_scale * e.attention_bandwidth_scale)
        self.floor = c.kernel_floor

    def math_of(self, weights):
        """Deployment::compute_precision() for these weights."""
        if weights in ("fp8", "fp8_block"):
            return "fp8" if "fp8" in self.card.peak else self.card.half
        if weights == "nvfp4":
            return "nvfp4" if "nvfp4" in self.card.peak else self.card.half
        return weights

    def gemm_rate(self, math_precision):
        c = self.card
        eff = c.compute_of.get(math_precision) or c.compute
        return c.peak[math_precision] * min(1.0, eff * self.engine.compute_scale)

    def attention_decode(self, batch, context, heads, kv_heads, head_dim, window, kv):
        kv_bytes = 2 * kv_heads * head_dim * KV_BYTES[kv]
        tokens = batch * context if window <= 0 else min(batch * context, batch * window)
        return term(4 * heads * head_dim * tokens, tokens * kv_bytes, self.attention_rate, 1,
                    self.attention_bandwidth, self.floor)

    def attention_prefill(self, batch, tokens, heads, kv_heads, head_dim, window, kv, cached=0):
        kv_bytes = 2 * kv_heads * head_dim * KV_BYTES[kv]
        chunk = batch * tokens
        pairs = batch * tokens * (cached + (tokens + 1) / 2)
        read = batch * (cached + tokens)
        if window > 0:
            pairs = min(pairs, chunk * window)
            read = min(read, batch * (window - 1) + chunk)
        return term(4 * heads * head_dim * pairs, (read + chunk) * kv_bytes, self.attention_rate, 1,
                    self.attention_bandwidth, self.floor)

    def moe(self, tokens, hidden, inter, experts, topk, tp, ep, weights, router=0.0, routing="uniform"):
        """One MoE layer (expert GEMMs + routing kernels); None where capsim has no such layout
        (experts both TP-sliced and spread over EP GPUs). `routing` "uniform" is capsim's (each
        token's k experts uniform and independent: E (1 - (1 - k/E)^T) distinct experts read);
        "balanced" is the tables' (AIConfigurator's balanced_logits: tokens spread over the
        experts in turn, min(E, T k) distinct experts), used to score the kernel on them."""
        math_precision = self.math_of(weights)
        rate = self.gemm_rate(math_precision)
        c, e = self.card, self.engine
        # The step's memory-bound groups at the bandwidth of its math format's GEMMs; the routed
        # experts at that format's efficiency times the engine's fused-MoE scale.
        bandwidth = self.bandwidth_of.get(math_precision, self.bandwidth)
        read = c.bandwidth_of.get(math_precision) or c.bandwidth
        moe_rate = rate * e.moe_compute_scale
        moe_bandwidth = c.memory_bandwidth * min(1.0, read * e.bandwidth_scale * e.moe_bandwidth_scale)
        wb = WEIGHT_BYTES[weights]
        dispatch = self.engine.moe_dispatch_kernels
        if dispatch > 0 and math_precision == "fp8":
            dispatch += 2
        t, h, k = tokens, hidden, topk
        # The router GEMM (and shared experts, none here) at the dense rates; its kernel is one of
        # the routed group's three for the floor.
        rest = term(2 * t * router, router * ACT, rate, 0, bandwidth, self.floor) if router > 0 else 0.0
        if ep > 1 and tp > 1:
            return None
        # Expert parallelism over `ep` GPUs: DP 1, imbalance 1 (the tables' routing is balanced).
        params = 3 * h * inter / tp
        local = experts / ep
        pairs = t * k / ep
        if routing == "balanced":
            hit = min(local, pairs)
        else:
            hit = local * (1.0 - (1.0 - k / experts) ** t)
        moved = t + pairs if ep > 1 else t  # activations read and written (sim/cost: 2 t h without EP)
        seconds = term(2 * pairs * params, hit * params * wb + 2 * moved * h * ACT, moe_rate, 3, moe_bandwidth,
                       self.floor) + rest
        if dispatch > 0:
            seconds += term(0, (2 * t + 2 * pairs) * h * ACT, rate, dispatch, bandwidth, self.floor)
        return seconds

    def allreduce(self, gpus, nbytes):
        c, e = self.card, self.engine
        if c.nvlink > 0 and gpus <= c.nvlink_gpus:
            link, latency = c.nvlink / 2, e.latency_nvlink
        else:
            link = c.pcie if c.peer_to_peer else c.pcie * 0.5
            latency = e.latency_pcie
        latency += e.latency_per_peer * max(0, gpus - 2)
        return latency + 2.0 * (gpus - 1) / gpus * nbytes / (link * LINK_EFFICIENCY)


def model_config(data_dir, name):
    with open(os.path.join(data_dir, "models", name, "config.json")) as f:
        return json.load(f)


def check_mirror(capsim, data_dir, card, roofline):
    """Compares the mirror with `capsim roofline --json` group by group on one card; returns the
    number of groups checked. Raises BadInput naming the group where they differ."""
    checked = 0

    def run(args):
        cmd = [capsim, "--data-dir", data_dir, "roofline", "--card", card.name, "--engine", ENGINE, "--json", "-"] + args
        groups = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["groups"]
        return {g["group"]: g["seconds"] for g in groups}

    def same(what, args, group, ours):
        nonlocal checked
        groups = run(args)
        theirs = groups[group] if isinstance(group, str) else sum(groups[g] for g in group)
        if not math.isclose(ours, theirs, rel_tol=1e-9):
            raise BadInput(f"the roofline mirror of scripts/kernel_validation.py disagrees with "
                           f"`capsim roofline {' '.join(args)} --card {card.name}` on {what}: {ours:.9g} s here, "
                           f"{theirs:.9g} s in capsim (sim/cost/roofline_cost.cc changed?)")
        checked += 1

    q = model_config(data_dir, "qwen3-30b-a3b")
    layers, h = q["num_hidden_layers"], q["hidden_size"]
    heads, kvh, hd = q["num_attention_heads"], q["num_key_value_heads"], q["head_dim"]
    E, k, inter = q["num_experts"], q["num_experts_per_tok"], q["moe_intermediate_size"]
    base = ["--model", "qwen3-30b-a3b"]
    kvs = ["bf16"] + (["fp8"] if "fp8" in card.peak else [])
    for kv in kvs:
        same(f"attention_decode ({kv} KV)", base + ["--kv-cache", kv, "--batch", "8", "--context", "1000"],
             "attention_decode", layers * roofline.attention_decode(8, 1000, heads, kvh, hd, 0, kv))
        same(f"attention_prefill ({kv} KV)", base + ["--kv-cache", kv, "--batch", "0", "--prefill", "1500",
                                                   "--prefill-cached", "500"],
             "attention_prefill", layers * roofline.attention_prefill(1, 1500, heads, kvh, hd, 0, kv, cached=500))
    for weights in ["bf16"] + [w for w in ("fp8", "nvfp4") if w in card.peak]:
        for tp in (1, 2):
            same(f"moe {weights} tp {tp}", base + ["--weights", weights, "--tp", str(tp), "--batch", "24"],
                 ("moe_mlp", "moe_dispatch"),
                 layers * roofline.moe(24, h, inter, E, k, tp, 1, weights, router=h * E))
        same(f"moe {weights} expert-parallel 4", base + ["--weights", weights, "--tp", "4", "--enable-expert-parallel",
                                                         "--expert-imbalance", "1", "--batch", "24"],
             ("moe_mlp_ep", "moe_dispatch"),
             layers * roofline.moe(24, h, inter, E, k, 1, 4, weights, router=h * E))
    for tp in (2, 4, 8):
        # Two all-reduces per layer of t x hidden 16-bit values, plus the embedding's (latency only).
        t = 24
        per = roofline.allreduce(tp, t * h * ACT)
        latency = roofline.allreduce(tp, 0)
        same(f"all_reduce tp {tp}", base + ["--tp", str(tp), "--batch", str(t)], "all_reduce", per * 2 * layers + latency)
    g = model_config(data_dir, "gpt-oss-20b")
    sliding = sum(1 for x in g["layer_types"] if x == "sliding_attention")
    window, gh, gkv, ghd = g["sliding_window"], g["num_attention_heads"], g["num_key_value_heads"], g["head_dim"]
    same("attention_decode_window", ["--model", "gpt-oss-20b", "--batch", "8", "--context", "1000"],
         "attention_decode_window", sliding * roofline.attention_decode(8, 1000, gh, gkv, ghd, window, card.half))
    same("attention_prefill_window", ["--model", "gpt-oss-20b", "--batch", "0", "--prefill", "2000"],
         "attention_prefill_window", sliding * roofline.attention_prefill(1, 2000, gh, gkv, ghd, window, card.half))
    return checked


# ---------------------------------------------------------------------------------------------
# Held-out lookups of the tables capsim does not read yet.
