// What `capsim serve` accepts of a request body before any work (sim/server/api.h prepare()):
// runs past the run limits are 422, driven here without the transport.
#include <catch2/catch.hpp>
#include <string>

#include "sim/server/api.h"

namespace {

using capsim::server::Endpoint;
using capsim::server::HttpError;
using capsim::server::Limits;
using capsim::server::prepare;

// The HttpError prepare() throws for `body` at `e` (status 0 when it prepared a job).
HttpError refusal(Endpoint e, const std::string& body) {
  try {
    (void)prepare(e, body, Limits{});
  } catch (const HttpError& x) {
    return x;
  }
  return HttpError(0, "prepared");
}

}  // namespace

TEST_CASE("server prepare: a CPU KV tier whose bookkeeping passes the run limits is 422 naming the field",
          "[server][limits][offload]") {
  // 1e5 GiB of Llama-3.1-8B's 2 MiB blocks: 51,200,000 blocks, 4.00 GiB of bookkeeping when full
  // (over the 2 GiB limit); a 20-request run of it took the server from 16 MB to 1.4 GB.
  const HttpError big = refusal(Endpoint::kSimulate, R"({"model": "llama-3.1-8b", "engine": {"kv_offloading_size": 100000},
                                                         "workload": {"rate": 5, "requests": 20}})");
  CHECK(big.status() == 422);
  CHECK_THAT(big.what(), Catch::Contains("engine.kv_offloading_size: 100000 GiB is 51200000 CPU KV blocks per "
                                         "replica, x 1 replica: 4.0"));
  CHECK_THAT(big.what(), Catch::Contains("the server's limit (docs/server.md#limits)"));
  // 8 GiB is 4096 blocks: prepared.
  CHECK(refusal(Endpoint::kSimulate, R"({"model": "llama-3.1-8b", "engine": {"kv_offloading_size": 8},
                                         "workload": {"rate": 5, "requests": 20}})")
            .status() == 0);
}
