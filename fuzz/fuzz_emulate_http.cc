// HTTP requests as `capsim emulate` receives them, through to the bytes of its answer: Beast's
// request parser with the emulator's header limit, the request path (sim/emulate/request_path.h:
// the guard and the route), then a POST body's parsing and planning as the parse thread and the
// I/O thread run them. Every refusal must be a JSON error body with its status (vLLM's shape or
// FastAPI's {"detail": ...}); a client's input never earns a 5xx or an exception.
#include <boost/beast/http.hpp>

#include "fuzz/fuzz_http_support.h"
#include "fuzz/fuzz_support.h"
#include "sim/core/rng.h"
#include "sim/emulate/request_path.h"
#include "sim/workload/distributions.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace emulate = capsim::emulate;
  const auto parsed = capsim::fuzz::parse_http_request(data, size, std::size_t{4} << 20);
  if (!parsed) return 0;  // Beast refused it: the server answers 400 and closes
  const auto& req = *parsed;
  const auto check = [](const emulate::Reply& r) {
    const nlohmann::json j = nlohmann::json::parse(r.body);  // throws (a finding) when not JSON
    const bool shaped = j.is_object() && (j.contains("detail") || (j.contains("error") && j["error"].value("code", 0) == r.status));
    if (r.status >= 500 || !shaped) {
      std::fprintf(stderr, "capsim fuzz: answer %d for client input: %s\n", r.status, r.body.c_str());
      std::abort();
    }
  };
  static const capsim::Distribution natural = capsim::Distribution::fixed(100, capsim::Distribution::Unit::kTokens);
  capsim::fuzz::expect_clean([&] {
    capsim::http::GuardPolicy policy;
    policy.auth_token = req.count("x-fuzz-token") ? "fuzz" : "";
    const emulate::Front front = emulate::emulate_front(req, policy);
    if (front.refusal) return check(*front.refusal);
    if (front.route != emulate::Route::kChat && front.route != emulate::Route::kCompletions) return;
    const auto endpoint = front.route == emulate::Route::kChat ? emulate::Endpoint::kChat : emulate::Endpoint::kCompletions;
    const emulate::ParseOutcome p = emulate::parse_request(endpoint, req.body());
    if (p.error) return check(emulate::error_reply(*p.error));
    capsim::Rng rng(1);
    const emulate::PlanOutcome plan = emulate::plan_request(*p.request, "llama-3.1-8b", 4096, natural, rng);
    if (plan.error) return check(emulate::error_reply(*plan.error));
  });
  return 0;
}
