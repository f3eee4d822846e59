// The wall clock, for provenance only (when a profile was measured or fitted). Simulated time is
// sim/core/time.h; nothing a simulation computes may read this.
#pragma once

#include <string>

namespace capsim {

// Now, in UTC, as ISO 8601 to the second: "2026-12-06T15:04:05Z".
std::string utc_now();

}  // namespace capsim
