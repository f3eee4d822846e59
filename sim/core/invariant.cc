#include "sim/core/invariant.h"

#include <cstdio>
#include <cstdlib>

namespace capsim {

void invariant_failed(const char* condition, const char* what, const char* file, int line) {
  std::fprintf(stderr, "capsim: internal invariant broken at %s:%d: %s (%s)\n", file, line, what,
               condition);
  std::abort();
}

}  // namespace capsim
