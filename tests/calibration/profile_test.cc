// Reading measured profiles (sim/calibration/profile.h, vidur.h) and fitted card profiles
// (card_profile.h): malformed or foreign files are refused with messages that name the file, the
// field, what is wrong and what is accepted. The messages are pinned here.
#include "sim/calibration/profile.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/calibration/card_profile.h"
#include "sim/calibration/vidur.h"
#include "sim/core/error.h"
#include "sim/hardware/card.h"
#include "tests/calibration/synthetic.h"
#include "tests/support/temp_dir.h"
#include "tests/support/skip.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif
#ifndef CAPSIM_SHARED_DIR
#error "CAPSIM_SHARED_DIR must name the shared reference data (the build defines it)"
#endif

namespace {

using namespace capsim::calibration;
using nlohmann::json;

using capsim_test::TempDir;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "(no error)";
}

capsim::Card card(const std::string& name) {
  return capsim::CardCatalogue::load_file(std::string(CAPSIM_DATA_DIR) + "/calibration/cards/" + name + ".yaml");
}

json minimal() {
  return {{"format", "capsim-calibration-profile"},
          {"version", 1},
          {"provenance", {{"gpu_name", "NVIDIA H100 80GB HBM3"}, {"compute_capability", "9.0"}, {"date", "2025-01-01T00:00:00Z"}}},
          {"gemm", {{{"dtype", "bf16"}, {"m", 1}, {"n", 4096}, {"k", 4096}, {"seconds", {1.5e-5, 1.6e-5}}}}}};
}

std::string parse_error(const json& j) {
  return error_of([&] { parse_profile(j, "p.json"); });
}

}  // namespace

TEST_CASE("profile: a minimal capsim-calibrate profile reads", "[calibration]") {
  const Profile p = parse_profile(minimal(), "p.json");
  CHECK(p.source == "capsim-calibrate");
  CHECK(p.provenance.gpu_name == "NVIDIA H100 80GB HBM3");
  REQUIRE(p.gemm.size() == 1);
  CHECK(p.gemm[0].dtype == capsim::Precision::kBf16);
  CHECK(p.gemm[0].n == 4096);
  CHECK(median(p.gemm[0].seconds) == Approx(1.55e-5));
  CHECK(p.bandwidth.empty());
  CHECK_FALSE(p.launch.present);
}

TEST_CASE("profile: malformed and foreign profiles are refused with pinned messages", "[calibration]") {
  TempDir dir;
  CHECK(error_of([&] { load_profile(dir.path() + "/none.json"); }) == dir.path() + "/none.json: cannot read file");
  const std::string bad = dir.write("bad.json", "{\"format\": ");
  CHECK(error_of([&] { load_profile(bad); }) ==
        bad + ":1: malformed JSON: [json.exception.parse_error.101] parse error at line 1, column 12: "
              "syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal; "
              "expected a capsim calibration profile written by capsim-calibrate");

  CHECK(parse_error(json::array()) ==
        "p.json: expected a JSON object at the top level; accepted: \"capsim-calibration-profile\" (written by capsim-calibrate)");
  json j = minimal();
  j.erase("format");
  CHECK(parse_error(j) ==
        "p.json: format: missing; this is not a capsim calibration profile (accepted: \"capsim-calibration-profile\" "
        "(written by capsim-calibrate))");
  j = minimal();
  j["format"] = "vidur-profile";
  CHECK(parse_error(j) ==
        "p.json: format: 'vidur-profile' is not a capsim calibration profile; accepted: \"capsim-calibration-profile\" "
        "(written by capsim-calibrate)");
  j = minimal();
  j["version"] = 2;
  CHECK(parse_error(j) == "p.json: version: 2 is not a supported profile version; accepted: 1");
  j = minimal();
  j.erase("provenance");
  CHECK(parse_error(j) ==
        "p.json: provenance: missing (required); expected an object with gpu_name, compute_capability and date");
  j = minimal();
  j["provenance"].erase("gpu_name");
  CHECK(parse_error(j) ==
        "p.json: provenance.gpu_name: missing (required); expected the GPU's name as the driver reports it");
  j = minimal();
  j.erase("gemm");
  CHECK(parse_error(j) == "p.json: gemm: missing or empty; expected a list of {dtype, m, n, k, seconds}");
  j = minimal();
  j["gemm"][0]["dtype"] = "fp4";
  CHECK(parse_error(j) == "p.json: gemm[0].dtype: 'fp4' is not a GEMM dtype; accepted: fp16, bf16, fp8");
  j = minimal();
  j["gemm"][0]["m"] = 0;
  CHECK(parse_error(j) == "p.json: gemm[0].m: expected a whole number >= 1, got 0");
  j = minimal();
  j["gemm"][0]["k"] = 2.5;
  CHECK(parse_error(j) == "p.json: gemm[0].k: expected a whole number >= 1, got 2.5");
  j = minimal();
  j["gemm"][0]["seconds"] = json::array();
  CHECK(parse_error(j) ==
        "p.json: gemm[0].seconds: expected a non-empty list of positive numbers (seconds, one per repetition)");
  j = minimal();
  j["gemm"][0]["seconds"] = {1e-5, -1};
  CHECK(parse_error(j) ==
        "p.json: gemm[0].seconds[1]: -1 is not a time; expected a non-empty list of positive numbers (seconds, one "
        "per repetition)");
  j = minimal();
  j["bandwidth"] = {{{"kernel", "write"}, {"buffer_bytes", 1e9}, {"bytes_moved", 1e9}, {"seconds", {1e-3}}}};
  CHECK(parse_error(j) == "p.json: bandwidth[0].kernel: 'write' is not a bandwidth kernel; accepted: read, copy");
  j = minimal();
  j["attention_decode"] = {{{"batch", 1}, {"context", 512}, {"q_heads", 32}, {"kv_heads", 8}, {"head_dim", 128},
                            {"kv_dtype", "int4"}, {"seconds", {1e-5}}}};
  CHECK(parse_error(j) == "p.json: attention_decode[0].kv_dtype: 'int4' is not a KV dtype; accepted: bf16, fp16, fp8");
}

