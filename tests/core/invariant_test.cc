// Invariant checks (sim/core/invariant.h): on in Debug, sanitizer and fuzz builds, where a
// broken one aborts with what broke; compiled out of Release builds. Each case runs the check
// in a forked child and looks at how the child ended.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "sim/core/invariant.h"
#include "sim/engine/kv_block_manager.h"

namespace {

// Runs `f` in a child with stderr silenced; returns its wait status.
template <typename F>
int in_child(F&& f) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stderr);  // the child's own stream, not the file
    f();
    std::_Exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

bool aborted(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT; }

}  // namespace

TEST_CASE("invariants: a broken one aborts where they are compiled in, costs nothing elsewhere",
          "[core][invariant]") {
  const int status = in_child([] { CAPSIM_INVARIANT(1 + 1 == 3, "arithmetic"); });
  if (CAPSIM_INVARIANTS_ON) {
    CHECK(aborted(status));
  } else {
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  CHECK(WIFEXITED(in_child([] { CAPSIM_INVARIANT(1 + 1 == 2, "arithmetic"); })));
  CHECK(aborted(in_child([] { capsim::invariant_failed("x", "always", __FILE__, __LINE__); })));
}

TEST_CASE("invariants: KV block accounting stays consistent through hits, evictions and releases",
          "[core][invariant][kv]") {
  capsim::KvBlockManager kv(8, true);
  std::vector<std::int32_t> a, b;
  REQUIRE(kv.allocate(3, a));
  const std::uint64_t hashes[] = {11, 12};
  kv.register_block(a[0], hashes[0]);
  kv.register_block(a[1], hashes[1]);
  CHECK(kv.consistent());
  kv.release(a);
  CHECK(kv.consistent());
  CHECK(kv.used_blocks() == 0);
  REQUIRE(kv.lookup(hashes, 2) == 2);
  kv.take_hits(hashes, 2, b);   // cached blocks leave the free queue
  REQUIRE(kv.allocate(6, b));   // every other block, evicting nothing still held
  CHECK(kv.used_blocks() == 8);
  CHECK(kv.consistent());
  CHECK_FALSE(kv.allocate(1, b));
  kv.release(b);
  CHECK(kv.consistent());
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.free_blocks() == 8);
}
