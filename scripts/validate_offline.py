"""scripts/validate.py's serving-simulation part: the TensorRT-LLM 0.12 offline throughput rows and
the LMDeploy static-batch rows re-run with `capsim simulate` (a part of class Validator)."""

import argparse
import csv
import datetime
import json
import math
import os
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

from validate_common import *  # noqa: F401,F403,E402  (the rules, settings and helpers every part uses)


class OfflineRows:
    """The simulated throughput rows; mixed into validate.Validator, whose state they use."""

    # -- serving simulation 1: trtllm_v0.12_offline_throughput.csv -----------------------------

    @staticmethod
    def bench_limits(hf_id, tp, seq_len):
        """trtllm-bench's (max_batch_size, max_num_tokens, note) for a model, TP, ISL + OSL."""
        by_tp = TRTLLM_BENCH_SETTINGS.get(hf_id, {}).get(tp)
        if by_tp is None:
            mbs, mnt = TRTLLM_BENCH_FALLBACK
            return mbs, mnt, (f"no TP{tp} entry for {hf_id} in trtllm-bench's "
                              f"benchmark_config.yml: {mbs}/{mnt} assumed")
        mbs, mnt = by_tp.get(seq_len, by_tp["general"])
        return mbs, mnt, ""

    def profile_value(self, key):
        """The text of the tensorrt-llm profile's `key: {value: ...}` ('12us'), '?' when
        absent, read from the catalogue capsim uses."""
        data = os.environ.get("CAPSIM_DATA_DIR", REPO)
        path = os.path.join(data, "calibration", "engines", "tensorrt-llm.yaml")
        try:
            with open(path, encoding="utf-8") as f:
                found = re.search(r"^\s*" + re.escape(key) + r":\s*\{value:\s*([^,}]+)",
                                  f.read(), re.M)
        except OSError:
            return "?"
        return found.group(1).strip() if found else "?"

    def decoder_profile_bytes(self):
        """The tensorrt-llm profile's memory.decoder_per_sequence_vocab (bytes per slot per
        vocabulary entry; 0 when absent), read from the catalogue capsim uses."""
        data = os.environ.get("CAPSIM_DATA_DIR", REPO)
        path = os.path.join(data, "calibration", "engines", "tensorrt-llm.yaml")
        try:
            with open(path, encoding="utf-8") as f:
                found = re.search(r"^\s*decoder_per_sequence_vocab:\s*\{value:\s*([0-9.]+)",
                                  f.read(), re.M)
        except OSError:
            return 0.0
        return float(found.group(1)) if found else 0.0

    def decoder_data_dir(self, value):
        """A copy of capsim's data directory whose tensorrt-llm profile has
        memory.decoder_per_sequence_vocab = value, for the sensitivity runs."""
        return self.profile_data_dir("decoder_per_sequence_vocab", f"{value:g}")

    def profile_data_dir(self, key, value):
        """A copy of capsim's data directory whose tensorrt-llm profile has `key` set to the
        text `value` (a number with the key's unit, e.g. '6us'; calibration/ copied, the rest
        linked), for the sensitivity runs and the per-sequence grid; capsim reads it through
        --data-dir."""
        if (key, value) in self.profile_dirs:
            return self.profile_dirs[(key, value)]
        if self.tmpdir is None:
            self.tmpdir = tempfile.mkdtemp(prefix="capsim-validate-")
        data = os.environ.get("CAPSIM_DATA_DIR", REPO)
        root = os.path.join(self.tmpdir, f"data-{key}-{value}")
        os.makedirs(root)
        for entry in ("models", "workloads"):
            os.symlink(os.path.join(data, entry), os.path.join(root, entry))
        shutil.copytree(os.path.join(data, "calibration"), os.path.join(root, "calibration"))
        path = os.path.join(root, "calibration", "engines", "tensorrt-llm.yaml")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text, n = re.subn(r"^(\s*" + re.escape(key) + r":\s*\{value:\s*)[^,}]+",
                          lambda g: g.group(1) + value, text, flags=re.M)
        if n != 1:
            sys.exit(f"validate.py: {path} has no {key} to vary")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        self.profile_dirs[(key, value)] = root
        return root

    def offline_memory(self, m, tp, mbs, mnt, seq_len, kv_free, prefix=()):
        """(gpu_memory_utilization, kv blocks, block size, error) reproducing trtllm-bench's
        KV cache = kv_free x (memory free after the engine loads), with capsim's own weights,
        activation and runtime sizes. `prefix` goes before capsim's subcommand (--data-dir)."""
        base = list(prefix) + ["fit", "--model", m["model"], "--card", m["card"], "--tp", str(tp),
                "--weights", m["weights"], "--kv-cache", m["kv"], "--engine", "tensorrt-llm",
                "--max-num-seqs", str(mbs), "--max-num-batched-tokens", str(mnt),
                "--context", str(seq_len)]
        res, err = self.capsim.json(base)
        if res is None or "per_gpu" not in res:
            return None, 0, 0, f"capsim fit failed: {err}"
        g = res["per_gpu"]
        used = g["weights_bytes"] + g["activations_bytes"] + g["runtime_bytes"]
        free = g["visible_bytes"] - g["outside_budget_bytes"] - used
        if free <= 0:
            return None, 0, 0, (f"weights {g['weights_bytes'] / 1e9:.1f} GB + activations "
                                f"{g['activations_bytes'] / 1e9:.1f} GB + runtime "
                                f"{g['runtime_bytes'] / 1e9:.1f} GB per GPU leave no memory "
                                f"for the KV cache on {m['card']}")
        util = round(min(1.0, (kv_free * free + used) / g["visible_bytes"]), 4)
        res, err = self.capsim.json(base + ["--gpu-memory-utilization", f"{util:.4f}"])
        if res is None or "kv_blocks" not in res:
            return None, 0, 0, f"capsim fit failed: {err}"
        return util, res["kv_blocks"], res["block_size"], ""

    def model_arg(self, model, seq_len):
        """The --model argument serving `seq_len`-token sequences: the catalogue name, or where
        the checkpoint's context (max_position_embeddings) is shorter, a copy of the catalogue's
        config.json with the context raised to seq_len. trtllm-bench built each engine with
        max_seq_len = ISL + OSL and TensorRT-LLM serves past the trained context, while capsim
        rejects such requests as vLLM does; the context does not enter capsim's costs."""
        src = os.path.join(REPO, "models", model, "config.json")
        try:
            with open(src, encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, ValueError):
            return model, ""
        key = next((k for k in ("max_position_embeddings", "n_positions", "seq_length")
                    if isinstance(cfg.get(k), int)), None)
        if key is None or cfg[key] >= seq_len:
            return model, ""
        trained = cfg[key]
        cfg[key] = seq_len
        if self.tmpdir is None:
            self.tmpdir = tempfile.mkdtemp(prefix="capsim-validate-")
        path = os.path.join(self.tmpdir, f"{model}-ctx{seq_len}", "config.json")
        if not os.path.isfile(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(cfg, f, indent=2)
        return path, (f"ISL + OSL = {seq_len} exceeds {model}'s trained context "
                      f"({key} {trained}): run from a copy of its config.json with {key} "
                      f"{seq_len} (the engine's max_seq_len; no effect on costs)")

    def offline_args(self, m, tp, isl, osl, variant="primary"):
        """simulate arguments for one offline row and variant -> (args, limits text, requests,
        cap text, error)."""
        hf_id = m["hf_id"]
        mbs, mnt, lim_note = self.bench_limits(hf_id, tp, isl + osl)
        kv_free = 0.90 if variant == "kv_free_0.90" else TRTLLM_KV_FREE_FRACTION
        prefix = []
        if variant == "decoder_none":
            prefix = ["--data-dir", self.decoder_data_dir(0.0)]
        elif variant == "decoder_35.6":
            prefix = ["--data-dir", self.decoder_data_dir(TRTLLM_DECODER_ALT)]
        elif variant.startswith("per_seq:"):
            prefix = ["--data-dir", self.profile_data_dir("per_sequence", variant[8:] + "us")]
        util, blocks, block, err = self.offline_memory(m, tp, mbs, mnt, isl + osl, kv_free, prefix)
        if util is None:
            return None, "", 0, "", lim_note, err
        per_seq = -(-(isl + osl) // block)
        kv_cap = blocks // per_seq
        if kv_cap < 1:
            return None, "", 0, "", lim_note, (f"KV cache of {blocks * block} tokens cannot hold "
                                               f"one {isl + osl}-token sequence")
        cap = mbs if variant == "no_kv_cap" else min(mbs, kv_cap)
        budget = mnt
        if variant != "prefill_first":
            budget = max(mnt, isl + cap)
        requests = TRTLLM_NUM_REQUESTS.get((isl, osl), 3000)
        model_arg, ctx_note = self.model_arg(m["model"], isl + osl)
        if ctx_note:
            lim_note = "; ".join(n for n in (lim_note, ctx_note) if n)
        args = prefix + ["--model", model_arg, "--card", m["card"], "--tp", str(tp),
                "--weights", m["weights"], "--kv-cache", m["kv"], "--engine", "tensorrt-llm",
                "--arrival", "offline", "--requests", str(requests),
                "--input-tokens", str(isl), "--output-tokens", str(osl),
                "--max-num-seqs", str(cap), "--max-num-batched-tokens", str(budget),
                "--gpu-memory-utilization", f"{util:.4f}"]
        if variant == "prefill_first":
            args += ["--scheduler", "prefill-first"]
        limits = f"{mbs}/{mnt}"
        if budget != mnt:
            limits += f" (budget {budget})"
        cap_text = (f"batch cap {cap} = " + ("KV at full length" if cap == kv_cap and cap < mbs
                                             else "max_batch_size")
                    + f" (KV {blocks * block} tokens, {util:.3f} of memory)")
        return args, limits, requests, cap_text, lim_note, ""

    def offline(self):
        fname = FILES["offline"]
        for row in read_csv(os.path.join(self.shared, "reference", fname)):
            isl, osl, tp = int(row["input_len"]), int(row["output_len"]), int(row["tp"])
            setting = f"{isl}/{osl}"
            measured = num(row["value"])
            g = row["gpu"].lower()
            card, card_note = next(((c, n) for sub, c, n in OFFLINE_CARD_RULES if sub in g),
                                   (None, f"card '{row['gpu']}' has no mapping"))
            model, hf_id, model_note = OFFLINE_MODELS.get(
                row["model"].lower().strip(), (None, "", f"model '{row['model']}' has no mapping"))
            fp8 = row["precision"].lower().startswith("fp8")
            reason = None
            if card is None:
                reason = card_note
            elif model is None or model not in self.models:
                reason = model_note or f"model '{row['model']}' is not in capsim's catalogue"
            elif card not in self.cards:
                reason = f"card '{card}' is not in capsim's catalogue"
            if reason or measured is None:
                self.sim_skipped.append((fname, row["gpu"], row["model"], row["precision"],
                                         tp, setting, reason or "no value"))
                continue
            notes = [n for n in (card_note, model_note) if n]
            if not fp8:
                notes.append("'Mixed' (FP16/BF16) run as bf16 weights and KV (capsim costs "
                             "fp16 and bf16 alike)")
            m = {"card": card, "model": model, "hf_id": hf_id, "notes": notes,
                 "weights": "fp8" if fp8 else "bf16", "kv": "fp8" if fp8 else "bf16"}
            args, limits, requests, cap_text, lim_note, err = self.offline_args(m, tp, isl, osl)
            kv_starved = "very low because" in row["notes"].lower()
            regime = "saturated (offline, infinite rate): throughput capacity"
            sort_key = (card, "fp8" if fp8 else "16bit", model, tp, isl, osl)
            extra = [lim_note]
            if kv_starved:
                extra.append("published as KV-starved (16-bit 70B weights nearly fill 2x80 GB)")
            if row.get("trust", "") == "low":
                extra.append("trust low: " + row["notes"].split(". ")[-1])
            if args is None:
                self.sim_apart.append({"file": fname, "gpu": row["gpu"], "card": card,
                                       "model": model, "precision": row["precision"], "tp": tp,
                                       "setting": setting, "measured": measured,
                                       "why": err, "kv_starved": kv_starved, "sort": sort_key})
                continue
            res, err = self.simulate(args)
            if res is None or res.get("completed", 0) < requests or res.get("failed", 0):
                why = err or (f"capsim completed {res.get('completed', 0)} of {requests} "
                              f"requests ({res.get('failed', 0)} failed)")
                self.sim_apart.append({"file": fname, "gpu": row["gpu"], "card": card,
                                       "model": model, "precision": row["precision"], "tp": tp,
                                       "setting": setting, "measured": measured, "why": why,
                                       "kv_starved": kv_starved, "sort": sort_key})
                continue
            group = "simulate:trtllm_v0.12_offline:" + ("fp8" if fp8 else "16bit")
            section = "offline"
            if kv_starved:
                group, section = "simulate_apart:trtllm_kv_starved", "offline_kv_starved"
            # The tensorrt-llm profile's per-sequence overhead was chosen on the TP1 rows.
            self.sim_add(group, section, row, m, setting, measured, res, tp, "tensorrt-llm",
                         "fit" if tp == 1 else "check", regime, limits, requests,
                         cap_text + "; " + self.sim_diagnosis(res), extra, sort_key)
            if section == "offline":
                self.variant_rows.append((m, tp, isl, osl, measured))

    def offline_variants(self):
        """Median APE and bias of the compared offline rows under each sensitivity variant."""
        out = []
        for name, desc in OFFLINE_VARIANTS:
            rows, failed = [], 0
            for m, tp, isl, osl, measured in self.variant_rows:
                args, _, requests, _, _, _ = self.offline_args(m, tp, isl, osl, name)
                res = self.simulate(args)[0] if args else None
                if res is None or res.get("completed", 0) < requests:
                    failed += 1
                    continue
                pred = res["output_throughput"]
                rows.append({"ape": abs(pred - measured) / measured,
                             "signed": (pred - measured) / measured})
            out.append((name, desc, summarize(rows), failed))
        return out

    def offline_per_seq_grid(self):
        """The tensorrt-llm profile's per-sequence overhead re-run at each TRTLLM_PER_SEQ_GRID
        value: median APE and bias of the TP1 rows (where the value is chosen) and, at the grid's
        first value and the profile's, of the TP>1 rows (the check), so the figures the profile
        quotes stay reproducible."""
        out = []
        profile = self.profile_value("per_sequence")
        for us in TRTLLM_PER_SEQ_GRID:
            # The profile's own value is the primary run (its results are cached).
            variant = "primary" if f"{us:g}us" == profile else f"per_seq:{us:g}"
            tp1, tpn = [], []
            for m, tp, isl, osl, measured in self.variant_rows:
                # The check (TP>1 rows) is reported at the grid's first value and the profile's.
                if tp > 1 and variant != "primary" and us != TRTLLM_PER_SEQ_GRID[0]:
                    continue
                args, _, requests, _, _, _ = self.offline_args(m, tp, isl, osl, variant)
                res = self.simulate(args)[0] if args else None
                if res is None or res.get("completed", 0) < requests:
                    continue
                pred = res["output_throughput"]
                (tp1 if tp == 1 else tpn).append({"ape": abs(pred - measured) / measured,
                                                  "signed": (pred - measured) / measured})
            out.append((us, summarize(tp1), summarize(tpn)))
        return out

    # -- serving simulation 2: lmdeploy_a100_fp16.csv throughput rows --------------------------

    def lmdeploy_sim(self):
        fname = FILES["lmdeploy"]
        rows = read_csv(os.path.join(self.shared, "reference", fname))
        tpot = {}
        for row in rows:
            if row["metric"] == "tpot_ms_p50":
                b = int(re.search(r"batch=(\d+)", row["concurrency_or_rate"]).group(1))
                tpot[(row["model"], int(row["tp"]), b, int(row["input_len"]),
                      int(row["output_len"]))] = num(row["value"])
        for row in rows:
            if not row["metric"].startswith("output_tok_per_s"):
                continue
            batch = int(re.search(r"batch=(\d+)", row["concurrency_or_rate"]).group(1))
            isl, osl, tp = int(row["input_len"]), int(row["output_len"]), int(row["tp"])
            measured = num(row["value"])
            setting = f"batch {batch}, {isl} in / {osl} out"
            m = self.resolve(fname, row, setting)
            if m is None or measured is None:
                continue
            requests = max(3 * batch, 8)
            res, err = self.simulate([
                "--model", m["model"], "--card", m["card"], "--tp", str(tp),
                "--weights", m["weights"], "--kv-cache", m["kv"], "--engine", "lmdeploy",
                "--scheduler", "static", "--concurrency", str(batch),
                "--requests", str(requests), "--input-tokens", str(isl),
                "--output-tokens", str(osl)])
            sort_key = (m["model"], tp, batch, isl, osl)
            if res is None or res.get("completed", 0) < requests:
                why = err or f"capsim completed {res.get('completed', 0)} of {requests} requests"
                self.sim_apart.append({"file": fname, "gpu": row["gpu"], "card": m["card"],
                                       "model": m["model"], "precision": row["precision"],
                                       "tp": tp, "setting": setting, "measured": measured,
                                       "why": why, "kv_starved": False, "sort": sort_key})
                continue
            c = res.get("capsim", {})
            implied = batch / measured * 1e3
            diag = (f"step implied by the measurement (batch / tok/s) {implied:.1f} ms vs "
                    f"capsim mean step {c.get('mean_step_ms', 0):.1f} ms")
            p50 = tpot.get((row["model"], tp, batch, isl, osl))
            if p50 is not None:
                diag += f"; measured p50 per-token latency {p50:.0f} ms"
            diag += "; " + self.sim_diagnosis(res)
            limited, why = self.kv_limit(m, tp, batch, isl + osl)
            group, section = "simulate:lmdeploy_throughput", "lmdeploy_sim"
            regime = f"closed loop, {batch} in flight, static batches (no queue beyond the batch)"
            notes = []
            if limited:
                group, section = "simulate_apart:lmdeploy_kv_limited", "lmdeploy_sim_kv_limited"
                regime = "KV-limited: fewer than the batch run at once, the rest wait (queueing)"
                notes.append(why)
            self.sim_add(group, section, row, m, setting, measured, res, tp, "lmdeploy",
                         "fit" if batch == 1 else "check", regime, f"batch {batch} (static)",
                         requests, diag, notes, sort_key)
