// Engine profile YAML (calibration/engines/*.yaml).
#include "fuzz/fuzz_support.h"
#include "sim/llm/engine_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = capsim::fuzz::write_input(data, size, "-engine.yaml");
  capsim::fuzz::expect_clean([&] { (void)capsim::EngineCatalogue::load_file(path); });
  return 0;
}
