// Routers: which replica an arriving request goes to. One table (router.cc) of named policies.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/engine/replica.h"

namespace capsim {

class Router {
 public:
  virtual ~Router() = default;
  // REQUIRES: !replicas.empty(). Deterministic given the same history. May fill `r`'s
  // block-hash cache (Request::block_hashes); nothing else of `r` changes.
  virtual std::uint32_t route(Request& r, const std::vector<std::unique_ptr<Replica>>& replicas) = 0;
};

struct RouterInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Router>()> make;
};
const std::vector<RouterInfo>& routers();
std::unique_ptr<Router> make_router(const std::string& name);  // throws with accepted names

}  // namespace capsim
