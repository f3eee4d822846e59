#include "sim/core/run_limits.h"

#include <atomic>
#include <string>

#include "sim/core/checked.h"
#include "sim/core/error.h"

namespace capsim {
namespace {

std::atomic<bool>& lifted() {
  static std::atomic<bool> flag{false};
  return flag;
}

const char* noun(RunLimit kind) {
  switch (kind) {
    case RunLimit::kRequests: return "requests";
    case RunLimit::kUsers: return "users";
    case RunLimit::kReplicas: return "replicas";
    case RunLimit::kCards: return "cards";
  }
  return "";
}

// In RunLimit order.
std::atomic<std::int64_t>* limits() {
  static std::atomic<std::int64_t> values[] = {2'000'000, 1'000'000, 1'000, 8'192};
  return values;
}

}  // namespace

std::int64_t run_limit(RunLimit kind) { return limits()[static_cast<int>(kind)]; }

void set_run_limit(RunLimit kind, std::int64_t limit) { limits()[static_cast<int>(kind)] = limit; }

void lift_run_limits() { lifted() = true; }
bool run_limits_lifted() { return lifted(); }

void check_run_limit(RunLimit kind, double asked, std::string_view where) {
  if (lifted() || asked <= static_cast<double>(run_limit(kind))) return;
  throw Error(std::string(where) + ": " + checked::show(asked) + " " + noun(kind) +
              " is more than one run may ask for (at most " + std::to_string(run_limit(kind)) +
              " " + noun(kind) + "; such a run takes minutes and gigabytes); pass --allow-large " +
              "to run it anyway");
}

}  // namespace capsim
