// `capsim sweep SWEEP.yaml [--shard i/N]` and `capsim merge SHARD.json...` (docs/scale.md).
#include <iostream>
#include <memory>

#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/plan/search.h"
#include "sim/plan/sweep.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct SweepOutputs {
  std::string json, csv, report;
};

void add_outputs(CLI::App* cmd, SweepOutputs& o) {
  cmd->add_option("--json", o.json, "write the results as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--csv", o.csv, "write the results as CSV to FILE, one line per run");
  cmd->add_option("--report", o.report, "write the results as a self-contained HTML page FILE.html");
}

// Prints a short table (unless JSON goes to stdout) and writes the files asked for, all or none.
void emit(const nlohmann::json& doc, const SweepOutputs& o) {
  if (o.json != "-") {
    TextTable t({"#", "model", "card", "tp", "weights", "load", "seed", "status", "TTFT p95",
                 "TPOT p95", "out tok/s", "SLO"});
    for (const nlohmann::json& r : doc.at("results")) {
      const bool ok = r.value("status", "") == "ok";
      const auto num = [&](const char* key, const char* f) {
        return ok && r.contains(key) ? fmt(f, r[key].get<double>()) : std::string("-");
      };
      t.row({std::to_string(r["index"].get<std::size_t>()), r.value("model", ""), r.value("card", ""),
             std::to_string(r.value("tp", 1)), r.value("weights", ""),
             r["load"].is_null() ? std::string("-") : r["load"].dump(), r["seed"].dump(),
             ok ? std::string("ok") : "failed: " + r.value("error", ""), num("p95_ttft_ms", "%.1f ms"),
             num("p95_tpot_ms", "%.1f ms"), num("output_throughput", "%.0f"), ok ? r.value("slo", "") : "-"});
    }
    std::cout << "capsim sweep " << doc.at("sweep").get<std::string>() << ": "
              << doc.at("results").size() << " of " << doc.at("runs").get<std::size_t>() << " runs"
              << (doc.contains("shard") ? " (shard " + doc["shard"].get<std::string>() + ")" : "") << "\n";
    t.print(std::cout);
  }
  OutputSet outputs;
  outputs.add_json(o.json, doc);
  if (!o.csv.empty()) outputs.add("--csv", o.csv, plan::sweep_csv(doc));
  if (!o.report.empty()) outputs.add("--report", o.report, plan::sweep_report_html(doc));
  outputs.commit();
}

}  // namespace

void add_sweep_commands(CLI::App& app, int& exit_code) {
  struct SweepOptions {
    std::string file, shard = "0/1";
    SweepOutputs out;
    bool quiet = false;
  };
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "run a grid of simulations (models x cards x TP x precisions x workloads x loads x seeds), or one shard of it");
  cmd->footer(
      "examples:\n"
      "  capsim sweep workloads/sweeps/chat-grid.yaml --json grid.json --csv grid.csv\n"
      "  capsim sweep workloads/sweeps/chat-grid.yaml --shard 2/4 --json shard-2.json   # run 2, 6, 10, ...\n"
      "  capsim merge shard-*.json --json grid.json --csv grid.csv --report grid.html\n"
      "Slurm job array and Kubernetes Indexed Job files: scale/ (docs/scale.md). Runs are numbered in\n"
      "grid order; shard i/N runs those numbered i modulo N; merged shards equal the unsharded run\n"
      "byte for byte. $CAPSIM_THREADS sets the threads (default: all cores).");
  cmd->add_option("sweep", o->file, "sweep YAML file (docs/scale.md)")->required();
  cmd->add_option("--shard", o->shard, "run only shard i of N (i/N, 0 <= i < N; default 0/1 = all)");
  add_outputs(cmd, o->out);
  cmd->add_flag("--quiet,-q", o->quiet, "no progress line on stderr");
  cmd->callback([o, &exit_code] {
    try {
      const plan::Shard shard = plan::parse_shard(o->shard, "--shard");
      const plan::Sweep sweep = plan::load_sweep(o->file);
      emit(plan::run_sweep(sweep, shard, plan::default_threads(), !o->quiet), o->out);
      exit_code = 0;
    } catch (const std::exception& e) {
      exit_code = report_error(e);
    }
  });

  struct MergeOptions {
    std::vector<std::string> files;
    SweepOutputs out;
  };
  auto m = std::make_shared<MergeOptions>();
  CLI::App* merge = app.add_subcommand("merge", "join the shards of a sweep into its whole result");
  merge->footer(
      "examples:\n"
      "  capsim merge shard-0.json shard-1.json shard-2.json shard-3.json --json grid.json --csv grid.csv\n"
      "Every run of the grid must be in exactly one file; the result equals the unsharded sweep's.");
  merge->add_option("shards", m->files, "shard result files (capsim sweep --shard i/N --json FILE)")->required();
  add_outputs(merge, m->out);
  merge->callback([m, &exit_code] {
    try {
      std::vector<std::pair<std::string, nlohmann::json>> docs;
      for (const std::string& f : m->files) {
        docs.emplace_back(f, parse_json(read_input_file(f, "sweep result", kMaxTableBytes), f));
      }
      emit(plan::merge_sweeps(docs), m->out);
      exit_code = 0;
    } catch (const std::exception& e) {
      exit_code = report_error(e);
    }
  });
}

}  // namespace capsim::cli
