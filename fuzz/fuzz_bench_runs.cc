// `capsim calibrate runs` result files: `vllm bench serve` --save-result JSON and GuideLLM
// reports (sim/calibration/bench_runs.h), a user's own files. Every run returned must satisfy the
// reader's contract: completed requests, finite positive means, a load that is a rate, a
// concurrency or neither, and per-request lengths (when saved) one per completed request.
#include <cmath>
#include <cstdlib>

#include "fuzz/fuzz_support.h"
#include "sim/calibration/bench_runs.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();  // a run outside the contract slipped through
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = capsim::fuzz::write_input(data, size, ".json");
  capsim::fuzz::expect_clean([&] {
    for (const capsim::calibration::BenchRun& r : capsim::calibration::load_bench_runs(path)) {
      require(r.completed > 0 && r.requests >= r.completed);
      require(std::isfinite(r.ttft_ms) && r.ttft_ms > 0 && std::isfinite(r.tpot_ms) && r.tpot_ms >= 0);
      require(!r.e2e_ms || (std::isfinite(*r.e2e_ms) && *r.e2e_ms > 0));
      require(std::isfinite(r.mean_input_tokens) && r.mean_input_tokens > 0);
      require(std::isfinite(r.mean_output_tokens) && r.mean_output_tokens > 0);
      require(!r.rate || (std::isfinite(*r.rate) && *r.rate > 0));
      require(!r.concurrency || *r.concurrency >= 1);
      require(std::isfinite(r.burstiness) && r.burstiness > 0);
      require(r.input_lens.size() == r.output_lens.size());
    }
  });
  return 0;
}
