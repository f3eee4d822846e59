// The command outputs embedded in the docs (`<!-- capsim-output: ARGS -->` followed by a
// ```text block) are exactly what `capsim ARGS` prints now: a doc whose numbers drift from the
// commands it shows fails here. Regenerate with `python3 scripts/update_docs.py`.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/check/cli_run.h"

namespace {

struct Block {
  std::string doc, args, expected;
  int line = 0;
};

std::vector<Block> blocks(const std::string& doc) {
  std::ifstream in(std::string(CAPSIM_DATA_DIR) + "/" + doc);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<Block> out;
  const std::string open = "<!-- capsim-output: ", close = " -->";
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind(open, 0) != 0 || l.size() < open.size() + close.size() ||
        l.compare(l.size() - close.size(), close.size(), close) != 0 || lines[i + 1] != "```text") {
      continue;
    }
    Block b{doc, l.substr(open.size(), l.size() - open.size() - close.size()), "", static_cast<int>(i + 1)};
    for (std::size_t k = i + 2; k < lines.size() && lines[k] != "```"; ++k) b.expected += lines[k] + "\n";
    out.push_back(b);
  }
  return out;
}

}  // namespace

TEST_CASE("docs: every embedded command output is what the command prints now", "[docs][cli][slow]") {
  std::vector<Block> all;
  for (const char* doc : {"docs/scenarios.md", "docs/planning.md"}) {
    const auto b = blocks(doc);
    all.insert(all.end(), b.begin(), b.end());
  }
  REQUIRE(all.size() >= 4);  // the docs show at least these commands' output
  for (const Block& b : all) {
    INFO(b.doc << ":" << b.line << ": capsim " << b.args << " (regenerate: python3 scripts/update_docs.py)");
    const auto r = capsim_test::run_capsim(b.args);
    std::string got = r.out;
    while (!got.empty() && got.back() == '\n') got.pop_back();
    got += "\n";
    CHECK(got == b.expected);
  }
}
