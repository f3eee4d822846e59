#include "sim/core/run_limits.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "sim/core/checked.h"
#include "sim/core/error.h"

namespace capsim {
namespace {

std::atomic<bool>& lifted() {
  static std::atomic<bool> flag{false};
  return flag;
}

// "4.00 GiB of KV-cache bookkeeping", "2000000 requests".
std::string amount(RunLimit kind, double n) {
  switch (kind) {
    case RunLimit::kRequests: return checked::show(n) + " requests";
    case RunLimit::kUsers: return checked::show(n) + " users";
    case RunLimit::kReplicas: return checked::show(n) + " replicas";
    case RunLimit::kCards: return checked::show(n) + " cards";
    case RunLimit::kKvBookkeepingBytes: {
      char gib[64];
      std::snprintf(gib, sizeof gib, "%.2f", n / 1073741824.0);
      return std::string(gib) + " GiB of KV-cache bookkeeping";
    }
  }
  return checked::show(n);
}

// In RunLimit order.
std::atomic<std::int64_t>* limits() {
  static std::atomic<std::int64_t> values[] = {2'000'000, 1'000'000, 1'000, 8'192, std::int64_t{2} << 30};
  return values;
}

}  // namespace

std::int64_t run_limit(RunLimit kind) { return limits()[static_cast<int>(kind)]; }

void set_run_limit(RunLimit kind, std::int64_t limit) { limits()[static_cast<int>(kind)] = limit; }

void lift_run_limits() { lifted() = true; }
bool run_limits_lifted() { return lifted(); }

void check_run_limit(RunLimit kind, double asked, std::string_view where) {
  if (lifted() || asked <= static_cast<double>(run_limit(kind))) return;
  throw Error(std::string(where) + ": " + amount(kind, asked) + " is more than one run may ask for (at most " +
              amount(kind, static_cast<double>(run_limit(kind))) + "; such a run takes minutes and gigabytes); " +
              "pass --allow-large to run it anyway");
}

}  // namespace capsim
