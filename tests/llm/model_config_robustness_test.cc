// Malformed config.json files (issue #11): each is refused with the file, the field and the
// accepted range, before anything divides by or multiplies its numbers.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "sim/core/error.h"
#include "sim/llm/model_spec.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using Catch::Matchers::Contains;

// A small Llama: hidden 64 = 4 heads x 16.
std::string config(const std::string& extra) {
  return R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
             "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128)" +
         (extra.empty() ? std::string() : ", " + extra) + "}";
}

std::string error_of(const std::string& text) {
  capsim_test::TempDir dir("cfg");
  const std::string path = dir.write("config.json", text);
  try {
    capsim::load_model_config(path);
  } catch (const capsim::Error& e) {
    std::string msg = e.what();
    // The path is the temporary folder's; keep the part after it.
    const auto at = msg.find("config.json");
    return at == std::string::npos ? msg : msg.substr(at);
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("model config: the small Llama loads, with its counts worked by hand", "[llm][robust]") {
  capsim_test::TempDir dir("cfg");
  const capsim::ModelSpec m = capsim::load_model_config(dir.write("config.json", config("")));
  CHECK(m.kv_heads == 4);
  CHECK(m.head_dim == 16);
  // Per layer: attention 4 x 64 x 64 = 16,384; MLP 3 x 64 x 128 = 24,576; norms 2 x 64 = 128.
  // Embeddings 100 x 64 twice (untied) = 12,800, final norm 64.
  CHECK(m.total_params() == 2 * (16'384 + 24'576 + 128) + 12'800 + 64);
}

TEST_CASE("model config: kv heads must be in 1..heads (0 divided by zero before)", "[llm][robust]") {
  CHECK_THAT(error_of(config(R"("num_key_value_heads": 0)")),
             Contains("config.json: num_key_value_heads: 0 is not in 1..num_attention_heads (4)"));
  CHECK_THAT(error_of(config(R"("num_key_value_heads": 8)")),
             Contains("num_key_value_heads: 8 is not in 1..num_attention_heads (4)"));
  CHECK_THAT(error_of(config(R"("num_key_value_heads": 3)")),
             Contains("num_key_value_heads (3) must divide num_attention_heads (4)"));
}

TEST_CASE("model config: head_dim 0 and sizes that leave a zero head are refused", "[llm][robust]") {
  CHECK_THAT(error_of(config(R"("head_dim": 0)")), Contains("config.json: head_dim: 0 must be > 0"));
  // hidden 2 / 4 heads = 0 by integer division.
  CHECK_THAT(error_of(R"({"model_type": "llama", "hidden_size": 2, "num_hidden_layers": 2,
                          "num_attention_heads": 4, "vocab_size": 100})"),
             Contains("head_dim: 0 (hidden_size / num_attention_heads) must be in 1..4096"));
  CHECK_THAT(error_of(config(R"("intermediate_size": 0)")),
             Contains("intermediate_size: must be > 0"));
}

TEST_CASE("model config: dimensions whose products overflow int64 are refused", "[llm][robust]") {
  CHECK_THAT(error_of(R"({"model_type": "llama", "hidden_size": 4000000000, "num_hidden_layers": 2,
                          "num_attention_heads": 4, "vocab_size": 100})"),
             Contains("hidden_size: 4000000000 is out of range; accepted: 0..131072"));
  CHECK_THAT(error_of(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1e18,
                          "num_attention_heads": 4, "vocab_size": 100})"),
             Contains("num_hidden_layers: '1e+18' is not a whole number in 0..1024"));
  CHECK_THAT(error_of(config(R"("vocab_size": 18446744073709551615)")),
             Contains("vocab_size: 18446744073709551615 is out of range; accepted: 0..8388608"));
  CHECK_THAT(error_of(config(R"("head_dim": -3)")), Contains("head_dim: -3 is negative"));
  CHECK_THAT(error_of(config(R"("head_dim": 16.5)")), Contains("head_dim: '16.5' is not a whole number"));
  CHECK_THAT(error_of(config(R"("head_dim": "16")")), Contains("head_dim: expected a whole number, got a string"));
}

TEST_CASE("model config: MoE fields are checked against the layer count", "[llm][robust]") {
  CHECK_THAT(error_of(R"({"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "kv_lora_rank": 8, "qk_nope_head_dim": 8,
      "qk_rope_head_dim": 8, "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2,
      "moe_intermediate_size": 32, "first_k_dense_replace": 5})"),
             Contains("first_k_dense_replace: 5 exceeds num_hidden_layers (2)"));
  CHECK_THAT(error_of(R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "num_experts": 4, "num_experts_per_tok": 2,
      "mlp_only_layers": ["a"]})"),
             Contains("mlp_only_layers: expected layer indices (whole numbers >= 0), got a string"));
}

TEST_CASE("model config: a context length of 0 tokens is refused, naming the key the file used",
          "[llm][robust]") {
  // Before, max_position_embeddings 0 loaded: a model that serves no token.
  CHECK(error_of(config(R"("max_position_embeddings": 0)")) ==
        "config.json: max_position_embeddings: must be > 0; accepted: 1..2147483648");
  CHECK(error_of(config(R"("n_positions": 0)")) == "config.json: n_positions: must be > 0; accepted: 1..2147483648");
  capsim_test::TempDir dir("cfg");
  CHECK(capsim::load_model_config(dir.write("config.json", config(R"("max_position_embeddings": 1)"))).max_context == 1);
  CHECK(capsim::load_model_config(dir.write("config.json", config(""))).max_context == 4096);  // absent
}

