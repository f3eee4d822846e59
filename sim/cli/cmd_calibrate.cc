// `capsim calibrate`: fit a card's cost-model constants to measurements (docs/calibration.md).
//
//   capsim calibrate fit PROFILE.json --card CARD [--out FILE] [--force]
//   capsim calibrate fit --vidur DIR --card CARD [--sku SKU] [--out FILE]
//   capsim calibrate compare STEPS.csv [--card CARD] [--model M] [--tp N] ...
//   capsim calibrate show [--card CARD]
//
// Also registers the global flag --no-calibration (before the command: `capsim --no-calibration
// roofline ...`), which keeps calibration/profiles/*.yaml from being applied to the cards.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "sim/calibration/card_profile.h"
#include "sim/calibration/profile.h"
#include "sim/calibration/step_compare.h"
#include "sim/calibration/vidur.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/cost/roofline_cost.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

using namespace capsim::calibration;

struct FitOptions {
  std::string profile;
  std::string vidur;
  std::string sku;
  std::string card = "h100-sxm";
  std::string out;
  std::string json;
  bool force = false;
  std::string command_line;
};

std::string pct(double v) { return fmt("%.1f%%", 100 * v); }

std::string eff(const ParamFit& p) { return fmt("%.4f", p.value); }

std::string ci(const ParamFit& p, bool floor = false) {
  if (!p.fitted) return "-";
  if (floor) return "[" + units::format_time(p.ci_low) + ", " + units::format_time(p.ci_high) + "]";
  return "[" + fmt("%.4f", p.ci_low) + ", " + fmt("%.4f", p.ci_high) + "]";
}

nlohmann::json param_json(const ParamFit& p, double card_value, bool floor) {
  return {{"value", p.value},       {"fitted", p.fitted},     {"applied", applied(p, floor)},
          {"card_file_value", card_value}, {"ci95", {p.ci_low, p.ci_high}}, {"samples", p.samples},
          {"note", p.note}};
}

nlohmann::json quality_json(const FitQuality& q) {
  nlohmann::json regimes = nlohmann::json::object();
  for (const auto& r : q.regimes) {
    regimes[r.regime] = {{"samples", r.samples}, {"median_ape", r.median_ape}, {"p90_ape", r.p90_ape},
                         {"bias", r.bias}};
  }
  return {{"samples", q.samples}, {"r2_log", q.r2_log}, {"r2", q.r2}, {"median_ape", q.median_ape},
          {"p90_ape", q.p90_ape}, {"max_ape", q.max_ape}, {"regimes", regimes}};
}

void print_quality(std::ostream& os, const FitQuality& q) {
  os << "  fit quality: R² of log t " << fmt("%.4f", q.r2_log) << ", R² of t " << fmt("%.4f", q.r2)
     << "; error median " << pct(q.median_ape) << ", p90 " << pct(q.p90_ape) << ", max " << pct(q.max_ape)
     << "\n";
  TextTable t({"regime", "samples", "median error", "p90 error", "bias (pred/meas - 1)"});
  for (const auto& r : q.regimes) {
    t.row({r.regime, std::to_string(r.samples), pct(r.median_ape), pct(r.p90_ape), fmt("%+.1f%%", 100 * r.bias)});
  }
  t.print(os, "    ");
}

