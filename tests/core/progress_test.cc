// ProgressLine (sim/core/progress.h): in place on a terminal; whole lines, at most one per
// interval, anywhere else (CI logs), so lines never run together.
#include "sim/core/progress.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  return out;
}

}  // namespace

TEST_CASE("progress: a non-terminal gets whole lines, no carriage returns", "[core][progress]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    capsim::ProgressLine p(f, 0.0, 0);  // interval 0: every update is a line
    p.update("a 1/3");
    p.update("a 2/3");
    p.finish("a 3/3");
  }
  CHECK(contents(f) == "a 1/3\na 2/3\na 3/3\n");
  std::fclose(f);
}

TEST_CASE("progress: a non-terminal prints at most one line per interval", "[core][progress]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    capsim::ProgressLine p(f, 3600.0, 0);  // an hour: only the first update and the final line
    for (int i = 0; i < 100; ++i) p.update("step " + std::to_string(i));
    p.finish("done");
  }
  CHECK(contents(f) == "step 0\ndone\n");
  std::fclose(f);
}

TEST_CASE("progress: a terminal line is rewritten in place and ended once", "[core][progress]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    capsim::ProgressLine p(f, 3600.0, 1);
    p.update("x 1");
    p.update("x 2");
  }  // destroyed without finish(): the open line still gets its newline
  CHECK(contents(f) == "\rx 1\033[K\rx 2\033[K\n");
  std::fclose(f);
}
