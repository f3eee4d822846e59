#include "sim/calibration/card_profile.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/wall_clock.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/deployment.h"
#include "sim/report/table.h"

namespace capsim::calibration {
namespace {

std::string num(double v) { return fmt("%.6g", v); }
std::string quote(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

bool applied(const ParamFit& p, bool is_floor) {
  if (!p.fitted || !std::isfinite(p.value)) return false;
  if (is_floor) return p.value >= 0 && p.value <= 1e-3;
  return p.value > 0 && p.value <= 1;
}

namespace {

double gemm_flops(const GemmSample& g) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
}

// Bytes a GEMM must move at least once: X (m·k) and W (n·k) at the input width, Y (m·n) at 2 B.
double gemm_bytes(const GemmSample& g) {
  const double in = g.dtype == Precision::kFp8 ? 1.0 : 2.0;
  const double m = static_cast<double>(g.m), n = static_cast<double>(g.n), k = static_cast<double>(g.k);
  return (m * k + n * k) * in + m * n * 2.0;
}

std::string gemm_label(const GemmSample& g) {
  std::string s = std::string(precision_name(g.dtype)) + " m=" + std::to_string(g.m) +
                  " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k);
  if (!g.label.empty()) s += " (" + g.label + ")";
  return s;
}

AllReduceFit fit_allreduce(const std::vector<AllReduceSample>& all) {
  AllReduceFit out;
  if (all.empty()) return out;
  int gpus = 0;
  for (const auto& s : all) gpus = std::max(gpus, s.gpus);
  std::vector<const AllReduceSample*> use;
  for (const auto& s : all) {
    if (s.gpus == gpus) use.push_back(&s);
  }
  out.gpus = gpus;
  out.samples = static_cast<int>(use.size());
  if (use.size() < 3) {
    out.note = "not fitted: fewer than 3 message sizes";
    return out;
  }
  // t = latency + x / bus_bw with x = 2(n-1)/n · bytes, least squares in relative error.
  Eigen::MatrixXd A(static_cast<Eigen::Index>(use.size()), 2);
  Eigen::VectorXd b(static_cast<Eigen::Index>(use.size()));
  const double ring = 2.0 * (gpus - 1) / gpus;
  for (std::size_t i = 0; i < use.size(); ++i) {
    const double t = median(use[i]->seconds);
    A(static_cast<Eigen::Index>(i), 0) = 1 / t;
    A(static_cast<Eigen::Index>(i), 1) = ring * use[i]->bytes / t;
    b(static_cast<Eigen::Index>(i)) = 1;
  }
  const Eigen::VectorXd th = A.colPivHouseholderQr().solve(b);
  if (!(th(0) >= 0) || !(th(1) > 0)) {
    out.note = "not fitted: least squares gave a non-physical latency or bandwidth";
    return out;
  }
  out.fitted = true;
  out.latency_s = th(0);
  out.bus_bytes_per_s = 1 / th(1);
  std::vector<double> ape;
  for (const auto* s : use) {
    const double t = median(s->seconds);
    ape.push_back(std::fabs((th(0) + ring * s->bytes * th(1)) / t - 1));
  }
  out.median_ape = median(ape);
  return out;
}

}  // namespace

CardFit fit_card(const Profile& profile, const Card& card, const CardFitOptions& options) {
  CardFit f;
  f.card = card.name;
  f.card_display_name = card.display_name;
  f.profile_path = profile.path;
  f.source = profile.source;
  f.provenance = profile.provenance;
  f.forced = options.force;
  f.fitted_date = options.fitted_date.empty() ? utc_now() : options.fitted_date;
  f.command_line = options.command_line;
  std::string why;
  if (!gpu_matches_card(profile.provenance.gpu_name, card, &why)) {
    if (!options.force) {
      throw Error(profile.path + ": provenance.gpu_name: '" + profile.provenance.gpu_name +
                  "' does not match card " + card.name + " (" + card.display_name + "): " + why +
                  "; fit it to the card it was measured on, or pass --force to accept it");
    }
    f.notes.push_back("fitted with --force: GPU '" + profile.provenance.gpu_name +
                      "' does not match card " + card.name + " (" + why + ")");
  }
  f.card_compute = card.compute_efficiency;
  f.card_compute_fp8 = card.compute_efficiency_fp8 > 0 ? card.compute_efficiency_fp8 : card.compute_efficiency;
  f.card_bandwidth = card.bandwidth_efficiency;
  f.card_floor = card.kernel_floor_s;
  f.card_peak_bandwidth = card.memory_bandwidth;

  // GEMM groups, in a fixed order.
  const Precision native = native_half(card);
  const Precision other = native == Precision::kBf16 ? Precision::kFp16 : Precision::kBf16;
  std::vector<Precision> order = {native, other, Precision::kFp8};
  FitSpec spec;
  spec.peak_bandwidth = card.memory_bandwidth;
  spec.bandwidth_prior = card.bandwidth_efficiency;
  spec.floor_prior = card.kernel_floor_s;
  std::vector<Precision> group_dtype;
  std::map<Precision, int> skipped;
  for (const Precision p : order) {
    bool present = false;
    for (const auto& g : profile.gemm) present = present || g.dtype == p;
    if (!present) continue;
    if (!card.supports(p)) {
      for (const auto& g : profile.gemm) skipped[p] += g.dtype == p;
      continue;
    }
    const double prior = p == Precision::kFp8 ? f.card_compute_fp8 : card.compute_efficiency;
    spec.groups.push_back({std::string(precision_name(p)), prior, false});
    group_dtype.push_back(p);
  }
  for (const auto& [p, count] : skipped) {
    f.notes.push_back(std::to_string(count) + " " + std::string(precision_name(p)) +
                      " GEMM samples left out: the card has no " + std::string(precision_name(p)) +
                      " in dense_peak");
  }
  for (const auto& g : profile.gemm) {
    const auto it = std::find(group_dtype.begin(), group_dtype.end(), g.dtype);
    if (it == group_dtype.end()) continue;
    KernelSample s;
    s.label = gemm_label(g);
    s.group = static_cast<int>(it - group_dtype.begin());
    s.flops = gemm_flops(g);
    s.bytes = gemm_bytes(g);
    s.peak_flops = card.peak(g.dtype);
    s.seconds = median(g.seconds);
    f.gemm_samples.push_back(s);
  }
  if (f.gemm_samples.empty()) {
    throw Error(profile.path + ": gemm: no sample the card can run (card " + card.name +
                " supports " + card.supported_precisions() + "); accepted GEMM dtypes: fp16, bf16, fp8");
  }
  f.gemm = fit_roofline(f.gemm_samples, spec);

  const auto group_fit = [&](Precision p) -> std::optional<ParamFit> {
    for (std::size_t k = 0; k < group_dtype.size(); ++k) {
      if (group_dtype[k] == p) return f.gemm.compute[k];
    }
    return std::nullopt;
  };
  const auto nat = group_fit(native), oth = group_fit(other);
  if (nat && nat->fitted) {
    f.compute = *nat;
    f.compute_dtype = std::string(precision_name(native));
    if (oth) f.compute_other_half = *oth;
  } else if (oth && oth->fitted) {
    f.compute = *oth;
    f.compute_dtype = std::string(precision_name(other));
    f.notes.push_back("efficiency.compute from " + f.compute_dtype + " GEMMs: no fitted " +
                      std::string(precision_name(native)) + " GEMMs in the profile");
  } else {
    f.compute = nat ? *nat : (oth ? *oth : ParamFit{});
    f.compute.name = "compute";
    f.compute.fitted = false;
    f.compute.value = card.compute_efficiency;
    if (f.compute.note.empty()) f.compute.note = "not fitted: no 16-bit GEMMs in the profile";
    f.compute_dtype = std::string(precision_name(native));
  }
  if (card.supports(Precision::kFp8)) {
    if (const auto e8 = group_fit(Precision::kFp8)) f.compute_fp8 = *e8;
  }
  f.bandwidth = f.gemm.bandwidth;
  f.floor = f.gemm.floor;
  f.floor_method = "GEMM samples at the floor";
  if (!f.floor.fitted) {
    f.launch.present = profile.launch.present;
    if (!profile.launch.small_kernel_graph_s.empty()) {
      const double v = median(profile.launch.small_kernel_graph_s);
      const std::string gemm_note = f.floor.note;
      f.floor = ParamFit{"floor", v, true, quantile(profile.launch.small_kernel_graph_s, 0.05),
                         quantile(profile.launch.small_kernel_graph_s, 0.95),
                         static_cast<int>(profile.launch.small_kernel_graph_s.size()),
                         "GEMM fit " + gemm_note};
      f.floor_method = "launch benchmark: median time of one small kernel (" +
                       (profile.launch.small_kernel.empty() ? std::string("small kernel")
                                                            : profile.launch.small_kernel) +
                       ") inside a CUDA graph";
    } else {
      f.floor_method = "kept the card file's value";
    }
  }
  // A fitted efficiency is a fraction of the card's datasheet peak. Below 5% no cuBLAS GEMM on a
  // working, unshared GPU runs; above 1.2 the GPU would outrun its datasheet by more than boost
  // clocks allow. Either means a measurement of something else (wrong units, host time in the
  // timing, another or a throttled GPU), which would otherwise be written out and applied.
  constexpr double kLowestEfficiency = 0.05, kHighestEfficiency = 1.2;
  struct Checked {
    const ParamFit* fit;
    std::string key, op, peak;
  };
  std::vector<Checked> checked = {
      {&f.bandwidth, "memory_bandwidth", "GEMMs (memory-bound and ridge samples, all dtypes)",
       fmt("%.3g", card.memory_bandwidth / 1e12) + " TB/s"},
      {&f.compute, "compute", f.compute_dtype + " GEMMs",
       fmt("%.4g", card.peak(native) / 1e12) + " TFLOPS " + f.compute_dtype}};
  if (f.compute_fp8) {
    checked.push_back({&*f.compute_fp8, "compute_fp8", "fp8 GEMMs",
                       fmt("%.4g", card.peak(Precision::kFp8) / 1e12) + " TFLOPS fp8"});
  }
  for (const Checked& c : checked) {
    const double v = c.fit->value;
    if (!c.fit->fitted || (v >= kLowestEfficiency && v <= kHighestEfficiency)) continue;
    throw Error(profile.path + ": " + c.op + ": fitted efficiency." + c.key + " " + num(v) +
                " of card " + card.name + "'s datasheet peak (" + c.peak + ") is not physical; accepted: " +
                num(kLowestEfficiency) + " to " + num(kHighestEfficiency) +
                " (below, no GEMM on a working GPU is that slow; above, the GPU outran its datasheet): "
                "check the profile's time units and that it was measured on this card, unshared");
  }
  for (ParamFit* p : {&f.compute, &f.bandwidth}) {
    if (p->fitted && p->value > 1) {
      f.notes.push_back("fitted " + p->name + " efficiency " + num(p->value) +
                        " > 1 is not applied: the card's datasheet peak is below what was measured");
    }
  }

  // Diagnostics: streaming kernels (beyond L2 only), attention, all-reduce, launch.
  const double floor_s = f.floor.value;
  const double bw_eff = f.bandwidth.value;
  const double e16 = f.compute.value;
  int in_cache = 0;
  for (const auto& b : profile.bandwidth) {
    if (profile.provenance.l2_bytes > 0 && b.buffer_bytes < 4 * profile.provenance.l2_bytes) {
      ++in_cache;
      continue;
    }
    KernelSample s;
    s.label = b.kernel + " " + fmt("%.0f", b.buffer_bytes / 1e6) + " MB";
    s.bytes = b.bytes_moved;
    s.seconds = median(b.seconds);
    (b.kernel == "read" ? f.read_samples : f.copy_samples).push_back(s);
  }
  if (in_cache > 0) {
    f.notes.push_back(std::to_string(in_cache) +
                      " bandwidth samples left out of the stream fit: buffers under 4x L2 (" +
                      fmt("%.0f", profile.provenance.l2_bytes / 1e6) + " MB)");
  }
  FitSpec stream;
  stream.peak_bandwidth = card.memory_bandwidth;
  stream.bandwidth_prior = bw_eff;
  stream.floor_prior = floor_s;
  stream.floor_fixed = true;
  if (!f.read_samples.empty()) f.stream_read = fit_roofline(f.read_samples, stream);
  if (!f.copy_samples.empty()) f.stream_copy = fit_roofline(f.copy_samples, stream);

  const Precision half = native;
  for (const auto& a : profile.attention_decode) {
    const double pairs = static_cast<double>(a.batch) * static_cast<double>(a.context);
    KernelSample s;
    s.label = "decode batch=" + std::to_string(a.batch) + " context=" + std::to_string(a.context);
    s.group = 0;
    s.flops = 4.0 * static_cast<double>(a.q_heads * a.head_dim) * pairs;
    s.bytes = pairs * 2.0 * static_cast<double>(a.kv_heads * a.head_dim) * a.kv_element_bytes;
    s.peak_flops = card.peak(half);
    s.seconds = median(a.seconds);
    f.decode_samples.push_back(s);
    if (f.decode_kernel.empty()) f.decode_kernel = a.kernel;
  }
  for (const auto& a : profile.attention_prefill) {
    const double b = static_cast<double>(a.batch), c = static_cast<double>(a.tokens);
    const double p = static_cast<double>(a.cached);
    const double pairs = b * c * (p + (c + 1) / 2);
    KernelSample s;
    s.label = "prefill batch=" + std::to_string(a.batch) + " tokens=" + std::to_string(a.tokens) +
              " cached=" + std::to_string(a.cached);
    s.group = 0;
    s.flops = 4.0 * static_cast<double>(a.q_heads * a.head_dim) * pairs;
    s.bytes = b * (p + c + c) * 2.0 * static_cast<double>(a.kv_heads * a.head_dim) * a.kv_element_bytes;
    s.peak_flops = card.peak(half);
    s.seconds = median(a.seconds);
    f.prefill_samples.push_back(s);
    if (f.prefill_kernel.empty()) f.prefill_kernel = a.kernel;
  }
  if (!f.decode_samples.empty()) {
    FitSpec d;
    d.groups = {{"attention", e16, true}};
    d.peak_bandwidth = card.memory_bandwidth;
    d.bandwidth_prior = bw_eff;
    d.floor_prior = floor_s;  // attention kernels get their own floor (split-K combine, ...)
    f.attention_decode = fit_roofline(f.decode_samples, d);
  }
  if (!f.prefill_samples.empty()) {
    FitSpec d;
    d.groups = {{"attention", e16 * 0.8, false}};
    d.peak_bandwidth = card.memory_bandwidth;
    d.bandwidth_prior = bw_eff;
    d.bandwidth_fixed = true;
    d.floor_prior = floor_s;
    f.attention_prefill = fit_roofline(f.prefill_samples, d);
  }
  f.allreduce = fit_allreduce(profile.allreduce);
  if (profile.launch.present) {
    f.launch.present = true;
    if (!profile.launch.launch_s.empty()) f.launch.launch_s = median(profile.launch.launch_s);
    if (!profile.launch.graph_kernel_s.empty()) f.launch.graph_kernel_s = median(profile.launch.graph_kernel_s);
    if (!profile.launch.small_kernel_graph_s.empty()) {
      f.launch.small_kernel_graph_s = median(profile.launch.small_kernel_graph_s);
    }
    f.launch.small_kernel = profile.launch.small_kernel;
  }
  return f;
}

namespace {

void write_param(std::ostream& o, const std::string& key, const ParamFit& p, double card_value,
                 bool is_floor, const std::string& from, const std::string& extra = "") {
  o << "  " << key << ":\n";
  o << "    value: " << num(p.value) << (is_floor ? "   # seconds" : "") << "\n";
  o << "    applied: " << (applied(p, is_floor) ? "true" : "false") << "\n";
  o << "    card_file_value: " << num(card_value) << "\n";
  o << "    fitted: " << (p.fitted ? "true" : "false") << "\n";
  o << "    ci95: [" << num(p.ci_low) << ", " << num(p.ci_high) << "]\n";
  o << "    samples: " << p.samples << "\n";
  o << "    from: " << quote(from) << "\n";
  if (!extra.empty()) o << extra;
  if (!p.note.empty()) o << "    note: " << quote(p.note) << "\n";
}

void write_quality(std::ostream& o, const std::string& indent, const FitQuality& q) {
  o << indent << "samples: " << q.samples << "\n";
  o << indent << "r2_log: " << num(q.r2_log) << "\n";
  o << indent << "r2: " << num(q.r2) << "\n";
  o << indent << "median_ape: " << num(q.median_ape) << "\n";
  o << indent << "p90_ape: " << num(q.p90_ape) << "\n";
  o << indent << "max_ape: " << num(q.max_ape) << "\n";
  o << indent << "regimes:\n";
  for (const auto& r : q.regimes) {
    o << indent << "  " << r.regime << ": {samples: " << r.samples << ", median_ape: " << num(r.median_ape)
      << ", p90_ape: " << num(r.p90_ape) << ", bias: " << num(r.bias) << "}\n";
  }
}

void write_provenance_value(std::ostream& o, const std::string& indent, const std::string& key,
                            const nlohmann::json& v) {
  if (v.is_object()) {
    o << indent << key << ":\n";
    for (const auto& [k, x] : v.items()) write_provenance_value(o, indent + "  ", k, x);
  } else if (v.is_string()) {
    o << indent << key << ": " << quote(v.get<std::string>()) << "\n";
  } else if (v.is_array()) {
    o << indent << key << ": " << v.dump() << "\n";  // JSON flow sequences are YAML
  } else {
    o << indent << key << ": " << (v.is_null() ? "null" : v.dump()) << "\n";
  }
}

}  // namespace

std::string card_profile_yaml(const CardFit& f) {
  std::ostringstream o;
  o << "# capsim calibration of card " << f.card << " (" << f.card_display_name
    << "), written by `capsim calibrate fit`.\n"
    << "# capsim applies every efficiency below marked `applied: true` to the card whenever this\n"
    << "# file exists (docs/calibration.md); `capsim --no-calibration ...` or CAPSIM_NO_CALIBRATION=1\n"
    << "# turns that off. Refit rather than edit: each value carries the statistics of its fit.\n";
  o << "format: " << kCardProfileFormat << "\n";
  o << "version: " << kCardProfileVersion << "\n";
  o << "card: " << f.card << "\n";
  o << "fitted: " << quote(f.fitted_date) << "\n";
  o << "forced: " << (f.forced ? "true" : "false") << "\n";
  if (!f.command_line.empty()) o << "command: " << quote(f.command_line) << "\n";
  o << "provenance:\n";
  o << "  source: " << quote(f.source) << "\n";
  o << "  profile: " << quote(f.profile_path) << "\n";
  // gpu_name first (the loader checks it), then the rest as measured.
  o << "  gpu_name: " << quote(f.provenance.gpu_name) << "\n";
  if (f.provenance.raw.is_object()) {
    for (const auto& [k, v] : f.provenance.raw.items()) {
      if (k == "gpu_name" || k == "source" || k == "profile") continue;
      write_provenance_value(o, "  ", k, v);
    }
  } else {
    o << "  compute_capability: " << quote(f.provenance.compute_capability) << "\n";
    o << "  date: " << quote(f.provenance.date) << "\n";
  }

  o << "model: \"t = max(sqrt((F / (P * compute))^2 + (B / (BW * memory_bandwidth))^2), kernel_floor)"
       " per kernel, as sim/cost/roofline_cost.cc\"\n";
  o << "efficiency:\n";
  write_param(o, "memory_bandwidth", f.bandwidth, f.card_bandwidth, false,
              "cuBLASLt GEMMs, all dtypes, memory-bound and ridge samples");
  write_param(o, "compute", f.compute, f.card_compute, false, f.compute_dtype + " GEMMs",
              "    dtype: " + f.compute_dtype + "\n");
  if (f.compute_fp8) {
    write_param(o, "compute_fp8", *f.compute_fp8, f.card_compute_fp8, false, "fp8 (e4m3) GEMMs");
  }
  write_param(o, "kernel_floor", f.floor, f.card_floor, true, f.floor_method);

  o << "fit:\n";
  o << "  what: " << quote("cuBLASLt GEMMs, one kernel each, jointly: " +
                          std::to_string(f.gemm_samples.size()) + " shapes") << "\n";
  write_quality(o, "  ", f.gemm.quality);
  o << "  iterations: " << f.gemm.iterations << "\n";

  o << "diagnostics:   # measured and fitted, not applied to the card\n";
  if (f.compute_other_half) {
    const ParamFit& p = *f.compute_other_half;
    o << "  compute_" << p.name << ": {value: " << num(p.value) << ", fitted: " << (p.fitted ? "true" : "false")
      << ", ci95: [" << num(p.ci_low) << ", " << num(p.ci_high) << "], samples: " << p.samples << "}\n";
  }
  const auto stream_fit = [&](const char* key, const std::optional<RooflineFit>& s) {
    if (!s) return;
    o << "  " << key << ":\n";
    o << "    bandwidth_efficiency: " << num(s->bandwidth.value) << "\n";
    o << "    bytes_per_s: " << num(s->bandwidth.value * f.card_peak_bandwidth) << "\n";
    o << "    ci95: [" << num(s->bandwidth.ci_low) << ", " << num(s->bandwidth.ci_high) << "]\n";
    write_quality(o, "    ", s->quality);
  };
  stream_fit("stream_read", f.stream_read);
  stream_fit("stream_copy", f.stream_copy);
  if (f.attention_decode) {
    const auto& a = *f.attention_decode;
    o << "  attention_decode:\n";
    o << "    kernel: " << quote(f.decode_kernel.empty() ? "unknown" : f.decode_kernel) << "\n";
    o << "    bandwidth_efficiency: " << num(a.bandwidth.value) << "\n";
    o << "    bandwidth_fitted: " << (a.bandwidth.fitted ? "true" : "false") << "\n";
    o << "    ci95: [" << num(a.bandwidth.ci_low) << ", " << num(a.bandwidth.ci_high) << "]\n";
    o << "    floor_s: " << num(a.floor.value) << "\n";
    o << "    floor_fitted: " << (a.floor.fitted ? "true" : "false") << "\n";
    write_quality(o, "    ", a.quality);
  }
  if (f.attention_prefill) {
    const auto& a = *f.attention_prefill;
    const ParamFit& c = a.compute[0];
    o << "  attention_prefill:\n";
    o << "    kernel: " << quote(f.prefill_kernel.empty() ? "unknown" : f.prefill_kernel) << "\n";
    o << "    compute_efficiency: " << num(c.value) << "\n";
    o << "    compute_fitted: " << (c.fitted ? "true" : "false") << "\n";
    o << "    ci95: [" << num(c.ci_low) << ", " << num(c.ci_high) << "]\n";
    o << "    floor_s: " << num(a.floor.value) << "\n";
    o << "    floor_fitted: " << (a.floor.fitted ? "true" : "false") << "\n";
    o << "    implied_attention_compute_scale: " << num(f.compute.value > 0 ? c.value / f.compute.value : 0)
      << "   # an engine profile's kernels.attention_compute_scale, for this kernel\n";
    write_quality(o, "    ", a.quality);
  }
  if (f.launch.present) {
    o << "  launch:\n";
    o << "    empty_kernel_launch_s: " << num(f.launch.launch_s) << "\n";
    o << "    empty_kernel_graph_s: " << num(f.launch.graph_kernel_s) << "\n";
    o << "    small_kernel_graph_s: " << num(f.launch.small_kernel_graph_s) << "\n";
    o << "    small_kernel: " << quote(f.launch.small_kernel) << "\n";
  }
  if (f.allreduce.samples > 0) {
    o << "  allreduce:\n";
    o << "    gpus: " << f.allreduce.gpus << "\n";
    o << "    fitted: " << (f.allreduce.fitted ? "true" : "false") << "\n";
    o << "    latency_s: " << num(f.allreduce.latency_s) << "\n";
    o << "    bus_bytes_per_s: " << num(f.allreduce.bus_bytes_per_s) << "\n";
    o << "    samples: " << f.allreduce.samples << "\n";
    o << "    median_ape: " << num(f.allreduce.median_ape) << "\n";
    if (!f.allreduce.note.empty()) o << "    note: " << quote(f.allreduce.note) << "\n";
  }
  o << "notes:\n";
  if (f.notes.empty()) o << "  []\n";
  for (const auto& n : f.notes) o << "  - " << quote(n) << "\n";
  return o.str();
}

}  // namespace capsim::calibration
