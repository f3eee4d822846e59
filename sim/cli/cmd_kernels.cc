// `capsim kernels`: a card's measured kernel tables (calibration/kernels/<card>/), and kernel
// times of given shapes from those tables and from the roofline, side by side: the component
// check of docs/validation.md#kernels (scripts/kernel_validation.py) runs on it.
#include <fstream>
#include <iostream>
#include <iterator>

#include "sim/answers/kernels_answer.h"
#include "sim/cli/commands.h"
#include "sim/core/error.h"
#include "sim/report/json_output.h"

namespace capsim::cli {
namespace {

struct KernelsOptions {
  answers::KernelsRequest request;
  std::string shapes;  // CSV with columns n, k, m (others ignored); "-" = stdin
  std::string json;    // also write JSON here ("-" = stdout only)
};

int run_kernels(KernelsOptions o) {
  if (o.shapes == "-") {
    o.request.shapes_csv = std::string(std::istreambuf_iterator<char>(std::cin), {});
    o.request.shapes_where = "stdin";
  } else if (!o.shapes.empty()) {
    std::ifstream in(o.shapes, std::ios::binary);
    if (!in) throw Error("--shapes: cannot read " + o.shapes);
    o.request.shapes_csv = std::string(std::istreambuf_iterator<char>(in), {});
    o.request.shapes_where = o.shapes;
  }
  const answers::KernelsAnswer a = answers::answer_kernels(o.request);
  if (o.json != "-") std::cout << a.text;
  if (!o.json.empty()) write_json(o.json, a.json);
  return 0;
}

}  // namespace

void add_kernels_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<KernelsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kernels", "a card's measured kernel tables, and GEMM times from them and from the roofline");
  cmd->footer(
      "examples:\n"
      "  capsim kernels --card h100-sxm\n"
      "  capsim kernels --card h100-sxm --dtype fp8 --shapes shapes.csv   # CSV with columns n,k,m\n"
      "  capsim kernels --card l40s --table fit.csv --shapes held_out.csv");
  cmd->add_option("--card", opts->request.card, "card name")->capture_default_str();
  cmd->add_option("--engine", opts->request.engine, "engine profile whose efficiency scales the roofline uses")
      ->capture_default_str();
  cmd->add_option("--dtype", opts->request.dtype, "GEMM precision: bf16, fp8, nvfp4")->capture_default_str();
  cmd->add_option("--table", opts->request.table, "a measured GEMM table file to use instead of the card's");
  cmd->add_option("--shapes", opts->shapes,
                  "CSV of GEMM shapes (columns n, k, m; '-' = stdin): prints roofline and table times in us");
  cmd->add_option("--json", opts->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([opts, &exit_code] { exit_code = run_kernels(*opts); });
}

}  // namespace capsim::cli
