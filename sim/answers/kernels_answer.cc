#include "sim/answers/kernels_answer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "sim/core/error.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/kernel_table_text.h"
#include "sim/hardware/measured_kernels.h"
#include "sim/scenario/catalogues.h"

namespace capsim::answers {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The times of every shape of `csv`, as CSV text in microseconds and as JSON rows; throws on the
// first bad row, so nothing is answered for a half-read file.
void time_shapes(const MeasuredGemmTable& table, const GemmRoofline& roofline, const std::string& csv,
                 const std::string& where, std::ostream& out, nlohmann::json& rows) {
  std::istringstream in(csv);
  std::string line;
  int line_no = 0;
  int col_n = -1, col_k = -1, col_m = -1;
  std::vector<std::string> header;
  out << "n,k,m,roofline_us,table_us,in_range\n";
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;
    kernel_table::split_commas(line, cells);
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

// A table of the catalogue by its path in the data directory ("calibration/kernels/h100-sxm/
// gemm-bf16.csv", as the docs name it), so an answer shows no install path (the server's answers
// go to clients); any other path (a --table elsewhere) as given.
std::string shown_path(const std::string& file) {
  const std::string root = scenario::data_dir() + "/";
  return file.rfind(root, 0) == 0 ? file.substr(root.size()) : file;
}

}  // namespace

KernelsAnswer answer_kernels(const KernelsRequest& o) {
  const Card& card = scenario::cards().find(o.card);
  const EngineProfile& engine = scenario::engines().find(o.engine);
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
  KernelsAnswer a;
  if (!o.shapes_csv) {
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
            << ", device " << i.device << "\n    " << shown_path(i.file) << "\n    source " << i.source << " (" << i.licence
            << ")\n";
        tables.push_back({{"op", i.op}, {"dtype", i.dtype}, {"shapes", t->points()}, {"framework", i.framework},
                          {"kernel", i.kernel}, {"device", i.device}, {"file", shown_path(i.file)}, {"source", i.source},
                          {"licence", i.licence}});
      }
    }
    a.text = out.str();
    a.json = {{"card", card.name}, {"engine", engine.name}, {"tables", tables}};
    return a;
  }
  if (!table) {
    throw Error("--dtype: " + card.name + " has no measured " + o.dtype + " GEMM table (calibration/kernels/" +
                card.name + "/gemm-" + o.dtype + ".csv); " +
                (o.table_allowed ? "give --table FILE" : "asked without shapes, kernels lists the tables " + card.name + " has"));
  }
  const GemmRoofline roofline = linear_layer_roofline(card, engine, p);
  std::ostringstream out;
  nlohmann::json rows = nlohmann::json::array();
  time_shapes(*table, roofline, *o.shapes_csv, o.shapes_where, out, rows);
  a.text = out.str();
  a.json = {{"card", card.name}, {"engine", engine.name}, {"dtype", o.dtype}, {"table", shown_path(table->info().file)},
            {"shapes", rows}};
  return a;
}

}  // namespace capsim::answers
