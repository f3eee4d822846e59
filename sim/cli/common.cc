#include "sim/cli/common.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "sim/core/error.h"
#include "sim/core/run_limits.h"

namespace capsim::cli {
namespace {

std::string& data_dir_storage() {
  static std::string dir;
  return dir;
}

}  // namespace

std::string data_dir() {
  if (!data_dir_storage().empty()) return data_dir_storage();
  if (const char* env = std::getenv("CAPSIM_DATA_DIR"); env && *env) return env;
  return CAPSIM_DATA_DIR;
}

void set_data_dir(const std::string& dir) { data_dir_storage() = dir; }

const CardCatalogue& cards() {
  static const CardCatalogue c = CardCatalogue::load_dir(data_dir() + "/calibration/cards");
  return c;
}

const ModelCatalogue& models() {
  static const ModelCatalogue m = ModelCatalogue::load_dir(data_dir() + "/models");
  return m;
}

const EngineCatalogue& engines() {
  static const EngineCatalogue e = EngineCatalogue::load_dir(data_dir() + "/calibration/engines");
  return e;
}

void DeploymentFlags::add_to(CLI::App& app, bool with_limits) {
  app.add_option("--model,-m", model,
                 "model: catalogue name (capsim list models), Hugging Face id, or config.json path")
      ->capture_default_str();
  app.add_option("--card,-c", card, "card type (capsim list cards) or a card .yaml path")
      ->capture_default_str();
  app.add_option("--tp,--tensor-parallel-size", tp, "tensor-parallel GPUs per replica")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--weights,--dtype", weights,
                 "weight precision: auto (bf16, or fp16 where the card lacks bf16), fp32, bf16, "
                 "fp16, fp8, int8, int4")
      ->capture_default_str();
  app.add_option("--kv-cache,--kv-cache-dtype", kv_cache,
                 "KV-cache precision: auto (the 16-bit type of the card), bf16, fp16, fp8")
      ->capture_default_str();
  app.add_option("--engine", engine, "serving engine profile (capsim list engines), or a path to an engine .yaml")
      ->capture_default_str();
  if (!with_limits) return;
  app.add_option("--max-num-seqs", max_num_seqs,
                 "most sequences per step (vLLM default: 1024 on >=70 GiB non-A100 GPUs, else 256)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-num-batched-tokens", max_num_batched_tokens,
                 "token budget per step (vLLM default: 8192 on >=70 GiB non-A100 GPUs, else 2048)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--block-size", block_size, "KV-cache block size in tokens (vLLM: 16)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--gpu-memory-utilization", gpu_memory_utilization,
                 "fraction of GPU memory the engine may use (vLLM: 0.9)")
      ->check(CLI::Range(0.05, 1.0));
  app.add_option("--max-model-len", max_model_len,
                 "longest prompt + output a replica serves; longer requests are rejected (vLLM: "
                 "the model's max_position_embeddings; must be <= it, and the KV cache must hold "
                 "one such sequence)")
      ->check(CLI::Range(1LL, 100'000'000LL));
}

Deployment DeploymentFlags::resolve() const {
  Deployment d;
  d.card = cards().find(card);
  d.model = models().find(model);
  // A path to an engine YAML (calibration/engines format) runs a profile outside the catalogue.
  const bool engine_file = engine.size() > 5 && engine.compare(engine.size() - 5, 5, ".yaml") == 0;
  d.engine = engine_file ? EngineCatalogue::load_file(engine) : engines().find(engine);
  d.tp = tp;
  const Precision half = native_half(d.card);
  d.weights = weights == "auto" ? half : parse_precision(weights, "--weights");
  if (kv_cache == "auto") {
    d.kv_cache = (d.weights == Precision::kFp32) ? Precision::kFp32 : half;
  } else {
    d.kv_cache = parse_precision(kv_cache, "--kv-cache");
  }
  d.limits = default_limits(d.card, d.engine);
  if (max_num_seqs) d.limits.max_num_seqs = *max_num_seqs;
  if (max_num_batched_tokens) d.limits.max_num_batched_tokens = *max_num_batched_tokens;
  if (block_size) d.limits.block_size = *block_size;
  if (gpu_memory_utilization) d.limits.gpu_memory_utilization = *gpu_memory_utilization;
  if (max_model_len) d.limits.max_model_len = *max_model_len;
  if (async_scheduling) d.engine.async_scheduling = *async_scheduling;
  d.validate();
  return d;
}

void refuse_non_finite(CLI::App& app) {
  const CLI::Validator finite(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end != text.c_str() && !std::isfinite(v)) {
          return "'" + text + "' is not a finite number";
        }
        return "";
      },
      "");
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_name().find("FLOAT") != std::string::npos) o->check(finite);
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_non_finite(*sub);
}

void add_allow_large(CLI::App& app) {
  app.add_flag_callback("--allow-large", [] { lift_run_limits(); },
                        "run even beyond the limits on requests (2e6), users (1e6), replicas "
                        "(1000) and cards (8192) one run may ask for")
      ->trigger_on_parse();
  for (CLI::App* sub : app.get_subcommands({})) add_allow_large(*sub);
}

int report_error(const std::exception& e) {
  std::cerr << "capsim: error: " << e.what() << "\n";
  return 2;
}

}  // namespace capsim::cli