int run_fit(const FitOptions& o) {
  if (o.profile.empty() == o.vidur.empty()) {
    throw Error("calibrate fit: give a profile (capsim-calibrate's JSON) or --vidur DIR, not both or neither");
  }
  // Peaks and the card file's own efficiencies (not an earlier calibration) are the priors.
  const Card& listed = cards().find(o.card);
  const Card card = CardCatalogue::load_file(listed.file);
  const std::string out = o.out.empty() ? data_dir() + "/calibration/profiles/" + card.name + ".yaml" : o.out;
  if (o.out.empty()) {
    // The default profile's folder is made when missing (a --data-dir without one), then checked
    // with --json before the fit, as a given --out is (add_output_checks).
    std::filesystem::create_directories(std::filesystem::path(out).parent_path());
    check_outputs({{"--json", o.json}, {"--out", out}});
  }
  Profile profile;
  VidurReport vidur_report;
  if (!o.vidur.empty()) {
    const std::string sku = o.sku.empty() ? vidur_sku_of(card.name) : o.sku;
    const VidurShapeResolver resolve = [](const std::string& id) -> std::optional<VidurModelShape> {
      try {
        const ModelSpec m = models().find(id);
        return VidurModelShape{m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.gated_mlp};
      } catch (const Error&) {
        return std::nullopt;
      }
    };
    profile = load_vidur_dir(o.vidur, sku, resolve, &vidur_report);
  } else {
    profile = load_profile(o.profile);
  }
  CardFitOptions fo;
  fo.force = o.force;
  fo.command_line = o.command_line;
  const CardFit f = fit_card(profile, card, fo);
  const bool quiet = o.json == "-" || out == "-";

  if (!quiet) {
    std::ostream& os = std::cout;
    os << "capsim calibrate fit: " << profile.path << " (" << profile.source << ", " << profile.provenance.gpu_name;
    if (!profile.provenance.driver.empty()) os << ", driver " << profile.provenance.driver;
    if (!profile.provenance.cuda_runtime.empty()) os << ", CUDA runtime " << profile.provenance.cuda_runtime;
    os << ", measured " << profile.provenance.date << ")\n";
    for (const auto& u : vidur_report.used) os << "  read " << u << "\n";
    for (const auto& s : vidur_report.skipped) os << "  skipped " << s << "\n";
    os << "  card " << card.name << " (" << card.display_name << "): "
       << units::format_rate(card.memory_bandwidth, "B/s") << "; " << card.supported_precisions() << "\n\n";
    os << "  GEMM fit: " << f.gemm_samples.size()
       << " GEMMs, each t = max(sqrt((F/(P·compute))² + (B/(BW·memory_bandwidth))²), kernel_floor)\n";
    TextTable t({"parameter", "card file", "fitted", "95% interval", "samples", "applied", "note"});
    t.row({"memory_bandwidth", fmt("%.4f", f.card_bandwidth), eff(f.bandwidth), ci(f.bandwidth),
           std::to_string(f.bandwidth.samples), applied(f.bandwidth) ? "yes" : "no", f.bandwidth.note});
    t.row({"compute (" + f.compute_dtype + ")", fmt("%.4f", f.card_compute), eff(f.compute), ci(f.compute),
           std::to_string(f.compute.samples), applied(f.compute) ? "yes" : "no", f.compute.note});
    if (f.compute_fp8) {
      t.row({"compute_fp8", fmt("%.4f", f.card_compute_fp8), eff(*f.compute_fp8), ci(*f.compute_fp8),
             std::to_string(f.compute_fp8->samples), applied(*f.compute_fp8) ? "yes" : "no", f.compute_fp8->note});
    }
    t.row({"kernel_floor", units::format_time(f.card_floor), units::format_time(f.floor.value), ci(f.floor, true),
           std::to_string(f.floor.samples), applied(f.floor, true) ? "yes" : "no",
           f.floor_method + (f.floor.note.empty() ? "" : "; " + f.floor.note)});
    if (f.compute_other_half) {
      t.row({"compute (" + f.compute_other_half->name + ")", "-", eff(*f.compute_other_half), ci(*f.compute_other_half),
             std::to_string(f.compute_other_half->samples), "no", "diagnostic: the card's 16-bit type is " + f.compute_dtype});
    }
    t.print(os);
    os << "\n";
    print_quality(os, f.gemm.quality);
    // The worst samples, to see where the model form falls short.
    std::vector<std::size_t> idx(f.gemm_samples.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    const auto err = [&](std::size_t i) { return std::fabs(f.gemm.predicted[i] / f.gemm_samples[i].seconds - 1); };
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return err(a) > err(b); });
    TextTable w({"worst GEMMs", "measured", "predicted", "error", "regime"});
    for (std::size_t j = 0; j < std::min<std::size_t>(5, idx.size()); ++j) {
      const std::size_t i = idx[j];
      w.row({f.gemm_samples[i].label, units::format_time(f.gemm_samples[i].seconds),
             units::format_time(f.gemm.predicted[i]), fmt("%+.1f%%", 100 * (f.gemm.predicted[i] / f.gemm_samples[i].seconds - 1)),
             f.gemm.regime[i]});
    }
    w.print(os, "    ");

    os << "\n  diagnostics (written to the profile, not applied):\n";
    if (f.stream_read) {
      os << "    stream read: " << units::format_rate(f.stream_read->bandwidth.value * card.memory_bandwidth, "B/s") << " ("
         << fmt("%.3f", f.stream_read->bandwidth.value) << " of peak, error median " << pct(f.stream_read->quality.median_ape)
         << ")\n";
    }
    if (f.stream_copy) {
      os << "    stream copy: " << units::format_rate(f.stream_copy->bandwidth.value * card.memory_bandwidth, "B/s") << " ("
         << fmt("%.3f", f.stream_copy->bandwidth.value) << " of peak)\n";
    }
    if (f.attention_decode) {
      os << "    decode attention (" << f.decode_kernel << "): bandwidth efficiency "
         << fmt("%.3f", f.attention_decode->bandwidth.value) << ", floor "
         << units::format_time(f.attention_decode->floor.value)
         << (f.attention_decode->floor.fitted ? " (fitted)" : " (not fitted: the kernel_floor above)") << ", error median "
         << pct(f.attention_decode->quality.median_ape) << " over " << f.decode_samples.size() << " shapes\n";
    }
    if (f.attention_prefill) {
      const ParamFit& c = f.attention_prefill->compute[0];
      os << "    prefill attention (" << f.prefill_kernel << "): compute efficiency " << fmt("%.3f", c.value)
         << " = " << fmt("%.2f", f.compute.value > 0 ? c.value / f.compute.value : 0)
         << " x compute (an engine's attention_compute_scale for this kernel), floor "
         << units::format_time(f.attention_prefill->floor.value)
         << (f.attention_prefill->floor.fitted ? " (fitted)" : " (not fitted: the kernel_floor above)") << ", error median "
         << pct(f.attention_prefill->quality.median_ape) << "\n";
    }
    if (f.launch.present) {
      os << "    launch, per kernel: stream " << units::format_time(f.launch.launch_s) << ", CUDA graph "
         << units::format_time(f.launch.graph_kernel_s) << ", small kernel in a graph "
         << units::format_time(f.launch.small_kernel_graph_s) << "\n";
    }
    if (f.allreduce.samples > 0) {
      if (f.allreduce.fitted) {
        os << "    all-reduce, " << f.allreduce.gpus << " GPUs: latency " << units::format_time(f.allreduce.latency_s)
           << ", bus bandwidth " << units::format_rate(f.allreduce.bus_bytes_per_s, "B/s") << " (error median "
           << pct(f.allreduce.median_ape) << ")\n";
      } else {
        os << "    all-reduce: " << f.allreduce.note << "\n";
      }
    }
    for (const auto& n : f.notes) os << "  note: " << n << "\n";
  }

  OutputSet outputs;
  if (!o.json.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t i = 0; i < f.gemm_samples.size(); ++i) {
      const auto& s = f.gemm_samples[i];
      rows.push_back({{"label", s.label}, {"flops", s.flops}, {"bytes", s.bytes}, {"measured_s", s.seconds},
                      {"predicted_s", f.gemm.predicted[i]}, {"regime", f.gemm.regime[i]}});
    }
    nlohmann::json j = {
        {"card", card.name},
        {"profile", profile.path},
        {"source", profile.source},
        {"gpu_name", profile.provenance.gpu_name},
        {"efficiency",
         {{"memory_bandwidth", param_json(f.bandwidth, f.card_bandwidth, false)},
          {"compute", param_json(f.compute, f.card_compute, false)},
          {"compute_dtype", f.compute_dtype},
          {"kernel_floor", param_json(f.floor, f.card_floor, true)}}},
        {"fit", quality_json(f.gemm.quality)},
        {"gemm", rows},
        {"notes", f.notes},
        {"out", out}};
    if (f.compute_fp8) j["efficiency"]["compute_fp8"] = param_json(*f.compute_fp8, f.card_compute_fp8, false);
    if (f.attention_decode) j["attention_decode"] = quality_json(f.attention_decode->quality);
    if (f.attention_prefill) j["attention_prefill"] = quality_json(f.attention_prefill->quality);
    outputs.add_json(o.json, j);
  }
  outputs.add("--out", out, card_profile_yaml(f));
  outputs.commit();
  if (!quiet) {
    const std::string canonical = data_dir() + "/calibration/profiles/" + card.name + ".yaml";
    std::cout << "\nwrote " << out;
    if (std::filesystem::weakly_canonical(out) == std::filesystem::weakly_canonical(canonical)) {
      std::cout << "; capsim now applies it to " << card.name
                << " (off: `capsim --no-calibration <command>` or CAPSIM_NO_CALIBRATION=1)";
    } else {
      std::cout << "; copy it to calibration/profiles/" << card.name << ".yaml to apply it";
    }
    std::cout << "\n";
  }
  return 0;
}

