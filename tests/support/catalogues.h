// The shipped catalogues (models/, calibration/cards, calibration/engines) of the source tree,
// loaded once per test binary, for tests that build Deployments by hand.
#pragma once

#include <string>

#include "sim/hardware/card.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace capsim_test {

inline const capsim::CardCatalogue& card_catalogue() {
  static const capsim::CardCatalogue c =
      capsim::CardCatalogue::load_dir(std::string(CAPSIM_DATA_DIR) + "/calibration/cards");
  return c;
}
inline const capsim::ModelCatalogue& model_catalogue() {
  static const capsim::ModelCatalogue m =
      capsim::ModelCatalogue::load_dir(std::string(CAPSIM_DATA_DIR) + "/models");
  return m;
}
inline const capsim::EngineCatalogue& engine_catalogue() {
  static const capsim::EngineCatalogue e =
      capsim::EngineCatalogue::load_dir(std::string(CAPSIM_DATA_DIR) + "/calibration/engines");
  return e;
}
inline const capsim::EngineProfile& engine_profile(const std::string& name) { return engine_catalogue().find(name); }

}  // namespace capsim_test
