#include "sim/calibration/card_profile.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/deployment.h"
#include "sim/report/table.h"

namespace capsim::calibration {
namespace {

std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      cur += static_cast<char>(std::tolower(c));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

bool is_memory_token(const std::string& t) {
  return t.size() > 2 && ends_with(t, "gb") && std::isdigit(static_cast<unsigned char>(t[0]));
}

// "sxm4" -> "sxm"; "pcie" -> "pcie"; "nvl" -> "nvl"; else "".
std::string variant_of(const std::string& t) {
  if (starts_with(t, "sxm")) return "sxm";
  if (t == "pcie") return "pcie";
  if (t == "nvl") return "nvl";
  return "";
}

// h100, a100, l40s, mi300x, t4, a10g, 4090 — not 80gb, hbm3, sxm5, gen5, ddr5.
bool is_model_token(const std::string& t) {
  bool digit = false, alpha = false;
  for (const char c : t) {
    if (std::isdigit(static_cast<unsigned char>(c))) digit = true;
    else alpha = true;
  }
  if (!digit) return false;
  if (!alpha) return t.size() >= 3;
  if (is_memory_token(t)) return false;
  for (const char* p : {"hbm", "sxm", "gen", "ddr", "gddr", "pcie", "nvl"}) {
    if (starts_with(t, p)) return false;
  }
  return true;
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::string num(double v) { return fmt("%.6g", v); }
std::string quote(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool gpu_matches_card(const std::string& gpu_name, const Card& card, std::string* why) {
  std::set<std::string> card_tokens;
  for (const auto& s : std::vector<std::string>{card.name, card.display_name}) {
    for (const auto& t : tokens(s)) card_tokens.insert(t);
  }
  for (const auto& a : card.aliases) {
    for (const auto& t : tokens(a)) card_tokens.insert(t);
  }
  std::set<std::string> gpu_models, gpu_variants, gpu_memory, card_variants, card_memory;
  for (const auto& t : tokens(gpu_name)) {
    if (is_model_token(t)) gpu_models.insert(t);
    if (!variant_of(t).empty()) gpu_variants.insert(variant_of(t));
    if (is_memory_token(t)) gpu_memory.insert(t);
  }
  for (const auto& t : card_tokens) {
    if (!variant_of(t).empty()) card_variants.insert(variant_of(t));
    if (is_memory_token(t)) card_memory.insert(t);
  }
  const auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  bool model = false;
  for (const auto& t : gpu_models) model = model || card_tokens.count(t) > 0;
  if (!model) {
    return fail(gpu_models.empty()
                    ? "no GPU model (h100, a100, 4090, ...) in the name"
                    : "the GPU is a " + join(gpu_models) + ", the card's names do not include it");
  }
  if (!gpu_variants.empty() && !card_variants.empty()) {
    bool any = false;
    for (const auto& v : gpu_variants) any = any || card_variants.count(v) > 0;
    if (!any) return fail("the GPU is " + join(gpu_variants) + ", the card is " + join(card_variants));
  }
  if (!gpu_memory.empty() && !card_memory.empty()) {
    bool any = false;
    for (const auto& v : gpu_memory) any = any || card_memory.count(v) > 0;
    if (!any) return fail("the GPU has " + join(gpu_memory) + ", the card " + join(card_memory));
  }
  return true;
}

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

namespace {

struct ProfileField {
  double value = 0;
  bool applied = false;
};

// efficiency.<key>: {value: <number>, applied: true|false, ...}.
std::optional<ProfileField> profile_field(const YamlDoc& doc, const std::string& key, bool required,
                                          const std::string& accepted) {
  const std::string field = "efficiency." + key;
  const YAML::Node n = doc.find(field);
  if (!n) {
    if (!required) return std::nullopt;
    throw Error(doc.where(field) + ": missing (required); expected {value: " + accepted +
                ", applied: true|false}");
  }
  if (!n.IsMap() || !n["value"] || !n["applied"]) {
    throw Error(doc.where(field) + ": expected {value: " + accepted + ", applied: true|false}");
  }
  ProfileField f;
  const std::string text = n["value"].Scalar();
  try {
    f.value = n["value"].as<double>();
  } catch (const YAML::Exception&) {
    throw Error(doc.where(field + ".value") + ": '" + text + "' is not a number; expected " + accepted);
  }
  const std::string a = n["applied"].Scalar();
  if (a != "true" && a != "false") {
    throw Error(doc.where(field + ".applied") + ": '" + a + "' is not a boolean; accepted: true, false");
  }
  f.applied = a == "true";
  if (!std::isfinite(f.value)) {
    throw Error(doc.where(field + ".value") + ": '" + text + "' is not a number; expected " + accepted);
  }
  return f;
}

std::string scalar(const YamlDoc& doc, const std::string& field) {
  const YAML::Node n = doc.find(field);
  if (!n || !n.IsScalar()) return "";
  return n.Scalar();
}

}  // namespace

void apply_calibration_profile(Card& card, const std::string& path) {
  const YamlDoc doc = YamlDoc::load(path);
  const std::string accepted_format = std::string("accepted: ") + kCardProfileFormat +
                                      " (written by `capsim calibrate fit`)";
  const std::string format = scalar(doc, "format");
  if (format.empty()) {
    throw Error(doc.where("format") + ": missing; this is not a capsim card calibration (" +
                accepted_format + ")");
  }
  if (format != kCardProfileFormat) {
    throw Error(doc.where("format") + ": '" + format + "' is not a capsim card calibration; " +
                accepted_format);
  }
  const std::string version = scalar(doc, "version");
  if (version != std::to_string(kCardProfileVersion)) {
    throw Error(doc.where("version") + ": '" + version + "' is not a supported version; accepted: " +
                std::to_string(kCardProfileVersion));
  }
  const std::string for_card = scalar(doc, "card");
  if (for_card.empty()) {
    throw Error(doc.where("card") + ": missing (required); expected the catalogue name of the card");
  }
  if (for_card != card.name) {
    throw Error(doc.where("card") + ": this calibration is for card '" + for_card + "', not '" +
                card.name + "'; a profile is named <card>.yaml after the card it calibrates");
  }
  const std::string gpu = scalar(doc, "provenance.gpu_name");
  if (gpu.empty()) {
    throw Error(doc.where("provenance.gpu_name") +
                ": missing (required); expected the name of the GPU the profile was measured on");
  }
  const std::string forced = scalar(doc, "forced");
  if (!forced.empty() && forced != "true" && forced != "false") {
    throw Error(doc.where("forced") + ": '" + forced + "' is not a boolean; accepted: true, false");
  }
  std::string why;
  if (forced != "true" && !gpu_matches_card(gpu, card, &why)) {
    throw Error(doc.where("provenance.gpu_name") + ": '" + gpu + "' does not match card " + card.name +
                " (" + card.display_name + "): " + why + "; refit on the right GPU, or refit with " +
                "`capsim calibrate fit --force` to accept it");
  }
  const std::string fraction = "a fraction in (0, 1]";
  const auto bw = profile_field(doc, "memory_bandwidth", true, fraction);
  const auto ce = profile_field(doc, "compute", true, fraction);
  const auto c8 = profile_field(doc, "compute_fp8", false, fraction);
  const auto fl = profile_field(doc, "kernel_floor", true, "seconds in [0, 0.001]");
  for (const auto& [key, f] : {std::pair{"memory_bandwidth", bw}, std::pair{"compute", ce},
                               std::pair{"compute_fp8", c8}}) {
    if (f && f->applied && !(f->value > 0 && f->value <= 1)) {
      throw Error(doc.where(std::string("efficiency.") + key + ".value") + ": " + num(f->value) +
                  " is not a fraction in (0, 1]");
    }
  }
  if (fl->applied && !(fl->value >= 0 && fl->value <= 1e-3)) {
    throw Error(doc.where("efficiency.kernel_floor.value") + ": " + num(fl->value) +
                " is not a kernel floor; accepted: 0 to 0.001 (seconds)");
  }
  if (c8 && c8->applied && !card.supports(Precision::kFp8)) {
    throw Error(doc.where("efficiency.compute_fp8") + ": card " + card.name +
                " has no fp8 in dense_peak; accepted only for cards with fp8");
  }

  // "calibration/profiles/h100-sxm.yaml fitted <date> from <GPU> (driver, CUDA, host)".
  std::string shown = std::filesystem::path(path).lexically_normal().generic_string();
  if (const auto at = shown.rfind("calibration/profiles/"); at != std::string::npos) shown = shown.substr(at);
  std::string from = gpu;
  std::vector<std::string> details;
  if (const auto d = scalar(doc, "provenance.driver"); !d.empty()) details.push_back("driver " + d);
  if (const auto d = scalar(doc, "provenance.cuda_runtime"); !d.empty()) details.push_back("CUDA runtime " + d);
  if (const auto d = scalar(doc, "provenance.hostname"); !d.empty()) details.push_back("host " + d);
  if (const auto d = scalar(doc, "provenance.source"); d == "vidur") details.push_back("Vidur profiles");
  if (!details.empty()) {
    from += " (";
    for (std::size_t i = 0; i < details.size(); ++i) from += (i ? ", " : "") + details[i];
    from += ")";
  }
  const std::string label = shown + " fitted " + scalar(doc, "fitted") + " from " + from;
  bool any = false;
  if (bw->applied) {
    card.bandwidth_efficiency = bw->value;
    card.sources["efficiency.memory_bandwidth"] = label;
    any = true;
  }
  if (ce->applied) {
    card.compute_efficiency = ce->value;
    card.sources["efficiency.compute"] = label;
    any = true;
  }
  if (c8 && c8->applied) {
    card.compute_efficiency_fp8 = c8->value;
    card.sources["efficiency.compute_fp8"] = label;
    any = true;
  }
  if (fl->applied) {
    card.kernel_floor_s = fl->value;
    card.sources["efficiency.kernel_floor"] = label;
    any = true;
  }
  if (any) card.calibration = label;
}

}  // namespace capsim::calibration
