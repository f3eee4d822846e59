#include "sim/answers/calibrate_answer.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/cost/roofline_cost.h"
#include "sim/report/table.h"
#include "sim/scenario/catalogues.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

using namespace capsim::calibration;

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

}  // namespace

CalibrateFitAnswer answer_calibrate_fit(const CalibrateFitRequest& o) {
  const int sources = !o.profile.empty() + o.measured.has_value() + !o.vidur.empty();
  if (sources != 1) {
    throw Error("calibrate fit: give a profile (capsim-calibrate's JSON) or --vidur DIR, not both or neither");
  }
  CalibrateFitAnswer a;
  // Peaks and the card file's own efficiencies (not an earlier calibration) are the priors.
  const Card& listed = cards().find(o.card);
  a.card = CardCatalogue::load_file(listed.file);
  if (o.before_profile) o.before_profile(a.card);
  if (!o.vidur.empty()) {
    const std::string sku = o.sku.empty() ? vidur_sku_of(a.card.name) : o.sku;
    const VidurShapeResolver resolve = [](const std::string& id) -> std::optional<VidurModelShape> {
      try {
        const ModelSpec m = models().find(id);
        return VidurModelShape{m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.gated_mlp};
      } catch (const Error&) {
        return std::nullopt;
      }
    };
    a.profile = load_vidur_dir(o.vidur, sku, resolve, &a.vidur_report);
  } else if (o.measured) {
    a.profile = *o.measured;
  } else {
    a.profile = load_profile(o.profile);
  }
  CardFitOptions fo;
  fo.force = o.force;
  fo.command_line = o.command_line;
  a.fit = fit_card(a.profile, a.card, fo);
  return a;
}

void print_calibrate_fit(std::ostream& os, const CalibrateFitAnswer& a) {
  const Profile& profile = a.profile;
  const Card& card = a.card;
  const CardFit& f = a.fit;
  os << "capsim calibrate fit: " << profile.path << " (" << profile.source << ", " << profile.provenance.gpu_name;
  if (!profile.provenance.driver.empty()) os << ", driver " << profile.provenance.driver;
  if (!profile.provenance.cuda_runtime.empty()) os << ", CUDA runtime " << profile.provenance.cuda_runtime;
  os << ", measured " << profile.provenance.date << ")\n";
  for (const auto& u : a.vidur_report.used) os << "  read " << u << "\n";
  for (const auto& s : a.vidur_report.skipped) os << "  skipped " << s << "\n";
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
  std::sort(idx.begin(), idx.end(), [&](std::size_t x, std::size_t y) { return err(x) > err(y); });
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

nlohmann::json calibrate_fit_json(const CalibrateFitAnswer& a, const std::optional<std::string>& out) {
  const CardFit& f = a.fit;
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < f.gemm_samples.size(); ++i) {
    const auto& s = f.gemm_samples[i];
    rows.push_back({{"label", s.label}, {"flops", s.flops}, {"bytes", s.bytes}, {"measured_s", s.seconds},
                    {"predicted_s", f.gemm.predicted[i]}, {"regime", f.gemm.regime[i]}});
  }
  nlohmann::json j = {
      {"card", a.card.name},
      {"profile", a.profile.path},
      {"source", a.profile.source},
      {"gpu_name", a.profile.provenance.gpu_name},
      {"efficiency",
       {{"memory_bandwidth", param_json(f.bandwidth, f.card_bandwidth, false)},
        {"compute", param_json(f.compute, f.card_compute, false)},
        {"compute_dtype", f.compute_dtype},
        {"kernel_floor", param_json(f.floor, f.card_floor, true)}}},
      {"fit", quality_json(f.gemm.quality)},
      {"gemm", rows},
      {"notes", f.notes},
      {"out", out ? nlohmann::json(*out) : nlohmann::json(nullptr)}};
  if (f.compute_fp8) j["efficiency"]["compute_fp8"] = param_json(*f.compute_fp8, f.card_compute_fp8, false);
  if (f.attention_decode) j["attention_decode"] = quality_json(f.attention_decode->quality);
  if (f.attention_prefill) j["attention_prefill"] = quality_json(f.attention_prefill->quality);
  return j;
}

CalibrateCompareAnswer answer_calibrate_compare(const CalibrateCompareRequest& o) {
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
  if (!o.model_given) flags.model = unique(&StepRow::model, "model");
  if (!o.card_given) flags.card = unique(&StepRow::card, "card");
  CalibrateCompareAnswer a;
  a.file = o.file;
  a.deployment = flags.resolve();
  const Deployment& d = a.deployment;
  const RooflineCost cost(d);
  std::vector<StepRow> use;
  for (const auto& r : rows) {
    const bool model_ok = r.model == flags.model || r.model == d.model.name;
    const bool card_ok = r.card == flags.card || r.card == d.card.name;
    if (model_ok && card_ok) use.push_back(r);
    else ++a.skipped;
  }
  if (use.empty()) {
    throw Error(o.file + ": no rows for model " + d.model.name + " on card " + d.card.name +
                " (the model and card columns must name them)");
  }
  for (const auto& r : use) {
    const BatchShape b = step_shape(r, o.file);
    const StepBreakdown s = cost.totals(b);
    StepComparison c;
    c.row = r;
    // The benchmark times the GPU work of one forward pass: no scheduler, sampling or all-reduce.
    c.predicted_s = s.seconds - s.overhead_s - s.communication_s;
    c.ape = std::fabs(c.predicted_s / (r.step_ms / 1e3) - 1);
    c.kind = r.prefill_tokens > 0 ? "prefill" : "decode";
    c.bound = s.compute_s >= s.memory_s ? "compute" : "memory";
    a.rows.push_back(c);
  }
  return a;
}

