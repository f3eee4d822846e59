// Output files (sim/report/json_output.h): a regular file is replaced atomically; a FIFO, a
// device or the file behind a symlink is written, never replaced. All in a temporary folder.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/report/json_output.h"
#include "tests/support/temp_dir.h"
#include "tests/support/skip.h"

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The names in `dir`, sorted: what a write left beside its target.
std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// While alive, a regular file cannot grow past `bytes` (RLIMIT_FSIZE): write(2) fails with
// EFBIG instead of raising SIGXFSZ. Makes a write fail after its temporary exists, which
// permissions cannot do for root.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved_;
    limited.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("output: a regular file is replaced whole, no temporary left", "[report][output]") {
  capsim_test::TempDir dir("out");
  const std::string f = dir.write("r.json", "old contents that are longer than the new ones\n");
  capsim::write_text_file(f, "new\n", "--json");
  CHECK(slurp(f) == "new\n");
  capsim::write_json(dir.file("fresh.json"), nlohmann::json{{"a", 1}});
  CHECK(slurp(dir.file("fresh.json")) == "{\n  \"a\": 1\n}\n");
  CHECK(entries(dir.path()) == std::set<std::string>{"fresh.json", "r.json"});
  // Created as any file opened for writing is: 0666 less the umask (not a temporary's 0600).
  const mode_t umask_now = ::umask(0);
  ::umask(umask_now);
  struct stat st {};
  REQUIRE(::stat(dir.file("fresh.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0666 & ~umask_now));
}

TEST_CASE("output: a link planted under the old temporary's name redirects nothing", "[report][output]") {
  // Before: PATH.partial was opened following links and renamed over PATH, so this link made the
  // write overwrite the victim and turned out.json into a link to it.
  capsim_test::TempDir dir("out");
  const std::string victim = dir.write("victim", "precious\n");
  const std::string out = dir.file("out.json");
  fs::create_symlink(victim, out + ".partial");
  capsim::write_text_file(out, "{\"new\": true}\n", "--json");
  CHECK(slurp(victim) == "precious\n");
  CHECK(fs::is_regular_file(fs::symlink_status(out)));
  CHECK(slurp(out) == "{\"new\": true}\n");
  CHECK(fs::is_symlink(fs::symlink_status(out + ".partial")));  // left as planted, unused
  CHECK(entries(dir.path()) == std::set<std::string>{"out.json", "out.json.partial", "victim"});
}

TEST_CASE("output: a write that fails leaves the old file and no temporary", "[report][output]") {
  capsim_test::TempDir dir("out");
  const std::string f = dir.write("r.json", "old\n");
  {
    const FileSizeLimit limit(16);  // the new text is 64 bytes: its write fails part-way
    try {
      capsim::write_text_file(f, std::string(63, 'x') + "\n", "--json");
      FAIL("no error");
    } catch (const capsim::Error& e) {
      CHECK(std::string(e.what()) == "--json: cannot write " + f + ": " + std::strerror(EFBIG));
    }
  }
  CHECK(slurp(f) == "old\n");
  CHECK(entries(dir.path()) == std::set<std::string>{"r.json"});
}

TEST_CASE("output: a symlink is followed, the link stays and its target gets the text",
          "[report][output]") {
  capsim_test::TempDir dir("out");
  const std::string target = dir.write("sub/target.json", "old\n");
  const std::string link = dir.file("link.json");
  fs::create_symlink("sub/target.json", link);  // relative, as users make them
  capsim::write_text_file(link, "new\n", "--json");
  CHECK(fs::is_symlink(fs::symlink_status(link)));
  CHECK(slurp(target) == "new\n");
  CHECK(entries(dir.path()) == std::set<std::string>{"link.json", "sub"});
  CHECK(entries(dir.file("sub")) == std::set<std::string>{"target.json"});
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
  CHECK(entries(dir.path()) == std::set<std::string>{"pipe"});  // nothing created beside it
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

TEST_CASE("outputs: check_outputs refuses what could not be written, naming the flag", "[report][output]") {
  capsim_test::TempDir dir("out");
  const std::string file = dir.write("file", "x");
  const auto refusal = [](const std::vector<capsim::OutputRequest>& outputs) -> std::string {
    try {
      capsim::check_outputs(outputs);
    } catch (const capsim::Error& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(refusal({{"--json", dir.file("missing/x.json")}}) ==
        "--json: cannot write " + dir.file("missing/x.json") + ": folder " + dir.file("missing") + " does not exist");
  CHECK(refusal({{"--csv", file + "/x.csv"}}) == "--csv: cannot write " + file + "/x.csv: " + file + " is not a folder");
  CHECK(refusal({{"--report", dir.path()}}) == "--report: cannot write " + dir.path() + ": is a directory");
  // One file by two names: a path through "." and a link to a file not made yet.
  fs::create_symlink(dir.file("new.json"), dir.file("link.json"));
  CHECK(refusal({{"--json", dir.file("new.json")}, {"--report", dir.path() + "/./link.json"}}) ==
        "--report: cannot write " + dir.path() + "/./link.json: --json writes the same file (" + dir.file("new.json") +
            "); each output needs a file of its own");
  // An existing file is one by its inode, whatever the path.
  const std::string round_about = dir.path() + "/../" + fs::path(dir.path()).filename().string() + "/file";
  CHECK(refusal({{"--json", file}, {"--junit", round_about}}) ==
        "--junit: cannot write " + round_about + ": --json writes the same file (" + file +
            "); each output needs a file of its own");
  CHECK(refusal({{"--json", "-"}, {"--junit", "-"}}) ==
        "--junit: cannot write - (stdout): --json writes there too; each output needs a file of its own");
  // Accepted: distinct files, an existing one (replaced by a rename: its folder's permission is
  // what counts), flags not given, and a device several outputs may share.
  CHECK(refusal({{"--json", file}, {"--report", dir.file("r.html")}, {"--plot", ""}}) == "accepted");
  if (fs::exists("/dev/null")) CHECK(refusal({{"--json", "/dev/null"}, {"--report", "/dev/null"}}) == "accepted");
  CHECK(entries(dir.path()) == std::set<std::string>{"file", "link.json"});  // the check writes nothing
}

TEST_CASE("outputs: an OutputSet writes every output, or none when one fails", "[report][output]") {
  capsim_test::TempDir dir("out");
  const std::string kept = dir.write("kept.json", "old\n");
  SECTION("all written") {
    capsim::OutputSet outputs;
    outputs.add_json(dir.file("a.json"), nlohmann::json{{"a", 1}});
    outputs.add("--report", kept, "new\n");
    outputs.add("--plot", "", "not asked for");
    outputs.commit();
    CHECK(slurp(dir.file("a.json")) == "{\n  \"a\": 1\n}\n");
    CHECK(slurp(kept) == "new\n");
    CHECK(entries(dir.path()) == std::set<std::string>{"a.json", "kept.json"});
  }
  SECTION("the last output fails: the new file is not made, the old one keeps its text") {
    if (!fs::exists("/dev/full")) {
      CAPSIM_SKIP("no /dev/full on this system");
    }
    capsim::OutputSet outputs;
    outputs.add_json(dir.file("a.json"), nlohmann::json{{"a", 1}});
    outputs.add("--report", kept, "new\n");
    outputs.add("--junit", "/dev/full", "<testsuites/>\n");  // opens, then refuses the write (ENOSPC)
    try {
      outputs.commit();
      FAIL("no error");
    } catch (const capsim::Error& e) {
      CHECK(std::string(e.what()) == std::string("--junit: cannot write /dev/full: ") + std::strerror(ENOSPC));
    }
    CHECK(slurp(kept) == "old\n");
    CHECK(entries(dir.path()) == std::set<std::string>{"kept.json"});
  }
  SECTION("a temporary that cannot be written fully: none of the set is renamed into place") {
    capsim::OutputSet outputs;
    outputs.add("--report", kept, "new\n");
    outputs.add_json(dir.file("a.json"), nlohmann::json{{"long", std::string(100, 'x')}});
    {
      const FileSizeLimit limit(16);
      CHECK_THROWS_AS(outputs.commit(), capsim::Error);
    }
    CHECK(slurp(kept) == "old\n");
    CHECK(entries(dir.path()) == std::set<std::string>{"kept.json"});
  }
}
