#include "sim/core/threads.h"

#include <cstdlib>
#include <thread>

namespace capsim {

unsigned default_threads() {
  if (const char* env = std::getenv("CAPSIM_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return static_cast<unsigned>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? hw : 1;
}

}  // namespace capsim
