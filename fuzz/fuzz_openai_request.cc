// The OpenAI-compatible request bodies `capsim emulate` parses (sim/emulate/openai_protocol.h):
// the first byte picks the endpoint (even: /v1/completions, odd: /v1/chat/completions), the
// rest is the body. A malformed body must come back as an ApiError (HTTP 400/404 with the
// field named), never an exception; a parsed request is then planned against a served model.
#include "fuzz/fuzz_support.h"
#include "sim/core/rng.h"
#include "sim/emulate/openai_protocol.h"
#include "sim/workload/distributions.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto endpoint = data[0] % 2 == 0 ? capsim::emulate::Endpoint::kCompletions
                                         : capsim::emulate::Endpoint::kChat;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const capsim::Distribution natural =
      capsim::Distribution::fixed(100, capsim::Distribution::Unit::kTokens);
  capsim::fuzz::expect_clean([&] {
    const capsim::emulate::ParseOutcome p = capsim::emulate::parse_request(endpoint, body);
    if (p.request) {
      capsim::Rng rng(1);
      (void)capsim::emulate::plan_request(*p.request, "llama-3.1-8b", 4096, natural, rng);
    }
  });
  return 0;
}
