// plan::search_routers searches an option's routers together and stops the searches that can no
// longer win. It must give exactly what the routers' own searches (search_whole_cluster, one per
// router, the winner the fewest replicas, ties to the lower index) give: the same winner, replica
// count, best and below runs, and for every router either its own answer or a count it misses
// with that is below its own answer. Checked on every pass/fail pattern of two routers over 1..6
// replicas (monotone or not: the cuts must not rely on more replicas never being worse) and of
// three routers over 1..4, from every start; a wrong cut (one that dropped a winner) fails here.
#include <catch2/catch.hpp>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/plan/search.h"

namespace {

using capsim::plan::Evaluation;

// Router r meets the SLOs with n replicas when bit (n - 1) of pattern[r] is set.
Evaluation fake(const std::vector<unsigned>& pattern, std::size_t r, int n) {
  Evaluation e;
  e.replicas = n;
  e.verdict.met = (pattern[r] >> (n - 1)) & 1u;
  // Tells the runs apart; one replica is the same run behind every router (as in the simulation).
  e.result.arrived = 1000 * n + (n == 1 ? 0 : static_cast<std::int64_t>(r));
  return e;
}

struct Own {
  bool found = false;
  std::size_t router = 0;
  capsim::plan::ReplicaSearch search;
  std::vector<int> answers;  // 0: none within max
};

// The routers' own searches, one after another, and the pick the planner made from them.
Own own_searches(const std::vector<unsigned>& pattern, int start, int max_replicas) {
  Own out;
  const capsim::scenario::ScenarioSpec unused;
  std::vector<capsim::plan::ReplicaSearch> per;
  for (std::size_t r = 0; r < pattern.size(); ++r) {
    per.push_back(capsim::plan::search_whole_cluster(unused, start, max_replicas, std::nullopt, 1,
                                                     [&](int n) { return fake(pattern, r, n); }));
    out.answers.push_back(per.back().found ? per.back().best.replicas : 0);
  }
  for (std::size_t r = 0; r < per.size(); ++r) {
    if (per[r].found && (!out.found || per[r].best.replicas < per[out.router].best.replicas)) {
      out.found = true;
      out.router = r;
    }
  }
  out.search = std::move(per[out.found ? out.router : 0]);
  return out;
}

void check_all(std::size_t routers, int max_replicas, bool shared_one) {
  const unsigned patterns = 1u << max_replicas;
  std::vector<unsigned> pattern(routers, 0);
  std::int64_t cases = 0, cut = 0;
  for (std::uint64_t code = 0; code < static_cast<std::uint64_t>(std::pow(patterns, routers)); ++code) {
    std::uint64_t c = code;
    for (std::size_t r = 0; r < routers; ++r) {
      pattern[r] = static_cast<unsigned>(c % patterns);
      c /= patterns;
    }
    if (shared_one) {
      // One replica is the same run behind every router: the same verdict.
      bool same = true;
      for (std::size_t r = 1; r < routers; ++r) same = same && (pattern[r] & 1u) == (pattern[0] & 1u);
      if (!same) continue;
    }
    for (int start = 1; start <= max_replicas; ++start) {
      const Own own = own_searches(pattern, start, max_replicas);
      std::atomic<int> calls{0};
      const capsim::plan::RoutersSearch got = capsim::plan::search_routers(
          routers, start, max_replicas,
          [&](std::size_t r, int n) {
            ++calls;
            return fake(pattern, r, n);
          },
          shared_one, static_cast<unsigned>(start % 2 + 1));
      ++cases;
      INFO("patterns " << pattern[0] << "," << pattern[1] << (routers > 2 ? "," + std::to_string(pattern[2]) : "")
                       << " start " << start << " max " << max_replicas);
      REQUIRE(got.found == own.found);
      REQUIRE(got.evaluations == calls.load());
      REQUIRE(got.routers.size() == routers);
      if (own.found) {
        REQUIRE(got.router == own.router);
        REQUIRE(got.search.best.replicas == own.search.best.replicas);
        REQUIRE(got.search.best.result.arrived == own.search.best.result.arrived);
        REQUIRE(got.search.below.has_value() == own.search.below.has_value());
        if (own.search.below) REQUIRE(got.search.below->result.arrived == own.search.below->result.arrived);
      } else {
        // None found: routers[0]'s last run, as the planner kept before.
        REQUIRE(got.search.best.replicas == own.search.best.replicas);
      }
      for (std::size_t r = 0; r < routers; ++r) {
        const capsim::plan::RouterOutcome& o = got.routers[r];
        if (o.at_least == 0) {
          REQUIRE(o.replicas == own.answers[r]);
        } else {
          ++cut;
          // Cut: its own search would have needed at least at_least replicas (or found none),
          // at least the winner's, and as many only when it comes after the winner (ties go to
          // the lower index).
          REQUIRE(own.found);
          REQUIRE((own.answers[r] == 0 || own.answers[r] >= o.at_least));
          REQUIRE(o.at_least >= own.search.best.replicas);
          if (o.at_least == own.search.best.replicas) REQUIRE(r > own.router);
        }
      }
    }
  }
  CHECK(cases > 0);
  CHECK(cut > 0);  // the cuts happened, so the checks above were exercised
}

}  // namespace

TEST_CASE("search_routers: the routers' own searches' winner, on every pattern of two routers", "[plan][search]") {
  check_all(2, 6, false);
  check_all(2, 6, true);
}

TEST_CASE("search_routers: the same on every pattern of three routers", "[plan][search]") {
  check_all(3, 4, false);
  check_all(3, 4, true);
}

TEST_CASE("search_routers: the RTX 3090 TP2 chatbot case stops the losing router early", "[plan][search]") {
  // Measured on the 500-user chatbot (full plan, before this search): prefix-aware needs 4
  // replicas, least-outstanding 31 of at most 32 (max-cards 64 / TP 2), from the estimate 3.
  // Own searches: prefix-aware 3, 4 (2 runs); least-outstanding 3, 4, 5, 7, 11, 19, 32, then
  // bisecting 25, 28, 30, 31 (11 runs) = 13. Together: 3 and 4 behind both (4 runs), then
  // least-outstanding is cut (it misses with 4, prefix-aware meets them with 4: it needs >= 5).
  const std::vector<unsigned> pattern = {~0u << 30, ~0u << 3};  // bit n-1: meets with n replicas
  int calls = 0;
  const capsim::plan::RoutersSearch got = capsim::plan::search_routers(
      2, 3, 32, [&](std::size_t r, int n) { ++calls; return fake(pattern, r, n); }, true, 1);
  REQUIRE(got.found);
  CHECK(got.router == 1);
  CHECK(got.search.best.replicas == 4);
  REQUIRE(got.search.below.has_value());
  CHECK(got.search.below->replicas == 3);
  CHECK(calls == 4);
  CHECK(got.routers[0].at_least == 5);
  CHECK(got.routers[1].replicas == 4);
  const Own own = own_searches(pattern, 3, 32);
  CHECK(own.answers[0] == 31);
  CHECK(own.answers[1] == 4);
}