namespace {

// The errors of all rows, of decode rows and of prefill rows.
struct CompareErrors {
  std::vector<double> all, decode, prefill;
  explicit CompareErrors(const CalibrateCompareAnswer& a) {
    for (const auto& c : a.rows) {
      all.push_back(c.ape);
      (c.row.prefill_tokens > 0 ? prefill : decode).push_back(c.ape);
    }
  }
};

}  // namespace

nlohmann::json calibrate_compare_json(const CalibrateCompareAnswer& a) {
  nlohmann::json jrows = nlohmann::json::array();
  for (const auto& c : a.rows) {
    const StepRow& r = c.row;
    jrows.push_back({{"line", r.line}, {"kind", c.kind}, {"batch", r.batch}, {"context", r.context},
                     {"prefill_tokens", r.prefill_tokens}, {"measured_ms", r.step_ms},
                     {"predicted_ms", c.predicted_s * 1e3}, {"ape", c.ape}, {"bound", c.bound}});
  }
  const auto summary = [](const std::vector<double>& v) -> nlohmann::json {
    if (v.empty()) return nullptr;
    return {{"rows", v.size()}, {"median_ape", median(v)}, {"p90_ape", quantile(v, 0.9)}};
  };
  const CompareErrors e(a);
  const Deployment& d = a.deployment;
  return {{"file", a.file}, {"model", d.model.name}, {"card", d.card.name}, {"tp", d.tp},
          {"calibration", d.card.calibration}, {"rows", jrows}, {"all", summary(e.all)},
          {"decode", summary(e.decode)}, {"prefill", summary(e.prefill)}};
}

void print_calibrate_compare(std::ostream& os, const CalibrateCompareAnswer& a) {
  const Deployment& d = a.deployment;
  TextTable t({"line", "step", "batch", "context", "prefill", "measured", "predicted", "error", "bound"});
  for (const auto& c : a.rows) {
    const StepRow& r = c.row;
    const double measured = r.step_ms / 1e3;
    t.row({std::to_string(r.line), c.kind, std::to_string(r.batch), std::to_string(r.context),
           std::to_string(r.prefill_tokens), fmt("%.3f ms", r.step_ms), fmt("%.3f ms", c.predicted_s * 1e3),
           fmt("%+.1f%%", 100 * (c.predicted_s / measured - 1)), c.bound});
  }
  const CompareErrors e(a);
  os << "capsim calibrate compare: " << a.file << ": " << d.model.name << " on " << d.tp << " x "
     << d.card.name << ", weights " << precision_name(d.weights) << ", engine kernels " << d.engine.name;
  if (!d.card.calibration.empty()) os << "\n  card calibrated: " << d.card.calibration;
  os << "\n  predicted = the cost model's step minus engine overhead and all-reduce (the benchmark "
        "times the GPU forward pass only)\n\n";
  t.print(os);
  os << "\n  error: median " << pct(median(e.all)) << ", p90 " << pct(quantile(e.all, 0.9)) << " over "
     << e.all.size() << " rows";
  if (!e.decode.empty()) os << "; decode median " << pct(median(e.decode));
  if (!e.prefill.empty()) os << "; prefill median " << pct(median(e.prefill));
  os << "\n";
  if (a.skipped > 0) os << "  " << a.skipped << " rows for other models or cards left out\n";
}

CalibrateShowAnswer answer_calibrate_show(const std::string& card_name) {
  CalibrateShowAnswer a;
  for (const Card& c : cards().cards()) {
    if (!card_name.empty() && &c != &cards().find(card_name)) continue;
    a.cards.push_back(c);
  }
  a.calibration_on = CardCatalogue::use_calibration();
  return a;
}

void print_calibrate_show(std::ostream& os, const CalibrateShowAnswer& a) {
  TextTable t({"card", "memory_bandwidth", "compute", "compute_fp8", "kernel_floor", "from"});
  for (const Card& c : a.cards) {
    t.row({c.name, fmt("%.4f", c.bandwidth_efficiency), fmt("%.4f", c.compute_efficiency),
           c.compute_efficiency_fp8 > 0 ? fmt("%.4f", c.compute_efficiency_fp8) : "-",
           units::format_time(c.kernel_floor_s),
           c.calibration.empty() ? "card file " + c.file.substr(c.file.find_last_of('/') + 1) : c.calibration});
  }
  os << "capsim calibrate show: calibration "
     << (a.calibration_on ? "on" : "off (--no-calibration or CAPSIM_NO_CALIBRATION=1)") << "\n";
  t.print(os);
}

}  // namespace capsim::answers