struct CompareOptions {
  std::string file;
  DeploymentSpec deployment;
  std::string json;
};

int run_compare(const CompareOptions& o, bool model_given, bool card_given) {
  const auto rows = load_step_csv(o.file);
  DeploymentSpec flags = o.deployment;
  const auto unique = [&](auto field, const char* what) -> std::string {
    std::vector<std::string> seen;
    for (const auto& r : rows) {
      if (std::find(seen.begin(), seen.end(), r.*field) == seen.end()) seen.push_back(r.*field);
    }
    if (seen.size() != 1) {
      std::string list;
      for (const auto& s : seen) list += (list.empty() ? "" : ", ") + s;
      throw Error(o.file + ": holds rows for " + std::to_string(seen.size()) + " " + what + "s (" + list +
                  "); choose one with --" + what);
    }
    return seen[0];
  };
  if (!model_given) flags.model = unique(&StepRow::model, "model");
  if (!card_given) flags.card = unique(&StepRow::card, "card");
  const Deployment d = flags.resolve();
  const RooflineCost cost(d);
  std::vector<StepRow> use;
  int skipped = 0;
  for (const auto& r : rows) {
    const bool model_ok = r.model == flags.model || r.model == d.model.name;
    const bool card_ok = r.card == flags.card || r.card == d.card.name;
    if (model_ok && card_ok) use.push_back(r);
    else ++skipped;
  }
  if (use.empty()) {
    throw Error(o.file + ": no rows for model " + d.model.name + " on card " + d.card.name +
                " (the model and card columns must name them)");
  }
  nlohmann::json jrows = nlohmann::json::array();
  TextTable t({"line", "step", "batch", "context", "prefill", "measured", "predicted", "error", "bound"});
  std::vector<double> ape, ape_decode, ape_prefill;
  for (const auto& r : use) {
    const BatchShape b = step_shape(r, o.file);
    const StepBreakdown s = cost.totals(b);
    // The benchmark times the GPU work of one forward pass: no scheduler, sampling or all-reduce.
    const double predicted = s.seconds - s.overhead_s - s.communication_s;
    const double measured = r.step_ms / 1e3;
    const double e = std::fabs(predicted / measured - 1);
    ape.push_back(e);
    (r.prefill_tokens > 0 ? ape_prefill : ape_decode).push_back(e);
    const std::string kind = r.prefill_tokens > 0 ? "prefill" : "decode";
    const std::string bound = s.compute_s >= s.memory_s ? "compute" : "memory";
    t.row({std::to_string(r.line), kind, std::to_string(r.batch), std::to_string(r.context),
           std::to_string(r.prefill_tokens), fmt("%.3f ms", r.step_ms), fmt("%.3f ms", predicted * 1e3),
           fmt("%+.1f%%", 100 * (predicted / measured - 1)), bound});
    jrows.push_back({{"line", r.line}, {"kind", kind}, {"batch", r.batch}, {"context", r.context},
                     {"prefill_tokens", r.prefill_tokens}, {"measured_ms", r.step_ms},
                     {"predicted_ms", predicted * 1e3}, {"ape", e}, {"bound", bound}});
  }
  const auto summary = [](const std::vector<double>& v) -> nlohmann::json {
    if (v.empty()) return nullptr;
    return {{"rows", v.size()}, {"median_ape", median(v)}, {"p90_ape", quantile(v, 0.9)}};
  };
  if (o.json != "-") {
    std::cout << "capsim calibrate compare: " << o.file << ": " << d.model.name << " on " << d.tp << " x "
              << d.card.name << ", weights " << precision_name(d.weights) << ", engine kernels " << d.engine.name;
    if (!d.card.calibration.empty()) std::cout << "\n  card calibrated: " << d.card.calibration;
    std::cout << "\n  predicted = the cost model's step minus engine overhead and all-reduce (the benchmark "
                 "times the GPU forward pass only)\n\n";
    t.print(std::cout);
    std::cout << "\n  error: median " << pct(median(ape)) << ", p90 " << pct(quantile(ape, 0.9)) << " over "
              << ape.size() << " rows";
    if (!ape_decode.empty()) std::cout << "; decode median " << pct(median(ape_decode));
    if (!ape_prefill.empty()) std::cout << "; prefill median " << pct(median(ape_prefill));
    std::cout << "\n";
    if (skipped > 0) std::cout << "  " << skipped << " rows for other models or cards left out\n";
  }
  if (!o.json.empty()) {
    write_json(o.json, {{"file", o.file}, {"model", d.model.name}, {"card", d.card.name}, {"tp", d.tp},
                        {"calibration", d.card.calibration}, {"rows", jrows}, {"all", summary(ape)},
                        {"decode", summary(ape_decode)}, {"prefill", summary(ape_prefill)}});
  }
  return 0;
}

