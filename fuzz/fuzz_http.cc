// HTTP requests as `capsim serve` receives them: the bytes go through Beast's request parser with
// the server's header and body limits, then, when a whole request parsed, through the server's
// routing and request validation (sim/server/api.h: prepare builds the scenario and checks the
// limits; nothing is simulated). HttpError and capsim::Error are the intended answers to bad
// input; anything else escaping is a finding.
#include <boost/beast/http.hpp>

#include "fuzz/fuzz_support.h"
#include "sim/scenario/catalogues.h"
#include "sim/server/api.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace http = boost::beast::http;
  static const bool once = (capsim::scenario::set_data_dir(CAPSIM_DATA_DIR), true);
  (void)once;
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(std::size_t{1} << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  std::size_t used = 0;
  while (used < size && !parser.is_done()) {
    const std::size_t n = parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (ec || n == 0) break;
    used += n;
  }
  // End of input: a body delimited by the connection closing ends here (Beast requires bytes first).
  if (!ec && !parser.is_done() && parser.got_some()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;  // Beast refused it: the server answers 400 and closes
  const auto& req = parser.get();
  const std::string target(req.target());
  capsim::fuzz::expect_clean([&] {
    try {
      const capsim::server::Endpoint e =
          capsim::server::route(std::string(req.method_string()), target.substr(0, target.find('?')));
      if (capsim::server::runs_on_pool(e)) (void)capsim::server::prepare(e, req.body(), capsim::server::Limits{});
    } catch (const capsim::server::HttpError& x) {
      if (x.status() < 400 || x.status() > 499) {
        std::fprintf(stderr, "capsim fuzz: status %d for client input: %s\n", x.status(), x.what());
        std::abort();
      }
    }
  });
  return 0;
}
