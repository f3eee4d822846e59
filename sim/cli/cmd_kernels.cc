// `capsim kernels`: a card's measured kernel tables (calibration/kernels/<card>/), and kernel
// times of given shapes from those tables and from the roofline, side by side: the component
// check of docs/validation.md#kernels (scripts/kernel_validation.py) runs on it.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/measured_kernels.h"
#include "sim/report/json_output.h"

namespace capsim::cli {
namespace {

struct KernelsOptions {
  std::string card = "h100-sxm";
  std::string engine = "vllm";
  std::string dtype = "bf16";
  std::string table;   // a table file instead of the card's own
  std::string shapes;  // CSV with columns n, k, m (others ignored); "-" = stdin
  std::string json;    // also write JSON here ("-" = stdout only)
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string c;
  while (std::getline(ss, c, ',')) {
    while (!c.empty() && (c.back() == '\r' || c.back() == ' ')) c.pop_back();
    out.push_back(c);
  }
  return out;
}

// Writes the times of every shape in `in` to `out`; throws before anything is printed when a row
// is bad (the caller prints `out` only on success).
void print_shapes(const MeasuredGemmTable& table, const GemmRoofline& roofline, std::istream& in,
                  const std::string& where, std::ostream& out, nlohmann::json& rows) {
  std::string line;
  int line_no = 0;
  int col_n = -1, col_k = -1, col_m = -1;
  std::vector<std::string> header;
  out << "n,k,m,roofline_us,table_us,in_range\n";
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const auto cells = cells_of(line);
    if (header.empty()) {
      header = cells;
      for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
        if (cells[i] == "n") col_n = i;
        if (cells[i] == "k") col_k = i;
        if (cells[i] == "m") col_m = i;
      }
      if (col_n < 0 || col_k < 0 || col_m < 0) {
        throw Error(where + ":" + std::to_string(line_no) + ": the header must name columns n, k and m");
      }
      continue;
    }
    double v[3];
    const int cols[3] = {col_n, col_k, col_m};
    for (int i = 0; i < 3; ++i) {
      const std::size_t c = static_cast<std::size_t>(cols[i]);
      char* end = nullptr;
      v[i] = c < cells.size() ? std::strtod(cells[c].c_str(), &end) : 0;
      if (c >= cells.size() || cells[c].empty() || *end != '\0' || !(v[i] > 0) || !std::isfinite(v[i])) {
        throw Error(where + ":" + std::to_string(line_no) + ": " + header[c] + " is not a positive number");
      }
    }
    const double roofline_s = roofline.seconds(v[2], v[0], v[1]);
    const double table_s = table.seconds(v[2], v[0], v[1], roofline);
    const bool in_range = table.covers(v[2], v[0], v[1]);
    out << number(v[0]) << ',' << number(v[1]) << ',' << number(v[2]) << ',' << number(roofline_s * 1e6) << ','
        << number(table_s * 1e6) << ',' << (in_range ? 1 : 0) << '\n';
    rows.push_back({{"n", v[0]}, {"k", v[1]}, {"m", v[2]}, {"roofline_seconds", roofline_s},
                    {"table_seconds", table_s}, {"in_range", in_range}});
  }
}

int run_kernels(const KernelsOptions& o) {
  const Card& card = cards().find(o.card);
  const EngineProfile& engine = engines().find(o.engine);
  const Precision p = parse_precision(o.dtype, "--dtype");
  if (!card.supports(p)) {
    throw Error("--dtype: " + o.dtype + " is not in " + card.name + "'s dense_peak; it has " +
                card.supported_precisions());
  }
  std::optional<MeasuredGemmTable> own;
  const MeasuredGemmTable* table = nullptr;
  if (!o.table.empty()) {
    own = MeasuredGemmTable::load(o.table);
    table = &*own;
  } else if (card.measured_kernels) {
    table = card.measured_kernels->gemm(p);
  }
  if (o.shapes.empty()) {
    std::ostringstream out;
    nlohmann::json tables = nlohmann::json::array();
    out << "capsim kernels: " << card.name << " under engine " << engine.name << "\n";
    if (!card.measured_kernels) {
      out << "  no measured kernel tables (calibration/kernels/" << card.name
          << "/): its kernels come from the roofline\n";
    } else {
      out << "  " << card.measured_kernels->describe() << "\n";
      for (const char* name : {"bf16", "fp8", "nvfp4"}) {
        const MeasuredGemmTable* t = card.measured_kernels->gemm(parse_precision(name, "--dtype"));
        if (!t || t->info().dtype != name) continue;
        const KernelTableInfo& i = t->info();
        out << "  gemm " << i.dtype << ": " << t->points() << " shapes, " << i.framework << ", kernel " << i.kernel
            << ", device " << i.device << "\n    " << i.file << "\n    source " << i.source << " (" << i.licence << ")\n";
        tables.push_back({{"op", i.op}, {"dtype", i.dtype}, {"shapes", t->points()}, {"framework", i.framework},
                          {"kernel", i.kernel}, {"device", i.device}, {"file", i.file}, {"source", i.source},
                          {"licence", i.licence}});
      }
    }
    if (o.json != "-") std::cout << out.str();
    if (!o.json.empty()) write_json(o.json, {{"card", card.name}, {"engine", engine.name}, {"tables", tables}});
    return 0;
  }
  if (!table) {
    throw Error("--dtype: " + card.name + " has no measured " + o.dtype +
                " GEMM table (calibration/kernels/" + card.name + "/gemm-" + o.dtype + ".csv); give --table FILE");
  }
  const GemmRoofline roofline = linear_layer_roofline(card, engine, p);
  std::ostringstream out;
  nlohmann::json rows = nlohmann::json::array();
  if (o.shapes == "-") {
    print_shapes(*table, roofline, std::cin, "stdin", out, rows);
  } else {
    std::ifstream in(o.shapes);
    if (!in) throw Error("--shapes: cannot read " + o.shapes);
    print_shapes(*table, roofline, in, o.shapes, out, rows);
  }
  if (o.json != "-") std::cout << out.str();
  if (!o.json.empty()) {
    write_json(o.json, {{"card", card.name}, {"engine", engine.name}, {"dtype", o.dtype},
                        {"table", table->info().file}, {"shapes", rows}});
  }
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
  cmd->add_option("--card", opts->card, "card name")->capture_default_str();
  cmd->add_option("--engine", opts->engine, "engine profile whose efficiency scales the roofline uses")
      ->capture_default_str();
  cmd->add_option("--dtype", opts->dtype, "GEMM precision: bf16, fp8, nvfp4")->capture_default_str();
  cmd->add_option("--table", opts->table, "a measured GEMM table file to use instead of the card's");
  cmd->add_option("--shapes", opts->shapes,
                  "CSV of GEMM shapes (columns n, k, m; '-' = stdin): prints roofline and table times in us");
  cmd->add_option("--json", opts->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([opts, &exit_code] { exit_code = run_kernels(*opts); });
}

}  // namespace capsim::cli