TEST_CASE("model config: nesting 100k levels deep is refused before parsing", "[llm][robust]") {
  const std::string deep = config(R"("x": )" + std::string(100'000, '[') + std::string(100'000, ']'));
  CHECK_THAT(error_of(deep), Contains("config.json:2: JSON nested deeper than 128 levels"));
  CHECK_THAT(error_of(R"({"model_type": 7})"), Contains("model_type: expected a string, got a number"));
}

TEST_CASE("model catalogue: a path that does not exist is a missing file, not an unknown model",
          "[llm][robust]") {
  const capsim::ModelCatalogue cat = capsim::ModelCatalogue::load_dir(std::string(CAPSIM_DATA_DIR) + "/models");
  for (const std::string p : {"/no/such/config.json", "./missing/config.json", "nope.json"}) {
    try {
      cat.find(p);
      FAIL("no error for " << p);
    } catch (const capsim::Error& e) {
      CHECK_THAT(e.what(), Contains(p + ": no such file"));
    }
  }
  CHECK_THAT([&] {
    try {
      cat.find("llama-3.1-8c");
    } catch (const capsim::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }(), Contains("unknown model 'llama-3.1-8c'"));
}

// On 64e18c4 a null or absent intermediate_size became 4 x hidden_size for every architecture:
// a Llama of hidden 4096 would have been sized with a 16384-wide MLP (Llama-3-8B's is 14336).
TEST_CASE("model config: a null or absent MLP width is refused unless the architecture defines it",
          "[llm][robust][model]") {
  const std::string small = R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                "vocab_size": 100)";
  CHECK(error_of(small + R"(, "model_type": "llama", "intermediate_size": null})") ==
        "config.json: intermediate_size: is null; model_type 'llama' needs it as the dense layers' "
        "MLP width (only gptj and falcon default it to 4 x hidden_size); accepted: a whole number 1..1048576");
  CHECK(error_of(small + R"(, "model_type": "qwen2"})") ==
        "config.json: intermediate_size: missing; model_type 'qwen2' needs it as the dense layers' "
        "MLP width (only gptj and falcon default it to 4 x hidden_size); accepted: a whole number 1..1048576");
  // Mixtral's experts take their width from intermediate_size.
  CHECK(error_of(small + R"(, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2})") ==
        "config.json: intermediate_size: missing; model_type 'mixtral' needs it as the experts' MLP "
        "width (no moe_intermediate_size) (only gptj and falcon default it to 4 x hidden_size); "
        "accepted: a whole number 1..1048576");
  // A MoE whose every layer has moe_intermediate_size never uses intermediate_size.
  capsim_test::TempDir dir("cfg");
  CHECK(capsim::load_model_config(dir.write("config.json", small + R"(, "model_type": "qwen3_moe",
          "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32})")).expert_intermediate == 32);
  // GPT-J's n_inner and Falcon's ffn_hidden_size are 4 x hidden when null or absent, in Hugging
  // Face's config classes and modelling code alike.
  CHECK(capsim::load_model_config(dir.write("config.json", small + R"(, "model_type": "gptj", "n_inner": null})"))
            .intermediate == 256);
  CHECK(capsim::load_model_config(dir.write("config.json", small + R"(, "model_type": "falcon"})")).intermediate == 256);
}

TEST_CASE("model config: every shipped and shared config.json loads", "[llm][robust][model]") {
  namespace fs = std::filesystem;
  int loaded = 0;
  for (const std::string root : {std::string(CAPSIM_DATA_DIR) + "/models", std::string(CAPSIM_SHARED_DIR) + "/model-configs"}) {
    CAPSIM_REQUIRE_SHARED(root);
    for (const auto& e : fs::directory_iterator(root)) {
      const fs::path cfg = e.path() / "config.json";
      if (!fs::exists(cfg)) continue;
      INFO(cfg.string());
      CHECK_NOTHROW(capsim::load_model_config(cfg.string()));
      ++loaded;
    }
  }
  CHECK(loaded >= 84);  // 41 in models/, 43 in ../shared/model-configs when this was written
}

// On 64e18c4 an AWQ or GPTQ checkpoint (4-bit weights) was sized and timed as bf16.
TEST_CASE("model config: a quant_method capsim does not size is refused, not run as bf16", "[llm][robust][model]") {
  const std::string accepted =
      "; accepted: mxfp4, fp8 (the checkpoint quantisations capsim sizes), or no quantization_config "
      "for a 16-bit checkpoint (re-quantise with --weights)";
  CHECK(error_of(config(R"("quantization_config": {"quant_method": "awq", "bits": 4})")) ==
        "config.json: quantization_config.quant_method: 'awq' is not supported" + accepted);
  CHECK(error_of(config(R"("quantization_config": {"bits": 4})")) ==
        "config.json: quantization_config.quant_method: missing" + accepted);
  CHECK(error_of(config(R"("quantization_config": {"quant_method": 8})")) ==
        "config.json: quantization_config.quant_method: expected a string, got a number" + accepted);
  CHECK(error_of(config(R"("quantization_config": "gptq")")) ==
        "config.json: quantization_config: expected an object, got a string");
  capsim_test::TempDir dir("cfg");
  CHECK(capsim::load_model_config(dir.write("config.json", config(R"("quantization_config": {"quant_method": "fp8"})")))
            .checkpoint_quant == "fp8");
  CHECK(capsim::load_model_config(dir.write("config.json", config(R"("quantization_config": null)"))).checkpoint_quant.empty());
}
