// config.json: a model accepted by load_model_config must have consistent dimensions and
// parameter counts that fit their types (the memory plan and cost model divide by and multiply
// them).
#include <cmath>
#include <cstdlib>

#include "fuzz/fuzz_support.h"
#include "sim/llm/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = capsim::fuzz::write_input(data, size, "-config.json");
  capsim::fuzz::expect_clean([&] {
    const capsim::ModelSpec m = capsim::load_model_config(path);
    if (m.heads < 1 || m.kv_heads < 1 || m.kv_heads > m.heads || m.heads % m.kv_heads != 0 ||
        m.head_dim < 1 || m.hidden < 1 || m.layers < 1 || m.vocab < 1) {
      std::abort();
    }
    // Overflow in these is caught by UBSan (signed overflow) in the sanitizer build.
    const auto total = m.total_params();
    const auto active = m.active_params();
    if (total < 1 || active < 1 || active > total) std::abort();
    for (const auto p : capsim::all_precisions()) {
      if (!std::isfinite(m.weight_bytes(p)) || !std::isfinite(m.kv_bytes_per_token(p))) std::abort();
    }
    for (const int tp : {1, 2, 8, 64}) {
      if (!(m.kv_elements_per_token_per_layer(tp) > 0) && !m.encoder_only) std::abort();
    }
    if (!std::isfinite(m.linear_flops_per_token() + m.attention_flops_per_token(4096))) std::abort();
  });
  return 0;
}
