#include "sim/core/allocator_tuning.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__) && defined(__linux__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#define CAPSIM_TUNE_GLIBC_MALLOC 1
#endif

namespace capsim {

namespace {

constexpr const char* kAllocatorTuningOptOut = "CAPSIM_MALLOC_TUNING";

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

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::uintptr_t kHugePage = 2 * kMiB;
constexpr std::uintptr_t kPage = 4096;

// Set once tune_allocator has set the thresholds: the thread heaps follow only then.
std::atomic<bool> g_tuned{false};

// The rest of glibc's first heap, taken by tune_allocator: kept so that it stays reachable, and
// volatile so that the compiler does not drop an allocation nothing reads.
void* volatile g_first_heap_rest = nullptr;

#ifdef CAPSIM_TUNE_GLIBC_MALLOC
// Marks the whole 2 MiB pages of [lo, hi) MADV_HUGEPAGE; returns the bytes marked and, in
// `from`, where they start.
std::size_t advise_huge(std::uintptr_t lo, std::uintptr_t hi, std::uintptr_t* from = nullptr) {
  lo = (lo + kHugePage - 1) & ~(kHugePage - 1);
  hi &= ~(kHugePage - 1);
  if (hi <= lo || madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) != 0) return 0;
  if (from != nullptr) *from = lo;
  return hi - lo;
}
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
  constexpr int kThreshold = 256 << 20, kTopPad = 64 << 20;
  done.thresholds_set = mallopt(M_MMAP_THRESHOLD, kThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kThreshold) == 1 &&
                        mallopt(M_TOP_PAD, kTopPad) == 1;
  if (!done.thresholds_set) return done;
  g_tuned = true;
  // The break moves up first, to one 4 KiB page short of a 2 MiB boundary, so the heap that
  // malloc grows from here is whole huge pages from its second page on. Otherwise the part of
  // the heap's first 2 MiB page left above the break (anywhere from nothing to 2 MiB, as the
  // address space is randomised) cannot be a huge page and is faulted in 4 KiB at a time: up to
  // 512 faults of ~12 us each in every run (the issue workload at 10k requests took 250-710
  // faults from one run to the next). The page short of the boundary takes the chunk header
  // glibc writes as the heap grows, before the range can be marked: a 2 MiB range with a page
  // already faulted in stays on 4 KiB pages. glibc sees the gap as another program's sbrk and
  // continues its heap past it; the gap is never touched.
  // Before that, the free rest of glibc's first heap (set up by glibc's own start-up, before
  // any of capsim's code runs) is taken: past the gap, glibc would hand that top chunk to its
  // bins and carve the next small allocations from it, on 4 KiB pages (13 faults of ~150 in a
  // `--requests 1` run). Taken once, never freed and never touched (malloc writes a header
  // before it and one past its end: one page), so those allocations come from the huge-page
  // range. A rest of two pages or less is left alone.
#if __GLIBC_PREREQ(2, 33)
  if (const std::size_t rest = mallinfo2().keepcost; rest > 2 * kPage) g_first_heap_rest = std::malloc(rest - 64);
#endif
  const auto brk_now = reinterpret_cast<std::uintptr_t>(sbrk(0));
  const std::uintptr_t boundary = (brk_now + kPage + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t gap = boundary - kPage - brk_now;
  if (gap > 0) (void)sbrk(static_cast<intptr_t>(gap));
  // Below the mmap threshold, this block comes from the main heap, which grows past it by the
  // top pad; freed, it rejoins the heap's top and stays (below the trim threshold), so
  // [block, current break) is heap that malloc hands out from now on. Only its first page is
  // touched. If the heap could not grow (the block was mmapped elsewhere), the range is empty.
  void* block = std::malloc(128 * kMiB);
  if (block == nullptr) return done;
  const auto start = reinterpret_cast<std::uintptr_t>(block);
  std::free(block);
  done.grown_from = start;
  done.huge_page_bytes = advise_huge(start, reinterpret_cast<std::uintptr_t>(sbrk(0)), &done.huge_from);
#endif
  return done;
}

std::size_t tune_thread_heap() {
#ifdef CAPSIM_TUNE_GLIBC_MALLOC
  thread_local bool done_here = false;
  if (!g_tuned || done_here) return 0;
  done_here = true;
  // A thread arena's heap is at most 64 MiB (glibc's HEAP_MAX_SIZE on 64-bit); 48 MiB leaves room
  // for its header and a new heap is mapped when it does not fit, so the block lies in one
  // mapping of the arena either way.
  constexpr std::size_t kBlock = 48 * kMiB;
  void* block = std::malloc(kBlock);
  if (block == nullptr) return 0;
  const auto start = reinterpret_cast<std::uintptr_t>(block);
  const std::size_t marked = advise_huge(start, start + kBlock);
  std::free(block);
  return marked;
#else
  return 0;
#endif
}

}  // namespace capsim
