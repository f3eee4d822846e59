// Scenario files, YAML or JSON (JSON is YAML's flow style): read, then built into a simulation
// config and workload against the repository's catalogues (nothing is simulated).
#include "fuzz/fuzz_support.h"
#include "sim/cli/common.h"
#include "sim/cli/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool once = (capsim::cli::set_data_dir(CAPSIM_DATA_DIR), true);
  (void)once;
  const std::string& path = capsim::fuzz::write_input(data, size, "-scenario.yaml");
  capsim::fuzz::expect_clean([&] {
    capsim::cli::ScenarioSpec spec;
    capsim::cli::load_scenario_file(path, spec);
    (void)capsim::cli::build_scenario(spec);
  });
  return 0;
}
