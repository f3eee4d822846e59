// The code stays readable in pieces (issue 34: Replica split along its seams, the cluster,
// plan's search, check's assumptions and the HTTP API split by what they do): no source file
// reaches 700 lines, in the library (sim/) or anywhere else the project writes code (tests,
// bench, fuzz, the CUDA tool, scripts, the web page). Before the splits replica.cc had 997,
// simulation.cc 895, assumptions.cc 939, api.cc 859, search.cc 759, calibration/cuda/kernels.cu
// 1055, scripts/validate.py 1781 and scripts/kernel_validation.py 964.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

constexpr long kMaxLines = 700;

long count_lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  long n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

TEST_CASE("every source file is under 700 lines", "[engine][cluster][layout]") {
  namespace fs = std::filesystem;
  const std::vector<std::string> folders = {"sim", "tests", "bench", "fuzz", "calibration/cuda", "scripts", "web/src"};
  const std::vector<std::string> code = {".cc", ".h", ".cu", ".cuh", ".py", ".mjs", ".js", ".ts", ".sh"};
  std::vector<std::string> too_long;
  std::size_t files = 0, library_files = 0;
  for (const std::string& folder : folders) {
    const fs::path root = fs::path(CAPSIM_DATA_DIR) / folder;
    REQUIRE(fs::is_directory(root));
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
      // Installed packages are not ours.
      if (it->is_directory() && it->path().filename() == "node_modules") {
        it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file()) continue;
      const std::string ext = it->path().extension().string();
      if (std::find(code.begin(), code.end(), ext) == code.end()) continue;
      ++files;
      if (folder == "sim") ++library_files;
      const long n = count_lines(it->path());
      if (n >= kMaxLines) {
        too_long.push_back(fs::relative(it->path(), CAPSIM_DATA_DIR).generic_string() + ": " + std::to_string(n));
      }
    }
  }
  CHECK(library_files >= 250);  // the whole library is counted, not one folder
  CHECK(files >= 450);
  INFO("files of 700 lines or more: " << too_long.size());
  for (const std::string& f : too_long) UNSCOPED_INFO(f);
  CHECK(too_long.empty());
}
