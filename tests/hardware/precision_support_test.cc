// The per-architecture precision table (sim/hardware/precision_support.h) on the real catalogue:
// what each card can run, and that Deployment::validate refuses the rest with a message naming
// the flag, the card, the missing kernel and the source.
#include "sim/hardware/precision_support.h"

#include <catch2/catch.hpp>
#include <string>

#include "sim/core/error.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "tests/support/catalogues.h"

namespace {

using namespace capsim;

constexpr auto& cards = capsim_test::card_catalogue;

Deployment deploy(const std::string& card, Precision w, Precision kv) {
  const ModelCatalogue& m = capsim_test::model_catalogue();
  const EngineCatalogue& e = capsim_test::engine_catalogue();
  Deployment d;
  d.model = m.find("mistral-7b");
  d.card = cards().find(card);
  d.engine = e.find("vllm");
  d.weights = w;
  d.kv_cache = kv;
  d.limits = default_limits(d.card, d.engine);
  return d;
}

std::string refusal(const std::string& card, Precision w, Precision kv) {
  try {
    deploy(card, w, kv).validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("precision support: every catalogue card's architecture has a row", "[hardware][precision]") {
  for (const Card& c : cards().cards()) {
    INFO(c.name << " architecture " << c.architecture);
    REQUIRE(architecture_support(c.architecture) != nullptr);
    CHECK_FALSE(std::string(architecture_support(c.architecture)->source).empty());
  }
}

TEST_CASE("precision support: no FP8 of any kind on Turing (T4)", "[hardware][precision]") {
  // The T4 has INT8 tensor cores but no FP8: vLLM's FP8 W8A8 needs compute capability 8.9 and
  // FP8 Marlin (weight-only) 8.0. Before the table, fp8 weights on a T4 were accepted as
  // weight-only and `fit` suggested --weights fp8.
  const std::string why = refusal("t4", Precision::kFp8, Precision::kFp16);
  CHECK(why.find("--weights: fp8 is not supported on t4") != std::string::npos);
  CHECK(why.find("supported_hardware") != std::string::npos);
  CHECK(refusal("t4", Precision::kInt8, Precision::kFp16).empty());  // INT8 W8A8: Turing yes
  CHECK(refusal("t4", Precision::kInt4, Precision::kFp16).empty());  // AWQ/GPTQ: Turing yes
  CHECK(refusal("t4", Precision::kBf16, Precision::kBf16).find("bf16") != std::string::npos);
  CHECK(refusal("t4", Precision::kFp16, Precision::kFp8).find("--kv-cache: fp8") != std::string::npos);
}

TEST_CASE("precision support: FP8 is W8A8 on Ada and Hopper, weight-only on Ampere", "[hardware][precision]") {
  CHECK(refusal("a100-80gb-sxm", Precision::kFp8, Precision::kBf16).empty());
  CHECK(fp8_weight_only(cards().find("a100-80gb-sxm")));
  CHECK(deploy("a100-80gb-sxm", Precision::kFp8, Precision::kBf16).compute_precision() == Precision::kBf16);
  CHECK_FALSE(fp8_weight_only(cards().find("rtx-4090")));
  CHECK(deploy("rtx-4090", Precision::kFp8, Precision::kFp8).compute_precision() == Precision::kFp8);
  CHECK(deploy("h100-sxm", Precision::kFp8, Precision::kFp8).compute_precision() == Precision::kFp8);
  // MI300X: the AMD column lists FP8 W8A8 only, not INT8 W8A8 nor AWQ/GPTQ.
  CHECK(refusal("mi300x", Precision::kFp8, Precision::kFp8).empty());
  CHECK(refusal("mi300x", Precision::kInt4, Precision::kBf16).find("INT4 AWQ/GPTQ") != std::string::npos);
  CHECK(architecture_support("blackwell")->fp4);
  CHECK_FALSE(architecture_support("hopper")->fp4);
}
