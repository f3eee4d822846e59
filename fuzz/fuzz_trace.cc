// Trace readers, all four formats: the first byte picks the format (or detection), the rest is
// the file. Every record returned must satisfy the reader's contract (trace.h).
#include <cmath>
#include <cstdlib>
#include <optional>

#include "fuzz/fuzz_support.h"
#include "sim/core/checked.h"
#include "sim/workload/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::optional<capsim::TraceFormat> format;
  switch (data[0] % 5) {
    case 0: format = capsim::TraceFormat::kAzure; break;
    case 1: format = capsim::TraceFormat::kMooncake; break;
    case 2: format = capsim::TraceFormat::kBurstGpt; break;
    case 3: format = capsim::TraceFormat::kPlainCsv; break;
    default: break;  // detect
  }
  const std::string& path = capsim::fuzz::write_input(data + 1, size - 1, ".trace");
  capsim::fuzz::expect_clean([&] {
    auto reader = capsim::open_trace(path, format, 1.0);
    capsim::TraceRecord r;
    double prev = 0;
    while (reader->next(r)) {
      if (!(r.arrival_s >= prev) || r.arrival_s > capsim::checked::kMaxSimSeconds ||
          r.input_tokens < 1 || r.output_tokens < 1 ||
          r.input_tokens > capsim::checked::kMaxTokens ||
          r.output_tokens > capsim::checked::kMaxTokens) {
        std::abort();  // a record outside the contract slipped through
      }
      prev = r.arrival_s;
    }
  });
  return 0;
}
