// Output files (sim/report/json_output.h): a regular file is replaced atomically; a FIFO, a
// device or the file behind a symlink is written, never replaced. All in a temporary folder.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

#include "sim/core/error.h"
#include "sim/report/json_output.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("output: a regular file is replaced whole, no .partial left", "[report][output]") {
  capsim_test::TempDir dir("out");
  const std::string f = dir.write("r.json", "old contents that are longer than the new ones\n");
  capsim::write_text_file(f, "new\n", "--json");
  CHECK(slurp(f) == "new\n");
  CHECK_FALSE(fs::exists(f + ".partial"));
  capsim::write_json(dir.file("fresh.json"), nlohmann::json{{"a", 1}});
  CHECK(slurp(dir.file("fresh.json")) == "{\n  \"a\": 1\n}\n");
}

TEST_CASE("output: a symlink is followed; the link stays and its target gets the text",
          "[report][output]") {
  capsim_test::TempDir dir("out");
  const std::string target = dir.write("sub/target.json", "old\n");
  const std::string link = dir.file("link.json");
  fs::create_symlink("sub/target.json", link);  // relative, as users make them
  capsim::write_text_file(link, "new\n", "--json");
  CHECK(fs::is_symlink(fs::symlink_status(link)));
  CHECK(slurp(target) == "new\n");
  CHECK_FALSE(fs::exists(link + ".partial"));
  CHECK_FALSE(fs::exists(target + ".partial"));
  // A dangling link names the file to create.
  const std::string dangling = dir.file("dangling.json");
  fs::create_symlink(dir.file("created.json"), dangling);
  capsim::write_text_file(dangling, "made\n", "--report");
  CHECK(fs::is_symlink(fs::symlink_status(dangling)));
  CHECK(slurp(dir.file("created.json")) == "made\n");
}

TEST_CASE("output: a FIFO is written in place and stays a FIFO", "[report][output]") {
  capsim_test::TempDir dir("out");
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The reader runs beside the writer: opening a FIFO for writing waits for a reader.
  auto reader = std::async(std::launch::async, [&] { return slurp(fifo); });
  capsim::write_text_file(fifo, "through the pipe\n", "--json");
  CHECK(reader.get() == "through the pipe\n");
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));
  CHECK_FALSE(fs::exists(fifo + ".partial"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 1);  // nothing created beside it
}

TEST_CASE("output: a pipe behind /proc's magic links is written in place", "[report][output]") {
  // `capsim simulate --json /dev/stdout | jq`: /dev/stdout -> /proc/self/fd/1 -> "pipe:[N]", a
  // link target that names no file. Here the pipe is this process's own, reached the same way.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::string via_proc = "/proc/self/fd/" + std::to_string(fds[1]);
  if (!fs::exists(via_proc)) {
    ::close(fds[0]);
    ::close(fds[1]);
    WARN("no /proc here: " << via_proc << " not checked");
    return;
  }
  capsim::write_text_file(via_proc, "{\"a\": 1}\n", "--json");  // shorter than a pipe's buffer
  ::close(fds[1]);
  std::string got;
  char buf[64];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  CHECK(got == "{\"a\": 1}\n");
}

TEST_CASE("output: a directory is refused with the flag's name", "[report][output]") {
  capsim_test::TempDir dir("out");
  try {
    capsim::write_text_file(dir.path(), "x", "--report");
    FAIL("no error");
  } catch (const capsim::Error& e) {
    CHECK(std::string(e.what()) == "--report: cannot write " + dir.path() + ": is a directory");
  }
}