TEST_CASE("card fit: a profile from another GPU is refused unless forced", "[calibration]") {
  const Profile a100 = parse_profile(capsim::test::synthetic_profile({}, 1, "NVIDIA A100-SXM4-80GB"), "a100.json");
  CHECK(error_of([&] { fit_card(a100, card("h100-sxm"), {}); }) ==
        "a100.json: provenance.gpu_name: 'NVIDIA A100-SXM4-80GB' does not match card h100-sxm (NVIDIA H100 SXM5 "
        "80GB): the GPU is a a100, the card's names do not include it; fit it to the card it was measured on, or "
        "pass --force to accept it");
  CardFitOptions force;
  force.force = true;
  const CardFit f = fit_card(a100, card("h100-sxm"), force);
  CHECK(f.forced);
  REQUIRE_FALSE(f.notes.empty());
  CHECK(f.notes[0] == "fitted with --force: GPU 'NVIDIA A100-SXM4-80GB' does not match card h100-sxm (the GPU is a "
                      "a100, the card's names do not include it)");
}

TEST_CASE("card profile: GPU names are matched to cards by model, form factor and memory", "[calibration]") {
  std::string why;
  CHECK(gpu_matches_card("NVIDIA H100 80GB HBM3", card("h100-sxm")));
  CHECK(gpu_matches_card("NVIDIA A100-SXM4-80GB", card("a100-80gb-sxm")));
  CHECK_FALSE(gpu_matches_card("NVIDIA A100-SXM4-40GB", card("a100-80gb-sxm"), &why));
  CHECK(why == "the GPU has 40gb, the card 80gb");
  CHECK_FALSE(gpu_matches_card("NVIDIA H100 PCIe", card("h100-sxm"), &why));
  CHECK(why == "the GPU is pcie, the card is sxm");
  CHECK(gpu_matches_card("NVIDIA GeForce RTX 4090", card("rtx-4090")));
  CHECK_FALSE(gpu_matches_card("NVIDIA A10G", card("a10"), &why));
  CHECK_FALSE(gpu_matches_card("NVIDIA GH200 480GB", card("h200"), &why));
  CHECK(why == "the GPU is a gh200, the card's names do not include it");
  CHECK(gpu_matches_card("Vidur SKU h100", card("h100-sxm")));
}

