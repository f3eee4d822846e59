#include "sim/cli/allocator_tuning.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__) && defined(__linux__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#define CAPSIM_TUNE_GLIBC_MALLOC 1
#endif

namespace capsim::cli {

const char* const kAllocatorTuningOptOut = "CAPSIM_MALLOC_TUNING";

namespace {

constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

}  // namespace

bool built_with_sanitizer() { return kSanitized; }

AllocatorTuning tune_allocator() {
  AllocatorTuning done;
#ifdef CAPSIM_TUNE_GLIBC_MALLOC
  if (kSanitized) return done;
  if (const char* opt = std::getenv(kAllocatorTuningOptOut); opt != nullptr && std::strcmp(opt, "off") == 0) {
    return done;
  }
  constexpr int kMiB = 1 << 20;
  done.thresholds_set = mallopt(M_MMAP_THRESHOLD, 256 * kMiB) == 1 && mallopt(M_TRIM_THRESHOLD, 256 * kMiB) == 1 &&
                        mallopt(M_TOP_PAD, 64 * kMiB) == 1;
  if (!done.thresholds_set) return done;
  // Below the mmap threshold, this block comes from the main heap, which grows past it by the
  // top pad; freed, it rejoins the heap's top and stays (below the trim threshold), so
  // [block, current break) is heap that malloc hands out from now on. Only its first page is
  // touched. If the heap could not grow (the block was mmapped elsewhere), the range is empty.
  void* block = std::malloc(128 * kMiB);
  if (block == nullptr) return done;
  const auto start = reinterpret_cast<std::uintptr_t>(block);
  std::free(block);
  constexpr std::uintptr_t kHugePage = 2 * kMiB;
  const std::uintptr_t lo = (start + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t hi = reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~(kHugePage - 1);
  if (hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0) {
    done.huge_page_bytes = hi - lo;
  }
#endif
  return done;
}

}  // namespace capsim::cli
