// HTTP requests as `capsim serve` receives them, through to the bytes of the answer: Beast's
// request parser with the server's header and body limits, then the request path the transport
// runs (sim/server/request_path.h: the guard, the route, the GET answers, a POST body's
// validation into a job; nothing is simulated). Every answer that is not a job must be a JSON
// object with its status (the error bodies included: on 64e18c4 a path with a byte that is not
// UTF-8 made the error body throw and the server exit), and a client's input never earns a 5xx.
#include <boost/beast/http.hpp>

#include "fuzz/fuzz_http_support.h"
#include "fuzz/fuzz_support.h"
#include "sim/scenario/catalogues.h"
#include "sim/server/request_path.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool once = (capsim::scenario::set_data_dir(CAPSIM_DATA_DIR), true);
  (void)once;
  const auto parsed = capsim::fuzz::parse_http_request(data, size, std::size_t{1} << 20);
  if (!parsed) return 0;  // Beast refused it: the server answers 400 and closes
  const auto& req = *parsed;
  // The GET answers are the catalogue listings; a placeholder keeps each run short.
  static const std::string listing = "{}\n";
  const auto check_answer = [](const capsim::server::Answer& a) {
    const nlohmann::json j = nlohmann::json::parse(a.body);  // throws (a finding) when not JSON
    if (a.status >= 500 || (a.status >= 400 && (!j.is_object() || j.value("status", 0) != a.status))) {
      std::fprintf(stderr, "capsim fuzz: answer %d for client input: %s\n", a.status, a.body.c_str());
      std::abort();
    }
  };
  capsim::fuzz::expect_clean([&] {
    capsim::http::GuardPolicy policy;
    policy.auth_token = req.count("x-fuzz-token") ? "fuzz" : "";  // both with and without a token
    const capsim::server::Front front =
        capsim::server::front_of(req, policy, [](capsim::server::Endpoint) -> const std::string& { return listing; });
    if (front.answer) return check_answer(*front.answer);
    if (!capsim::server::runs_on_pool(front.endpoint)) return;  // the page's files
    const capsim::server::Prepared p = capsim::server::prepare_or_refuse(front.endpoint, req.body(), capsim::server::Limits{});
    if (p.refusal) check_answer(*p.refusal);
  });
  return 0;
}
