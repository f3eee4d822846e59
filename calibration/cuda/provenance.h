// Where a profile was measured: GPU, driver, CUDA and library versions, clocks, host, time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "calibration/cuda/bench.h"

namespace capcal {

// Fills cfg.sms, cfg.l2_bytes, cfg.cc_major/minor for `cfg.device` and returns the provenance
// object of the profile (docs/calibration.md#profile).
nlohmann::json device_provenance(BenchConfig& cfg, const std::string& command_line);

// SM and memory clocks now (MHz, from NVML when the driver's libnvidia-ml is loadable).
nlohmann::json current_clocks(int device);

}  // namespace capcal
