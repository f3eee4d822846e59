// Vidur per-operator profiles (microsoft/vidur, data/profiling/...) read into a calibration
// Profile, so `capsim calibrate fit --vidur DIR --card CARD` fits the same cost-model constants
// from them as from a capsim-calibrate profile.
//
// Recognised CSVs (by their columns; anything else is listed as skipped):
//   compute mlp.csv    time_stats.<op>.median (ms) per num_tokens and num_tensor_parallel_workers,
//                      with the model's n_head, n_kv_head, n_embd, n_expanded_embd,
//                      use_gated_mlp. attn_pre_proj (q,k,v), attn_post_proj (o), mlp_up_proj
//                      (gate+up), mlp_down_proj become fp16 GEMM samples of one shard.
//   derived linear     gpu_dir, model, tp, num_tokens, attn_pre_proj_ms ... (the reference
//                      excerpt Llama2_linear_ops_derived_a100_h100.csv); the model's shapes come
//                      from the catalogue by Hugging Face id.
//   attention          time_stats.attn_decode.median / attn_prefill.median with n_embd,
//                      n_q_head, n_kv_head, num_tensor_parallel_workers, batch_size,
//                      kv_cache_size, prefill_chunk_size, is_prefill.
//   all_reduce         time_stats.all_reduce.median, num_workers, size (fp16 elements).
//
// Which GPU: a file belongs to SKU `sku` ("h100", "a100") when a folder on its path below DIR
// is named `sku` (Vidur's layout: compute/h100/meta-llama/...) or its name starts with
// "<sku>_"; derived rows by their gpu_dir column. Other files are skipped.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/calibration/profile.h"

namespace capsim::calibration {

struct VidurModelShape {
  std::int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  bool gated = true;
};

// Hugging Face id ("meta-llama/Llama-2-7b-hf") -> shapes, or nullopt when unknown.
using VidurShapeResolver = std::function<std::optional<VidurModelShape>(const std::string& hf_id)>;

struct VidurReport {
  std::vector<std::string> used;     // "path: N GEMM samples", ...
  std::vector<std::string> skipped;  // "path: why"
};

// Reads every *.csv under `dir` (recursively) for `sku`. Throws capsim::Error when `dir` is not
// a folder, a recognised file is malformed (names the file, line and column), or nothing usable
// for `sku` is found (listing what was found).
Profile load_vidur_dir(const std::string& dir, const std::string& sku,
                       const VidurShapeResolver& resolve, VidurReport* report = nullptr);

// The Vidur SKU of a card: its first model token ("h100-sxm" -> "h100", "a100-80gb-sxm" -> "a100").
std::string vidur_sku_of(const std::string& card_name);

// A minimal CSV reader (RFC 4180 quoting). Throws capsim::Error "<path>: cannot read file".
std::vector<std::vector<std::string>> read_csv(const std::string& path);

}  // namespace capsim::calibration
