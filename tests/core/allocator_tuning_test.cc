// The capsim executable's allocator set-up (sim/core/allocator_tuning.h): what it sets, that the
// output does not change with it, and that a run really faults in fewer pages.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <malloc.h>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim/core/allocator_tuning.h"
#include "tests/check/cli_run.h"

namespace {

// Minor page faults of the children waited for so far (std::system waits for its shell).
long child_minor_faults() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  return u.ru_minflt;
}

// A counter of /proc/vmstat (0 where it cannot be read).
long vmstat(const std::string& name) {
  std::istringstream in(capsim_test::read_all("/proc/vmstat"));
  std::string key;
  long value = 0;
  while (in >> key >> value) {
    if (key == name) return value;
  }
  return 0;
}

bool huge_pages_offered() {
  const std::string thp = capsim_test::read_all("/sys/kernel/mm/transparent_hugepage/enabled");
  return capsim_test::has(thp, "[always]") || capsim_test::has(thp, "[madvise]");
}

}  // namespace

TEST_CASE("allocator tuning: thresholds set, the main heap and a thread's heap on huge pages", "[cli][allocator]") {
  // This test process is as good a glibc process as capsim's; each test case runs in its own,
  // with one difference: the test framework registers its cases before main, and growing its
  // registry frees blocks that stay as holes below the heap's top (about 90 KiB once there were
  // ~570 cases). glibc serves a block from such a hole before the top, so the probe below would
  // land there whatever tune_allocator did. Those holes are filled first (held until the end):
  // while the free bytes outside the top chunk could hold a 90 KiB block, take one.
  struct FreeBlock {
    void operator()(void* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<void, FreeBlock>> hole_fillers;
  for (int k = 0; k < 64; ++k) {
    const struct mallinfo2 m = mallinfo2();
    if (m.fordblks < m.keepcost + (90u << 10)) break;
    hole_fillers.emplace_back(std::malloc(90 << 10));
  }
  // A 100 KiB block freed back to the top of the heap: the top chunk is now at least that big.
  // (Through a volatile pointer: the compiler may drop a malloc that nothing reads.)
  void* volatile block = std::malloc(100 << 10);
  std::free(block);
  const auto done = capsim::tune_allocator();
  // That free rest of the heap below the gap was taken: a 90 KiB block comes from the range
  // grown for the run. (Without it, glibc would carve it from the old top chunk, below.)
  void* after = std::malloc(90 << 10);
  const auto after_at = reinterpret_cast<std::uintptr_t>(after);
  std::free(after);
  if (capsim::built_with_sanitizer()) {
    CHECK_FALSE(done.thresholds_set);
    CHECK(done.huge_page_bytes == 0);
    return;
  }
  CHECK(done.thresholds_set);
  if (huge_pages_offered()) {
    // 128 MiB block + 64 MiB top pad past the old break, both ends rounded in to 2 MiB pages:
    // between 190 and 192 MiB.
    CHECK(done.huge_page_bytes >= std::size_t{190} << 20);
    CHECK(done.huge_page_bytes <= std::size_t{192} << 20);
    // The marked range starts on the heap's second 4 KiB page: the break was moved to a page
    // short of a 2 MiB boundary, so no part of a 2 MiB page is left to 4 KiB faults (without the
    // move, up to 2 MiB were, wherever the randomised break happened to be).
    CHECK(done.huge_from % (std::size_t{2} << 20) == 0);
    CHECK(done.huge_from > done.grown_from);
    CHECK(done.huge_from - done.grown_from < 4096);
  }
  CHECK(after_at >= done.grown_from);
  // A worker thread's own arena: a 48 MiB block, its whole 2 MiB pages marked (46-48 MiB), once.
  std::size_t first = 0, again = 1;
  std::thread worker([&] {
    first = capsim::tune_thread_heap();
    again = capsim::tune_thread_heap();
  });
  worker.join();
  CHECK(again == 0);
  if (huge_pages_offered()) {
    CHECK(first >= std::size_t{46} << 20);
    CHECK(first <= std::size_t{48} << 20);
  }
}

TEST_CASE("allocator tuning: the same output, fewer page faults", "[cli][allocator]") {
  // 3,000 requests of the issue #12 workload: ~16,000 engine steps, a few MiB of records and
  // per-step samples that grow (and, with glibc's defaults, get re-mapped) as the run goes.
  const std::string args =
      "simulate -m llama-2-7b -c a100-80gb-sxm --max-num-seqs 128 --max-num-batched-tokens 2048 "
      "--rate 8 --input-tokens 512 --output-tokens 256 --requests 3000 --seed 5 --json /dev/stdout";
  const long f0 = child_minor_faults();
  const auto plain = capsim_test::run_capsim(args, "CAPSIM_MALLOC_TUNING=off");
  const long f1 = child_minor_faults();
  const long fallback0 = vmstat("thp_fault_fallback");
  const auto tuned = capsim_test::run_capsim(args, "-u CAPSIM_MALLOC_TUNING");
  const long f2 = child_minor_faults();
  // The kernel may fall back to 4 KiB pages (no free 2 MiB block): then the count proves nothing.
  const bool fell_back = vmstat("thp_fault_fallback") != fallback0;
  REQUIRE(plain.status == 0);
  REQUIRE(tuned.status == 0);
  CHECK(tuned.out == plain.out);
  CHECK(tuned.err == plain.err);
  // Counted, not timed: the tuned run keeps what it frees and backs its heap with huge
  // pages, so it faults fewer pages in (measured here, shells included: ~450-610 against ~1,380).
  // Without transparent huge pages the thresholds alone save only ~9% on a run this short, so
  // the count is checked only where the kernel offers them; a sanitizer build tunes nothing.
  const bool huge_pages = huge_pages_offered() && !fell_back;
  if (!huge_pages) WARN("transparent huge pages not offered or not granted here: fault count not checked");
  if (!capsim::built_with_sanitizer() && huge_pages) {
    INFO("minor faults: glibc defaults " << (f1 - f0) << ", tuned " << (f2 - f1));
    CHECK((f2 - f1) * 10 < (f1 - f0) * 9);
  }
}