int run_show(const std::string& card_name) {
  TextTable t({"card", "memory_bandwidth", "compute", "compute_fp8", "kernel_floor", "from"});
  for (const Card& c : cards().cards()) {
    if (!card_name.empty() && &c != &cards().find(card_name)) continue;
    t.row({c.name, fmt("%.4f", c.bandwidth_efficiency), fmt("%.4f", c.compute_efficiency),
           c.compute_efficiency_fp8 > 0 ? fmt("%.4f", c.compute_efficiency_fp8) : "-",
           units::format_time(c.kernel_floor_s),
           c.calibration.empty() ? "card file " + c.file.substr(c.file.find_last_of('/') + 1) : c.calibration});
  }
  std::cout << "capsim calibrate show: calibration "
            << (CardCatalogue::use_calibration() ? "on" : "off (--no-calibration or CAPSIM_NO_CALIBRATION=1)")
            << "\n";
  t.print(std::cout);
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, int& exit_code) {
  app.add_flag_callback("--no-calibration", [] { CardCatalogue::set_use_calibration(false); },
                        "ignore calibration/profiles/*.yaml (also CAPSIM_NO_CALIBRATION=1)")
      ->trigger_on_parse();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "fit a card's efficiencies to GPU measurements; compare measured step times");
  cmd->require_subcommand(1);
  cmd->footer(
      "examples:\n"
      "  capsim-calibrate --quick --out h100.json          (on the GPU; build with -DCAPSIM_CUDA=ON)\n"
      "  capsim calibrate fit h100.json --card h100-sxm\n"
      "  capsim calibrate fit --vidur ../shared/reference/vidur_profiles --card h100-sxm --out -\n"
      "  capsim calibrate compare steps.csv --model llama-3.1-8b --card h100-sxm\n"
      "  capsim calibrate show --card h100-sxm\n"
      "see docs/calibration.md");

  auto fo = std::make_shared<FitOptions>();
  CLI::App* fit = cmd->add_subcommand("fit", "fit compute/bandwidth efficiency and kernel floor to a profile");
  fit->add_option("profile", fo->profile, "profile JSON written by capsim-calibrate");
  fit->add_option("--vidur", fo->vidur, "a folder of Vidur per-operator CSVs instead of a profile");
  fit->add_option("--sku", fo->sku, "Vidur GPU SKU to read (default: from the card name, e.g. h100)");
  fit->add_option("--card,-c", fo->card, "card to calibrate (capsim list cards)")->capture_default_str();
  fit->add_option("--out,-o", fo->out,
                  "where to write the fitted profile (default: calibration/profiles/<card>.yaml, which capsim "
                  "then applies; '-' = stdout)");
  fit->add_flag("--force", fo->force, "accept a profile measured on a GPU that does not match the card");
  fit->add_option("--json", fo->json, "also write the fit, with every GEMM's residual, as JSON ('-' = stdout only)");
  fit->callback([fo, &exit_code] {
    fo->command_line = "capsim calibrate fit";
    if (!fo->profile.empty()) fo->command_line += " " + fo->profile;
    if (!fo->vidur.empty()) fo->command_line += " --vidur " + fo->vidur;
    fo->command_line += " --card " + fo->card;
    if (fo->force) fo->command_line += " --force";
    exit_code = run_fit(*fo);
  });

  auto co = std::make_shared<CompareOptions>();
  CLI::App* cmp = cmd->add_subcommand(
      "compare", "measured model step times (scripts/model_step_bench.py CSV) vs the cost model, with errors");
  cmp->add_option("file", co->file, "CSV: model,card,batch,context,prefill_tokens,step_ms")->required();
  add_deployment_flags(*cmp, co->deployment, false);
  cmp->add_option("--json", co->json, "also write the comparison as JSON ('-' = stdout only)");
  cmp->callback([co, &exit_code, cmp] {
    exit_code = run_compare(*co, cmp->get_option("--model")->count() > 0, cmp->get_option("--card")->count() > 0);
  });

  auto card = std::make_shared<std::string>();
  CLI::App* show = cmd->add_subcommand("show", "the efficiencies each card uses and where they come from");
  show->add_option("--card,-c", *card, "one card (default: all)");
  show->callback([card, &exit_code] { exit_code = run_show(*card); });
}

}  // namespace capsim::cli
