// scenario::find_card / find_model / find_engine read one catalogue file for a plain name and
// must give exactly what the whole catalogue gives (cards().find etc.), calibration profiles
// included; anything else (aliases, ids, paths, unknown names) goes to the whole catalogue.
#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "sim/core/error.h"
#include "sim/scenario/catalogues.h"

namespace {

using namespace capsim;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("catalogues: a card by its file name is the catalogue's card", "[catalogue][lazy]") {
  int checked = 0;
  for (const Card& c : scenario::cards().cards()) {
    const Card& lazy = scenario::find_card(c.name);
    INFO(c.name);
    CHECK(lazy.name == c.name);
    CHECK(lazy.file == c.file);
    CHECK(lazy.aliases == c.aliases);
    CHECK(lazy.memory_bytes == c.memory_bytes);
    CHECK(lazy.memory_bandwidth == c.memory_bandwidth);
    CHECK(lazy.dense_peak == c.dense_peak);
    // Set by the calibration profile where the card has one (calibration/profiles/).
    CHECK(lazy.bandwidth_efficiency == c.bandwidth_efficiency);
    CHECK(lazy.compute_efficiency == c.compute_efficiency);
    CHECK(lazy.compute_efficiency_fp8 == c.compute_efficiency_fp8);
    CHECK(lazy.kernel_floor_s == c.kernel_floor_s);
    ++checked;
  }
  CHECK(checked >= 10);
  // Case-insensitive like the catalogue, read once: the same object on the second call.
  CHECK(&scenario::find_card("H100-SXM") == &scenario::find_card("h100-sxm"));
  // Not a file name: the catalogue answers (an alias, when the card has one; an unknown name
  // with the catalogue's own message).
  for (const Card& c : scenario::cards().cards()) {
    for (const std::string& a : c.aliases) CHECK(scenario::find_card(a).name == c.name);
  }
  CHECK(error_of([] { scenario::find_card("h100-sxn"); }) ==
        error_of([] { scenario::cards().find("h100-sxn"); }));
  CHECK_FALSE(error_of([] { scenario::find_card("h100-sxn"); }).empty());
}

TEST_CASE("catalogues: a model or engine by its file name is the catalogue's", "[catalogue][lazy]") {
  for (const ModelEntry& e : scenario::models().entries()) {
    const ModelSpec a = scenario::find_model(e.name), b = scenario::models().find(e.name);
    INFO(e.name);
    CHECK(a.name == b.name);
    CHECK(a.hf_id == b.hf_id);
    CHECK(a.config_path == b.config_path);
    CHECK(a.hidden == b.hidden);
    CHECK(a.layers == b.layers);
    CHECK(a.kv_heads == b.kv_heads);
    CHECK(a.vocab == b.vocab);
    if (!e.hf_id.empty()) CHECK(scenario::find_model(e.hf_id).name == e.name);  // by id: the catalogue
  }
  CHECK(error_of([] { scenario::find_model("mistral-7c"); }) ==
        error_of([] { scenario::models().find("mistral-7c"); }));
  for (const EngineProfile& e : scenario::engines().engines()) {
    const EngineProfile& lazy = scenario::find_engine(e.name);
    CHECK(lazy.name == e.name);
    CHECK(lazy.frontend_s == e.frontend_s);
    CHECK(lazy.return_per_sequence_s == e.return_per_sequence_s);
  }
  CHECK(error_of([] { scenario::find_engine("VLLM"); }) == error_of([] { scenario::engines().find("VLLM"); }));
}
