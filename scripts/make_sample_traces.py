#!/usr/bin/env python3
"""Writes the small sample traces in workloads/traces/, one per format capsim reads.

THE DATA IS SYNTHETIC. No row comes from a real trace; every value is drawn from a seeded
pseudo-random generator (Python's `random`, standard library only), so rerunning this script
reproduces the files byte for byte. The distributions only loosely mimic the length statistics
and arrival patterns measured on the real public traces (see workloads/traces/README.md for
where to download those):

  azure-sample.csv       Azure LLM inference 2023 "conv"-like: input lognormal (median ~1020,
                         mean ~1155), output lognormal (median ~129, mean ~211), Poisson
                         arrivals at ~5.5 req/s. Timestamps start at 2023-12-31 23:59:45 so the
                         trace crosses midnight and a year end (exercises date rollover).
  mooncake-sample.jsonl  Mooncake conversation-like: timestamps (ms) in ~3 s buckets of a few
                         to ~15 requests; input lognormal (median ~6900, mean ~12000, capped at
                         128k), output ~350; hash_ids one id per 512-token block, block 0 shared
                         by all requests (a common system prompt), and ~40% of requests continue
                         an earlier conversation, reusing its full blocks as a prefix.
  burstgpt-sample.csv    BurstGPT-like: integer-second timestamps ~90 s apart on average,
                         ChatGPT / GPT-4 at ~80/20, request ~525 and response ~290 tokens on
                         average, ~5% failed requests (all token counts 0, skipped by capsim).
  plain-sample.csv       capsim's plain CSV: ShareGPT-like lengths (input median ~1730, mean
                         ~2340; output median ~415, mean ~440), Poisson arrivals at 2 req/s.

Usage: python3 scripts/make_sample_traces.py [output-dir]   (default: workloads/traces)
"""

import json
import math
import os
import random
import sys

SEED = 20240601


def lognormal(rng, median, mean, lo, hi):
    """An integer from a lognormal with the given median and mean, clipped to [lo, hi]."""
    sigma = math.sqrt(2.0 * math.log(mean / median))
    return max(lo, min(hi, int(round(rng.lognormvariate(math.log(median), sigma)))))


def days_in_month(y, m):
    if m == 2:
        return 29 if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 28
    return 30 if m in (4, 6, 9, 11) else 31


def wall_clock(start, offset_ticks):
    """start = (y, mo, d, h, mi, s); offset in 100 ns ticks -> 'YYYY-MM-DD HH:MM:SS.fffffff'."""
    y, mo, d, h, mi, s = start
    total = ((h * 60 + mi) * 60 + s) * 10_000_000 + offset_ticks
    day_ticks = 86400 * 10_000_000
    while total >= day_ticks:
        total -= day_ticks
        d += 1
        if d > days_in_month(y, mo):
            d, mo = 1, mo + 1
            if mo > 12:
                mo, y = 1, y + 1
    secs, frac = divmod(total, 10_000_000)
    h, rem = divmod(secs, 3600)
    mi, s = divmod(rem, 60)
    return f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}.{frac:07d}"


def azure(rng, path, rows=120):
    start = (2023, 12, 31, 23, 59, 45)
    t = rng.randrange(0, 10_000_000)
    with open(path, "w", newline="") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for _ in range(rows):
            t += int(rng.expovariate(5.5) * 10_000_000)
            ctx = lognormal(rng, 1020, 1155, 2, 8192)
            gen = lognormal(rng, 129, 211, 1, 2000)
            f.write(f"{wall_clock(start, t)},{ctx},{gen}\n")


def mooncake(rng, path, rows=100):
    block = 512
    next_id = 1  # id 0 = the shared first block
    history = []  # (input_length, hash_ids) of earlier requests
    bucket_ms = 0
    out = []
    while len(out) < rows:
        # Real timestamps sit on ~3 s boundaries, some buckets 1 ms early (5999, 41999, ...).
        ts = bucket_ms - (1 if bucket_ms and rng.random() < 0.2 else 0)
        for _ in range(rng.randint(3, 15)):
            if len(out) == rows:
                break
            if history and rng.random() < 0.4:
                prev_len, prev_ids = rng.choice(history)
                # The next turn: the previous prompt plus its answer and a new user message.
                length = min(128_000, prev_len + lognormal(rng, 350, 380, 1, 1200)
                             + lognormal(rng, 300, 600, 1, 8000))
                keep = prev_len // block  # only full blocks can be shared
                ids = prev_ids[:keep]
            else:
                length = lognormal(rng, 6909, 12035, 64, 128_000)
                ids = [0]
            while len(ids) < math.ceil(length / block):
                ids.append(next_id)
                next_id += 1
            output = lognormal(rng, 350, 380, 1, 1200)
            history.append((length, ids))
            out.append({"timestamp": ts, "input_length": length, "output_length": output,
                        "hash_ids": ids})
        bucket_ms += 3000
    with open(path, "w", newline="") as f:
        for rec in out:
            f.write(json.dumps(rec) + "\n")


def burstgpt(rng, path, rows=150):
    t = rng.randint(1, 60)
    with open(path, "w", newline="") as f:
        f.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
        for _ in range(rows):
            t += int(rng.expovariate(1 / 90.0))
            model = "ChatGPT" if rng.random() < 0.8 else "GPT-4"
            log = "API log" if rng.random() < 0.02 else "Conversation log"
            if rng.random() < 0.05:
                req = resp = 0  # a failed request, as BurstGPT records them
            else:
                req = lognormal(rng, 350, 525, 1, 8000)
                resp = lognormal(rng, 200, 287, 1, 4000)
            f.write(f"{t},{model},{req},{resp},{req + resp},{log}\n")


def plain(rng, path, rows=100):
    t = 0.0
    with open(path, "w", newline="") as f:
        f.write("arrival_s,input_tokens,output_tokens\n")
        for k in range(rows):
            if k:
                t += rng.expovariate(2.0)
            f.write(f"{t:.6f},{lognormal(rng, 1730, 2340, 4, 8000)},"
                    f"{lognormal(rng, 415, 439, 1, 1000)}\n")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "workloads", "traces")
    os.makedirs(out_dir, exist_ok=True)
    # One generator per file, so changing one format's generator leaves the others unchanged.
    azure(random.Random(SEED), os.path.join(out_dir, "azure-sample.csv"))
    mooncake(random.Random(SEED + 1), os.path.join(out_dir, "mooncake-sample.jsonl"))
    burstgpt(random.Random(SEED + 2), os.path.join(out_dir, "burstgpt-sample.csv"))
    plain(random.Random(SEED + 3), os.path.join(out_dir, "plain-sample.csv"))


if __name__ == "__main__":
    main()
