#!/usr/bin/env python3
"""Writes this folder's result files: capsim's own runs, in the load generators' formats.

Usage: python3 tests/data/calibrate-runs/make_runs.py [CAPSIM]   (from the repository root)

Each run is `capsim simulate` of llama-3.1-8b on one h100-sxm with calibration/engines/vllm.yaml
but overhead.step = 1.5 ms (the "true" overhead that `capsim calibrate runs` must recover from
the files; the shipped value is 0.6 ms), seed 7. Its JSON already carries vLLM's benchmark keys;
the vLLM files add what `vllm bench serve --save-result` writes besides (backend, model_id,
num_prompts, request_rate, max_concurrency, burstiness; conc16 also the --save-detailed arrays),
and guidellm.json puts two runs in GuideLLM's report layout (benchmarks[].args.strategy,
request_totals, metrics.<name>.successful.mean, request_latency in seconds).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CAPSIM = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build", "capsim")
TRUE_STEP = "1.5ms"
MODEL_ID = "meta-llama/Llama-3.1-8B-Instruct"
KEEP = ["completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
        "output_throughput", "total_token_throughput"]
METRICS = ["ttft", "tpot", "itl", "e2el"]


def simulate(engine, load, requests, prompt, output):
    cmd = [CAPSIM, "simulate", "--model", "llama-3.1-8b", "--card", "h100-sxm", "--engine", engine,
           "--requests", str(requests), "--input-tokens", str(prompt), "--output-tokens", str(output),
           "--seed", "7", "-q", "--json", "-"] + load
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def vllm_file(name, sim, requests, rate, concurrency, detailed=False):
    out = {"date": "20261206-120000", "backend": "vllm", "model_id": MODEL_ID,
           "tokenizer_id": MODEL_ID, "num_prompts": requests,
           "request_rate": rate if rate is not None else "inf", "burstiness": 1.0,
           "max_concurrency": concurrency}
    for k in KEEP:
        out[k] = sim[k]
    for m in METRICS:
        for stat in ("mean", "median", "std", "p99"):
            out[f"{stat}_{m}_ms"] = sim[f"{stat}_{m}_ms"]
    if detailed:
        n = sim["completed"]
        out["input_lens"] = [sim["total_input_tokens"] // n] * n
        out["output_lens"] = [sim["total_output_tokens"] // n] * n
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def guidellm_benchmark(sim, strategy, requests):
    n = sim["completed"]

    def summary(mean):
        return {"successful": {"mean": mean, "count": n}, "errored": None, "incomplete": None,
                "total": {"mean": mean, "count": n}}
    return {"type_": "generative_benchmark", "args": {"strategy": strategy, "max_number": requests},
            "worker": {"type_": "generative_requests_worker", "backend_model": MODEL_ID},
            "request_totals": {"successful": n, "incomplete": 0, "errored": 0, "total": requests},
            "metrics": {"time_to_first_token_ms": summary(sim["mean_ttft_ms"]),
                        "inter_token_latency_ms": summary(sim["mean_tpot_ms"]),
                        "time_per_output_token_ms": summary(
                            sim["mean_e2el_ms"] / (sim["total_output_tokens"] / n)),
                        "request_latency": summary(sim["mean_e2el_ms"] / 1e3),
                        "prompt_token_count": summary(sim["total_input_tokens"] / n),
                        "output_token_count": summary(sim["total_output_tokens"] / n)}}


def main():
    base = open(os.path.join(REPO, "calibration", "engines", "vllm.yaml"), encoding="utf-8").read()
    engine_text = re.sub(r"(\n  step: \{value: )[^,]+,", rf"\g<1>{TRUE_STEP},", base)
    with tempfile.TemporaryDirectory() as tmp:
        engine = os.path.join(tmp, "vllm-true.yaml")
        with open(engine, "w", encoding="utf-8") as f:
            f.write(engine_text)
        vllm_file("conc4.json", simulate(engine, ["--concurrency", "4"], 48, 512, 128), 48, None, 4)
        vllm_file("conc16.json", simulate(engine, ["--concurrency", "16"], 96, 512, 128), 96, None, 16,
                  detailed=True)
        vllm_file("rate6.json", simulate(engine, ["--rate", "6"], 96, 1024, 96), 96, 6, None)
        report = {"benchmarks": [
            guidellm_benchmark(simulate(engine, ["--concurrency", "8"], 64, 256, 160),
                               {"type_": "concurrent", "streams": 8}, 64),
            guidellm_benchmark(simulate(engine, ["--rate", "3", "--arrival", "constant"], 48, 2048, 64),
                               {"type_": "constant", "rate": 3.0}, 48)]}
        with open(os.path.join(HERE, "guidellm.json"), "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
