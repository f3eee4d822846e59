#include "sim/cluster/router.h"

#include <algorithm>

#include "sim/core/error.h"

namespace capsim {
namespace {

class RoundRobin : public Router {
 public:
  std::uint32_t route(Request&, const std::vector<std::unique_ptr<Replica>>& rs) override {
    const auto i = static_cast<std::uint32_t>(next_ % rs.size());
    ++next_;
    return i;
  }

 private:
  std::uint64_t next_ = 0;
};

// Fewest unfinished requests sent (in the front end, waiting or running); ties go to the
// lowest index.
std::uint32_t least_outstanding(const std::vector<std::unique_ptr<Replica>>& rs) {
  std::uint32_t best = 0;
  for (std::uint32_t i = 1; i < rs.size(); ++i) {
    if (rs[i]->routed_load() < rs[best]->routed_load()) best = i;
  }
  return best;
}

class LeastOutstanding : public Router {
 public:
  std::uint32_t route(Request&, const std::vector<std::unique_ptr<Replica>>& rs) override {
    return least_outstanding(rs);
  }
};

// False when replica `x` provably holds at most `best_hit` leading blocks of r's prompt, so
// that asking it cannot change the choice. Its count is a lookup that stops at the first block it
// does not cache, so it exceeds best_hit only if the prompt has more than best_hit blocks to
// look up and block best_hit is cached there: one probe instead of a walk over every block it
// shares (each of a chat's turns walks the whole history on the replica holding it).
bool may_hold_more(const Replica& x, const Request& r, std::int64_t best_hit) {
  if (!x.kv().prefix_caching()) return false;  // it would count 0
  const std::int64_t block = x.limits().block_size;
  if (best_hit >= (r.prompt_tokens - 1) / block) return false;  // at most that many looked up
  return x.may_cache_block(r, best_hit);
}

// The replica holding the longest cached prefix of the prompt, unless it is much busier than
// the least loaded one (more than twice its outstanding requests plus 8), so that one hot
// prefix cannot pile all traffic on one replica. Replicas that cannot win (too busy, or provably
// holding no more than the best so far: may_hold_more) are not asked; the choice is that of
// asking every replica.
class PrefixAware : public Router {
 public:
  std::uint32_t route(Request& r, const std::vector<std::unique_ptr<Replica>>& rs) override {
    const std::uint32_t idle = least_outstanding(rs);
    std::uint32_t best = idle;
    std::int64_t best_hit = rs[idle]->cached_prefix_blocks_keep(r);
    for (std::uint32_t i = 0; i < rs.size(); ++i) {
      if (i == idle) continue;
      if (rs[i]->routed_load() > 2 * rs[idle]->routed_load() + 8) continue;
      if (!may_hold_more(*rs[i], r, best_hit)) continue;
      const std::int64_t hit = rs[i]->cached_prefix_blocks_keep(r);
      if (hit > best_hit) {
        best = i;
        best_hit = hit;
      }
    }
    return best;
  }
};

// Mixed fleets: a request whose whole sequence (prompt + output) would take more than an eighth
// of the smallest replica's KV cache goes to the replicas with the largest KV cache; the rest go
// to the others (all of them when the fleet is uniform). Within a class, fewest outstanding.
// Long requests on small cards crowd out many short ones and get preempted; this keeps each
// kind on the cards that serve it best without a tuning knob.
class SizeAware : public Router {
 public:
  std::uint32_t route(Request& r, const std::vector<std::unique_ptr<Replica>>& rs) override {
    std::int64_t smallest = rs[0]->kv().num_blocks(), largest = smallest;
    for (const auto& x : rs) {
      smallest = std::min(smallest, x->kv().num_blocks());
      largest = std::max(largest, x->kv().num_blocks());
    }
    const std::int64_t block = rs[0]->limits().block_size;
    const bool long_request = (r.prompt_tokens + r.output_tokens) * 8 > smallest * block;
    const bool uniform = smallest == largest;
    std::int64_t best = -1;
    for (std::uint32_t i = 0; i < rs.size(); ++i) {
      const bool big = rs[i]->kv().num_blocks() == largest;
      if (!uniform && big != long_request) continue;
      if (best < 0 || rs[i]->routed_load() < rs[static_cast<std::size_t>(best)]->routed_load()) best = i;
    }
    return static_cast<std::uint32_t>(best);
  }
};

}  // namespace

const std::vector<RouterInfo>& routers() {
  static const std::vector<RouterInfo> table = {
      {"round-robin", "replicas in turn", [] { return std::make_unique<RoundRobin>(); }},
      {"least-outstanding", "fewest unfinished requests",
       [] { return std::make_unique<LeastOutstanding>(); }},
      {"prefix-aware", "longest cached prompt prefix, bounded by load",
       [] { return std::make_unique<PrefixAware>(); }},
      {"size-aware", "long requests to the largest-KV replicas, short ones to the rest",
       [] { return std::make_unique<SizeAware>(); }},
  };
  return table;
}

std::unique_ptr<Router> make_router(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& r : routers()) {
    if (r.name == name) return r.make();
    names.push_back(r.name);
  }
  throw Error("--router: " + unknown_name_message("router", name, names));
}

}  // namespace capsim
