// Scenario files, YAML or JSON (JSON is YAML's flow style): read, then built into a simulation
// config and workload against the repository's catalogues (nothing is simulated).
#include "fuzz/fuzz_support.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool once = (capsim::scenario::set_data_dir(CAPSIM_DATA_DIR), true);
  (void)once;
  const std::string& path = capsim::fuzz::write_input(data, size, "-scenario.yaml");
  capsim::fuzz::expect_clean([&] {
    capsim::scenario::ScenarioSpec spec;
    capsim::scenario::load_scenario_file(path, spec);
    (void)capsim::scenario::build_scenario(spec);
  });
  return 0;
}
