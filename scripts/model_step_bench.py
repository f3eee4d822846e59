#!/usr/bin/env python3
"""Measure a real transformer's prefill and decode step times on this GPU, for
`capsim calibrate compare` (docs/calibration.md#model-level-check).

Builds the decoder stack of a catalogue model (models/<name>/config.json) with random weights at
its exact shapes -- embedding, then per layer RMSNorm, fused q/k/v projection (with bias where the
config has one), rotary embedding, attention, output projection, RMSNorm, fused gate/up projection,
SiLU-and-multiply, down projection -- then the final norm and the LM head on each sequence's last
token, as a serving engine computes one step. It times forward passes with CUDA events after
warm-up:

  prefill rows: `batch` sequences of `context` new tokens each (prefill_tokens = batch x context),
                causal attention through torch's scaled_dot_product_attention (FlashAttention);
  decode rows:  `batch` sequences decode one token each over a KV cache holding `context` tokens
                (the new one included), replayed from a CUDA graph as vLLM does.

and writes CSV rows `model,card,batch,context,prefill_tokens,step_ms` (median of --iters runs).
With --tp N it builds one rank's shard of an N-way tensor-parallel model (heads, KV heads,
intermediate size and vocabulary divided by N) without the all-reduces, which capsim's
comparison leaves out too.

  python3 scripts/model_step_bench.py --model llama-3.1-8b --card h100-sxm --out steps.csv
  capsim calibrate compare steps.csv

Dense decoder-only models with gated MLPs (Llama, Mistral, Qwen2/2.5/3, Yi, ...) are supported;
MoE, latent attention and non-gated models are refused. --dry-run prints the plan without torch.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Shapes:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    eps: float
    rope_theta: float
    qkv_bias: bool
    qk_norm: bool
    tied: bool

    def shard(self, tp: int) -> "Shapes":
        if self.heads % tp or self.intermediate % tp:
            raise SystemExit(f"--tp {tp}: must divide the {self.heads} heads and the intermediate size {self.intermediate}")
        return Shapes(self.name, self.hidden, self.layers, self.heads // tp, max(1, self.kv_heads // tp),
                      self.head_dim, self.intermediate // tp, math.ceil(self.vocab / tp), self.eps,
                      self.rope_theta, self.qkv_bias, self.qk_norm, self.tied)

    def weight_bytes(self, element: int) -> int:
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = self.hidden * (q + 2 * kv) + q * self.hidden + 3 * self.hidden * self.intermediate
        return element * (self.layers * per_layer + 2 * self.vocab * self.hidden)

    def kv_bytes(self, tokens: int, element: int) -> int:
        return element * self.layers * 2 * self.kv_heads * self.head_dim * tokens


def read_config(model: str, models_dir: Path) -> Shapes:
    path = Path(model)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        path = models_dir / model / "config.json"
    if not path.is_file():
        names = sorted(p.name for p in models_dir.iterdir() if (p / "config.json").is_file())
        raise SystemExit(f"--model: '{model}' is not a catalogue model or config.json path; accepted: {', '.join(names)}")
    cfg = json.loads(path.read_text())
    if isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
    kind = cfg.get("model_type", "?")
    for key in ("num_local_experts", "n_routed_experts", "num_experts", "moe_intermediate_size"):
        if cfg.get(key):
            raise SystemExit(f"{path}: {kind} is a mixture-of-experts model ({key}); this benchmark builds dense models only")
    if cfg.get("kv_lora_rank"):
        raise SystemExit(f"{path}: {kind} uses latent attention (kv_lora_rank); this benchmark builds standard attention only")
    if kind in ("gptj", "falcon", "phi", "bert", "gpt2", "gpt_neox"):
        raise SystemExit(f"{path}: {kind} has a non-gated MLP or parallel blocks; supported: llama-style gated decoders")
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    name = path.parent.name if path.parent.parent.resolve() == models_dir.resolve() else str(path)
    return Shapes(
        name=name,
        hidden=hidden,
        layers=int(cfg["num_hidden_layers"]),
        heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        intermediate=int(cfg["intermediate_size"]),
        vocab=int(cfg["vocab_size"]),
        eps=float(cfg.get("rms_norm_eps", 1e-5)),
        rope_theta=float(cfg.get("rope_theta", 10000.0)),
        qkv_bias=bool(cfg.get("attention_bias", kind in ("qwen2",))),
        qk_norm=kind in ("qwen3",),
        tied=bool(cfg.get("tie_word_embeddings", False)),
    )


def int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of whole numbers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': expected whole numbers >= 1")
    return values


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="catalogue name (models/<name>) or a config.json path")
    p.add_argument("--card", required=True, help="capsim card name to write in the CSV, e.g. h100-sxm")
    p.add_argument("--out", default="steps.csv", help="CSV to write (default steps.csv)")
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--tp", type=int, default=1, help="build one rank's shard of N-way tensor parallelism")
    p.add_argument("--batches", type=int_list, default=int_list("1,8,32,128"), help="decode batch sizes")
    p.add_argument("--contexts", type=int_list, default=int_list("512,2048,8192"), help="decode context lengths")
    p.add_argument("--prefill-batches", type=int_list, default=int_list("1,4"), help="prefill batch sizes")
    p.add_argument("--prefill-lengths", type=int_list, default=int_list("128,512,2048,8192"),
                   help="prefill tokens per sequence")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10, help="timed runs per row (the median is written)")
    p.add_argument("--no-graphs", action="store_true", help="decode eagerly instead of from a CUDA graph")
    p.add_argument("--memory-fraction", type=float, default=0.9, help="skip rows needing more of free memory")
    p.add_argument("--models-dir", type=Path, default=REPO / "models")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit (no torch, no GPU)")
    return p.parse_args(argv)


def plan_rows(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """(batch, context, prefill_tokens) rows: prefills first, then decodes."""
    rows = [(b, n, b * n) for b in args.prefill_batches for n in args.prefill_lengths]
    rows += [(b, c, 0) for b in args.batches for c in args.contexts]
    return rows


# ---------------------------------------------------------------------------------------------
# The model (torch is imported only when measuring).

def build(shapes: Shapes, dtype, device):
    import torch
    import torch.nn.functional as F

    h, d = shapes.hidden, shapes.head_dim
    q_dim, kv_dim = shapes.heads * d, shapes.kv_heads * d
    group = shapes.heads // shapes.kv_heads

    def weight(*size):
        return torch.empty(*size, dtype=dtype, device=device).normal_(0, 0.02)

    class Layer:
        def __init__(self):
            self.in_norm = torch.ones(h, dtype=dtype, device=device)
            self.post_norm = torch.ones(h, dtype=dtype, device=device)
            self.qkv = weight(q_dim + 2 * kv_dim, h)
            self.qkv_bias = weight(q_dim + 2 * kv_dim) if shapes.qkv_bias else None
            self.q_norm = torch.ones(d, dtype=dtype, device=device) if shapes.qk_norm else None
            self.k_norm = torch.ones(d, dtype=dtype, device=device) if shapes.qk_norm else None
            self.o = weight(h, q_dim)
            self.gate_up = weight(2 * shapes.intermediate, h)
            self.down = weight(h, shapes.intermediate)

    layers = [Layer() for _ in range(shapes.layers)]
    embedding = weight(shapes.vocab, h)
    lm_head = embedding if shapes.tied else weight(shapes.vocab, h)
    final_norm = torch.ones(h, dtype=dtype, device=device)
    has_rms = hasattr(F, "rms_norm")
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2] if x.isdigit())
    sdpa_gqa = version >= (2, 5)  # scaled_dot_product_attention(enable_gqa=...) from torch 2.5

    def rms(x, w):
        if has_rms:
            return F.rms_norm(x, (x.shape[-1],), w, shapes.eps)
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + shapes.eps)).to(x.dtype) * w

    def rope_tables(positions):
        inv = 1.0 / (shapes.rope_theta ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
        ang = positions.float()[:, None] * inv[None, :]
        return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)

    def rope(x, cos, sin):  # x [..., T, d], cos/sin [T, d/2]
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def project_qkv(layer, x, batch, tokens, cos, sin):
        qkv = F.linear(rms(x, layer.in_norm), layer.qkv, layer.qkv_bias)
        q, k, v = qkv.split((q_dim, kv_dim, kv_dim), dim=-1)
        q = q.view(batch, tokens, shapes.heads, d).transpose(1, 2)
        k = k.view(batch, tokens, shapes.kv_heads, d).transpose(1, 2)
        v = v.view(batch, tokens, shapes.kv_heads, d).transpose(1, 2)
        if layer.q_norm is not None:
            q, k = rms(q, layer.q_norm), rms(k, layer.k_norm)
        return rope(q, cos, sin), rope(k, cos, sin), v

    def finish_layer(layer, x, attn, batch, tokens):
        x = x + F.linear(attn.transpose(1, 2).reshape(batch * tokens, q_dim), layer.o)
        gate, up = F.linear(rms(x, layer.post_norm), layer.gate_up).chunk(2, dim=-1)
        return x + F.linear(F.silu(gate) * up, layer.down)

    def logits(x, batch, tokens):
        last = x.view(batch, tokens, h)[:, -1]
        return F.linear(rms(last, final_norm), lm_head).float()

    def prefill(ids):  # ids [B, T]
        batch, tokens = ids.shape
        cos, sin = rope_tables(torch.arange(tokens, device=device))
        x = F.embedding(ids, embedding).view(batch * tokens, h)
        for layer in layers:
            q, k, v = project_qkv(layer, x, batch, tokens, cos, sin)
            if sdpa_gqa:
                attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                attn = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                                      is_causal=True)
            x = finish_layer(layer, x, attn, batch, tokens)
        return logits(x, batch, tokens)

    def make_decode(batch, context, caches):
        """A decode step for `batch` sequences at `context` (the new token's position is context-1)."""
        cos, sin = rope_tables(torch.tensor([context - 1], device=device))
        scale = 1.0 / math.sqrt(d)

        def step(ids):  # ids [B, 1]
            x = F.embedding(ids, embedding).view(batch, h)
            for layer, (kc, vc) in zip(layers, caches):
                q, k, v = project_qkv(layer, x, batch, 1, cos, sin)
                kc[:, :, context - 1: context] = k
                vc[:, :, context - 1: context] = v
                keys, values = kc[:, :, :context], vc[:, :, :context]
                qg = q.view(batch, shapes.kv_heads, group, d)
                scores = torch.matmul(qg, keys.transpose(-1, -2)) * scale
                attn = torch.matmul(torch.softmax(scores.float(), dim=-1).to(dtype), values)
                x = finish_layer(layer, x, attn.view(batch, shapes.heads, 1, d), batch, 1)
            return logits(x, batch, 1)

        return step

    return prefill, make_decode


def measure(args: argparse.Namespace, shapes: Shapes, rows) -> list[dict]:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("model_step_bench: no CUDA device; run it on the GPU")
    device = torch.device("cuda")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    element = 2
    free, total = torch.cuda.mem_get_info()
    need = shapes.weight_bytes(element)
    if need > free * args.memory_fraction:
        raise SystemExit(f"{shapes.name}: weights need {need / 2**30:.1f} GiB of {free / 2**30:.1f} GiB free; "
                         f"use --tp to build one shard")
    torch.manual_seed(0)
    with torch.inference_mode():
        prefill, make_decode = build(shapes, dtype, device)
    print(f"{shapes.name}: {shapes.layers} layers, hidden {shapes.hidden}, heads {shapes.heads}/{shapes.kv_heads}, "
          f"intermediate {shapes.intermediate}, vocab {shapes.vocab} on {torch.cuda.get_device_name()} "
          f"({args.dtype}, tp shard 1/{args.tp})", file=sys.stderr)

    def timed(fn, inputs) -> float:
        for _ in range(args.warmup):
            fn(inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(args.iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(inputs)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times)

    out = []
    caches_for = {}
    for batch, context, prefill_tokens in rows:
        free, _ = torch.cuda.mem_get_info()
        if prefill_tokens:
            # Activations of the widest layer: q/k/v, the MLP's gate/up pair and logits-sized buffers.
            act = batch * context * (4 * shapes.hidden + 3 * shapes.intermediate) * element * 2
            if act > free * args.memory_fraction:
                print(f"  skip prefill batch {batch} x {context}: needs ~{act / 2**30:.1f} GiB", file=sys.stderr)
                continue
            ids = torch.randint(0, shapes.vocab, (batch, context), device=device)
            with torch.inference_mode():
                ms = timed(prefill, ids)
        else:
            kv = shapes.kv_bytes(batch * max(c for b, c, p in rows if b == batch and p == 0), element)
            if batch not in caches_for:
                caches_for.clear()
                torch.cuda.empty_cache()
                free, _ = torch.cuda.mem_get_info()
                if kv > free * args.memory_fraction:
                    print(f"  skip decode batch {batch}: its KV cache needs {kv / 2**30:.1f} GiB", file=sys.stderr)
                    continue
                cmax = max(c for b, c, p in rows if b == batch and p == 0)
                caches_for[batch] = [
                    (torch.empty(batch, shapes.kv_heads, cmax, shapes.head_dim, dtype=dtype, device=device).normal_(),
                     torch.empty(batch, shapes.kv_heads, cmax, shapes.head_dim, dtype=dtype, device=device).normal_())
                    for _ in range(shapes.layers)]
            step = make_decode(batch, context, caches_for[batch])
            ids = torch.randint(0, shapes.vocab, (batch, 1), device=device)
            with torch.inference_mode():
                if args.no_graphs:
                    ms = timed(step, ids)
                else:
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for _ in range(2):
                            step(ids)
                    torch.cuda.current_stream().wait_stream(side)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        step(ids)
                    ms = timed(lambda _: graph.replay(), None)
                    del graph
        row = {"model": shapes.name, "card": args.card, "batch": batch, "context": context,
               "prefill_tokens": prefill_tokens, "step_ms": f"{ms:.4f}"}
        print(f"  {'prefill' if prefill_tokens else 'decode '} batch {batch:4d} context {context:6d}: {ms:9.3f} ms",
              file=sys.stderr)
        out.append(row)
    return out


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    shapes = read_config(args.model, args.models_dir)
    if args.tp > 1:
        shapes = shapes.shard(args.tp)
    rows = plan_rows(args)
    if args.dry_run:
        print(f"{shapes.name}: weights {shapes.weight_bytes(2) / 2**30:.2f} GiB per GPU (tp {args.tp}); "
              f"{len(rows)} rows:")
        for batch, context, prefill_tokens in rows:
            kind = "prefill" if prefill_tokens else "decode"
            print(f"  {kind:7s} batch {batch:4d} context {context:6d} prefill_tokens {prefill_tokens}")
        return 0
    results = measure(args, shapes, rows)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["model", "card", "batch", "context", "prefill_tokens", "step_ms"])
        w.writeheader()
        w.writerows(results)
    print(f"wrote {args.out} ({len(results)} rows); next: capsim calibrate compare {args.out}"
          + (f" --tp {args.tp}" if args.tp > 1 else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