TEST_CASE("vidur: mlp.csv rows become per-shard GEMMs of the layer's four linear operators", "[calibration]") {
  TempDir dir;
  // Llama-2-7B at TP 2, 8 tokens: qkv n = (32 + 2·32)·128 / 2 = 6144, k = 4096; o n = 4096,
  // k = 4096 / 2 = 2048; gate+up n = 2·11008 / 2 = 11008, k = 4096; down n = 4096, k = 5504.
  dir.write("compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
            "time_stats.attn_pre_proj.median,time_stats.attn_post_proj.median,time_stats.mlp_up_proj.median,"
            "time_stats.mlp_down_proj.median,n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,"
            "num_tokens,num_tensor_parallel_workers\n"
            "0.02,0.01,0.04,0.03,32,32,4096,11008,32000,True,8,2\n");
  dir.write("compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv",
            "time_stats.attn_pre_proj.median,n_head,n_kv_head,n_embd,n_expanded_embd,num_tokens,"
            "num_tensor_parallel_workers\n0.05,32,32,4096,11008,8,1\n");
  VidurReport rep;
  const Profile p = load_vidur_dir(dir.path(), "h100", nullptr, &rep);
  CHECK(p.source == "vidur");
  CHECK(p.provenance.gpu_name == "Vidur SKU h100");
  REQUIRE(p.gemm.size() == 4);
  CHECK((p.gemm[0].m == 8 && p.gemm[0].n == 6144 && p.gemm[0].k == 4096));
  CHECK((p.gemm[1].n == 4096 && p.gemm[1].k == 2048));
  CHECK((p.gemm[2].n == 11008 && p.gemm[2].k == 4096));
  CHECK((p.gemm[3].n == 4096 && p.gemm[3].k == 5504));
  CHECK(p.gemm[0].seconds == std::vector<double>{2e-5});
  CHECK(p.gemm[0].dtype == capsim::Precision::kFp16);
  CHECK(rep.used == std::vector<std::string>{"compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv: 4 GEMM samples (mlp.csv)"});
  CHECK(rep.skipped == std::vector<std::string>{
                           "compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv: not for SKU h100 (no folder 'h100' or "
                           "prefix 'h100_')"});
  CHECK(error_of([&] { load_vidur_dir(dir.path(), "l4", nullptr); }).rfind(
            dir.path() + ": no Vidur linear-operator (mlp.csv) rows for SKU 'l4'", 0) == 0);
  dir.write("compute/h100/bad/mlp.csv",
            "time_stats.attn_pre_proj.median,n_head,n_kv_head,n_embd,n_expanded_embd,num_tokens,"
            "num_tensor_parallel_workers\nfast,32,32,4096,11008,8,1\n");
  CHECK(error_of([&] { load_vidur_dir(dir.path(), "h100", nullptr); }) ==
        dir.path() + "/compute/h100/bad/mlp.csv:2: column time_stats.attn_pre_proj.median: 'fast' is not a number");
  CHECK(vidur_sku_of("h100-sxm") == "h100");
  CHECK(vidur_sku_of("a100-80gb-sxm") == "a100");
}

TEST_CASE("vidur: the reference H100 profiles fit close to the card file's constants", "[calibration]") {
  // The h100-sxm card's 0.78 / 0.76 were read off these same Vidur medians (its references
  // vidur-h100-linear); the least-squares fit over all 224 linear-operator rows lands near them.
  const std::string dir = std::string(CAPSIM_SHARED_DIR) + "/reference/vidur_profiles";
  CAPSIM_REQUIRE_SHARED(dir);
  VidurReport rep;
  // The derived file names models by Hugging Face id; their shapes (Llama-2-7B, Llama-2-70B).
  const VidurShapeResolver shapes = [](const std::string& id) -> std::optional<VidurModelShape> {
    if (id == "meta-llama/Llama-2-7b-hf") return VidurModelShape{4096, 32, 32, 128, 11008, true};
    if (id == "meta-llama/Llama-2-70b-hf") return VidurModelShape{8192, 64, 8, 128, 28672, true};
    return std::nullopt;
  };
  const Profile p = load_vidur_dir(dir, "h100", shapes, &rep);
  CHECK(p.gemm.size() == 224);
  CHECK(p.allreduce.size() == 30);
  const CardFit f = fit_card(p, card("h100-sxm"), {});
  CHECK(f.compute_dtype == "fp16");
  CHECK(f.compute.value == Approx(0.743).margin(0.01));
  CHECK(f.bandwidth.value == Approx(0.771).margin(0.01));
  CHECK_FALSE(f.floor.fitted);  // no kernel in these rows is far below a floor
  CHECK(f.floor.value == 4e-6);
  CHECK(f.gemm.quality.r2_log > 0.99);
}
