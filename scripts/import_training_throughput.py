#!/usr/bin/env python3
"""Import measured LLM training throughput (MFU, HFU, tokens/s per GPU) into
calibration/training/llm-foundry.csv, the table `capsim finetune --tokens` reads its training
speed from (docs/beyond-llm.md#training-speed).

Usage:
    python3 scripts/import_training_throughput.py README.md COMMIT > calibration/training/llm-foundry.csv

README.md is mosaicml/llm-foundry's scripts/train/benchmarking/README.md at COMMIT (e.g.
`git -C llm-foundry show COMMIT:scripts/train/benchmarking/README.md > README.md`). Its tables
are measured MPT training runs (Composer + FSDP) on MosaicML's clusters: one row per model size x
sequence length x GPU count. The BF16 tables are taken (H100 80GB, A100 80GB and A100 40GB); the
FP8 table is left out (capsim's fine-tuning is bf16). GPU names map to capsim's cards:
h100_80gb -> h100-sxm, a100_80gb -> a100-80gb-sxm, a100_40gb -> a100-40gb-sxm (SXM nodes with
NVLink inside the node, 1600 Gbps RoCE between nodes).

Python 3 standard library only.
"""

import sys

CARDS = {"h100_80gb": "h100-sxm", "a100_80gb": "a100-80gb-sxm", "a100_40gb": "a100-40gb-sxm"}
WANTED = ("Model", "SeqLen (T)", "# GPUs", "GPU", "MFU", "HFU", "Throughput (T/s/GPU)", "Precision",
          "Activation Checkpointing", "NumParams")


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, commit = sys.argv[1], sys.argv[2]
    rows = []
    heading = ""
    header = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                heading = line.strip("# \n")
                header = None
                continue
            if not line.lstrip().startswith("|"):
                header = None
                continue
            c = cells(line)
            if header is None:
                header = c
                missing = [w for w in WANTED if w not in header]
                if missing:
                    sys.exit(f"{path}: table under '{heading}' lacks columns {missing}")
                continue
            if set("".join(c)) <= set("- "):
                continue  # the |---| row
            if "FP8" in heading:
                continue
            r = dict(zip(header, c))
            if r["Precision"] not in ("bf16", "amp_bf16"):
                sys.exit(f"{path}: unexpected precision {r['Precision']!r} under '{heading}'")
            if r["GPU"] not in CARDS:
                sys.exit(f"{path}: unknown GPU {r['GPU']!r} under '{heading}'")
            rows.append((CARDS[r["GPU"]], int(r["NumParams"]), int(r["SeqLen (T)"]), int(r["# GPUs"]),
                         float(r["MFU"]), float(r["HFU"]), r["Activation Checkpointing"] == "True",
                         int(r["Throughput (T/s/GPU)"]), r["Model"]))
    if not rows:
        sys.exit(f"{path}: no BF16 table found")
    out = sys.stdout
    out.write("# capsim training-throughput table: 1\n")
    out.write("# what: measured MPT training runs (Composer, FSDP, bf16), one row per model size x sequence "
              "length x GPU count\n")
    out.write("# units: mfu_percent and hfu_percent of the GPU's dense bf16 peak (312 TFLOP/s A100, 989 TFLOP/s "
              "H100); hfu counts the recomputed forward pass of activation checkpointing\n")
    out.write(f"# source: github.com/mosaicml/llm-foundry@{commit} scripts/train/benchmarking/README.md\n")
    out.write("# tables: H100 80GB BF16 (Large Scale, >= 128 GPUs); H100 80GB BF16; A100 80GB with 1600 Gbps "
              "node-node interconnect (RoCE); A100 40GB with 1600 Gbps node-node interconnect (RoCE). FP8 left out\n")
    out.write("# licence: Apache-2.0\n")
    out.write("# imported by: scripts/import_training_throughput.py\n")
    out.write("card,model,params,seq_len,gpus,mfu_percent,hfu_percent,activation_checkpointing,tokens_per_s_per_gpu\n")
    for card, params, seq, gpus, mfu, hfu, ckpt, tps, model in rows:
        out.write(f"{card},mpt-{model},{params},{seq},{gpus},{mfu:g},{hfu:g},{1 if ckpt else 0},{tps}\n")


if __name__ == "__main__":
    main()
