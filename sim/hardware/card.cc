#include "sim/hardware/card.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <tuple>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"
#include "sim/hardware/calibration_profile.h"
#include "sim/hardware/measured_kernels.h"

namespace capsim {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// -1: never set (the environment decides), 0: off, 1: on.
int& calibration_setting() {
  static int setting = -1;
  return setting;
}

int whole(double v, const std::string& where) {
  if (v != std::floor(v) || v > 1e6) throw Error(where + ": expected a whole number");
  return static_cast<int>(v);
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Plausibility bounds of a card file's numbers: generous (a few times today's largest part), so
// that only a typo or a unit slip (GB/s written as TB/s, a sparse rate times 1000) is refused,
// with the field, the value and the accepted range in the message.
void check_range(const YamlDoc& doc, const std::string& field, double v, double lo, double hi,
                 bool lo_inclusive, const std::string& unit, double scale) {
  const bool low = lo_inclusive ? v < lo : v <= lo;
  if (low || v > hi || !std::isfinite(v)) {
    throw Error(doc.where(field) + ": " + number(v / scale) + " " + unit +
                " is outside the accepted range " + (lo_inclusive ? "[" : "(") +
                number(lo / scale) + ", " + number(hi / scale) + "] " +
                unit);
  }
}

}  // namespace

double Card::peak(Precision p) const { return dense_peak.at(p); }

double Card::pcie_bandwidth() const {
  // Per-lane usable rate after encoding: gen3 0.985 GB/s, gen4 1.969, gen5 3.938 (PCI-SIG).
  double per_lane = 0;
  switch (pcie_generation) {
    case 3: per_lane = 0.985e9; break;
    case 4: per_lane = 1.969e9; break;
    case 5: per_lane = 3.938e9; break;
    case 6: per_lane = 7.563e9; break;
    default: per_lane = 0.985e9; break;
  }
  return per_lane * pcie_lanes;
}

std::string Card::TpLink::name() const {
  switch (kind) {
    case Kind::kNvlink: return "NVLink";
    case Kind::kPcieP2p: return "PCIe P2P";
    case Kind::kPcieHost: return "PCIe via host (no P2P)";
    case Kind::kSingle: break;
  }
  return "-";
}

Card::TpLink Card::tp_link(int tp) const {
  TpLink l;
  if (tp <= 1) return l;
  if (nvlink_bandwidth > 0 && tp <= nvlink_gpus) {
    l.kind = TpLink::Kind::kNvlink;
    l.bandwidth = nvlink_bandwidth / 2;  // the card files give both directions together
  } else if (peer_to_peer) {
    l.kind = TpLink::Kind::kPcieP2p;
    l.bandwidth = pcie_bandwidth();
  } else {
    // Staged through host memory: each transfer crosses PCIe twice (device -> host -> device).
    l.kind = TpLink::Kind::kPcieHost;
    l.bandwidth = pcie_bandwidth() * 0.5;
  }
  return l;
}

std::string Card::supported_precisions() const {
  std::string out;
  for (const auto p : all_precisions()) {
    if (supports(p)) out += (out.empty() ? "" : ", ") + std::string(precision_name(p));
  }
  return out;
}

namespace {

// A word field `{value: <one of accepted>, source: <key of references>}` (plus the `extra` keys,
// required), or "" when absent.
std::string sourced_word(const YamlDoc& doc, const std::string& field, const std::vector<std::string>& accepted,
                         const std::vector<std::string>& extra) {
  const YAML::Node n = doc.find(field);
  if (!n) return "";
  std::string keys = "value";
  for (const auto& e : extra) keys += ", " + e;
  keys += ", source";
  std::vector<std::string> allowed = {"value", "source"};
  allowed.insert(allowed.end(), extra.begin(), extra.end());
  if (!n.IsMap()) throw Error(doc.where(field) + ": expected a mapping with " + keys);
  check_keys(n, doc.where(field), allowed);
  for (const auto& k : allowed) {
    if (!n[k]) throw Error(doc.where(field) + "." + k + ": missing (required: " + keys + ")");
  }
  const std::string src = yaml_scalar(n["source"], doc.where(field) + ".source");
  if (!doc.references().count(src)) {
    throw Error(doc.where(field) + ": source '" + src + "' is not a key of references");
  }
  const std::string v = yaml_scalar(n["value"], doc.where(field) + ".value");
  if (std::find(accepted.begin(), accepted.end(), v) == accepted.end()) {
    std::string list;
    for (const auto& a : accepted) list += (list.empty() ? "" : ", ") + a;
    throw Error(doc.where(field) + ": '" + v + "' is not accepted; accepted: " + list);
  }
  return v;
}

}  // namespace

std::string Card::efficiency_data_text() const {
  if (efficiency_data.empty()) return "unstated";
  return efficiency_data + (efficiency_data == "assumed" ? " from " : ": ") + efficiency_data_basis;
}

Card CardCatalogue::load_file(const std::string& path) {
  const YamlDoc doc = YamlDoc::load(path);
  check_keys(doc.root(), path, {"name", "display_name", "aliases", "kind", "vendor", "architecture", "references",
                           "card_class", "memory", "memory_visible", "memory_bandwidth", "dense_peak", "interconnect",
                           "efficiency", "tdp", "ecc", "mig_instances"});
  if (const auto n = doc.find("interconnect")) {
    check_keys(n, doc.where("interconnect"),
               {"nvlink_bandwidth", "nvlink_gpus", "pcie_generation", "pcie_lanes", "peer_to_peer"});
  }
  if (const auto n = doc.find("efficiency")) {
    check_keys(n, doc.where("efficiency"),
               {"compute", "compute_fp8", "compute_fp4", "memory_bandwidth", "memory_bandwidth_fp8",
                "memory_bandwidth_fp4", "attention_bandwidth", "kernel_floor", "data"});
  }
  Card c;
  c.file = path;
  c.name = doc.string("name");
  c.display_name = doc.optional_string("display_name").value_or(c.name);
  c.vendor = doc.optional_string("vendor").value_or("");
  c.architecture = doc.optional_string("architecture").value_or("");
  const std::string kind = doc.optional_string("kind").value_or("gpu");
  if (kind != "gpu" && kind != "cpu") {
    throw Error(doc.where("kind") + ": '" + kind + "' is not a card kind; accepted: gpu, cpu");
  }
  c.is_cpu = kind == "cpu";
  if (const auto a = doc.find("aliases")) {
    if (!a.IsSequence()) throw Error(doc.where("aliases") + ": expected a list of names");
    for (const auto& x : a) c.aliases.push_back(yaml_scalar(x, doc.where("aliases")));
  }
  using units::Kind;
  c.memory_bytes = doc.quantity("memory", Kind::kBytes);
  c.visible_memory_bytes =
      doc.optional_quantity("memory_visible", Kind::kBytes).value_or(c.memory_bytes);
  c.memory_bandwidth = doc.quantity("memory_bandwidth", Kind::kBandwidth);
  if (c.memory_bytes <= 0) throw Error(doc.where("memory") + ": must be > 0");
  if (c.memory_bandwidth <= 0) throw Error(doc.where("memory_bandwidth") + ": must be > 0");
  check_range(doc, "memory", c.memory_bytes, 0, 16e12, false, "GB", 1e9);
  check_range(doc, "memory_bandwidth", c.memory_bandwidth, 0, 100e12, false, "GB/s", 1e9);
  if (c.visible_memory_bytes > c.memory_bytes * 1.1) {
    throw Error(doc.where("memory_visible") + ": larger than memory");
  }
  const YAML::Node peaks = doc.find("dense_peak");
  if (!peaks || !peaks.IsMap() || peaks.size() == 0) {
    throw Error(doc.where("dense_peak") +
                ": missing; expected a mapping precision -> {value: <rate>, source: <key>}");
  }
  for (const auto& kv : peaks) {
    const std::string key = yaml_scalar(kv.first, doc.where("dense_peak"));
    const Precision p = parse_precision(key, doc.where("dense_peak." + key));
    c.dense_peak[p] = doc.quantity("dense_peak." + key, Kind::kCompute);
    check_range(doc, "dense_peak." + key, c.dense_peak[p], 0, 1e18, false, "TFLOPS", 1e12);
    c.sources["dense_peak." + key] = doc.source_of("dense_peak." + key);
  }
  // One FP4 tensor-core rate serves both 4-bit float formats (key `fp4` = nvfp4).
  for (const auto& [from, to] : {std::pair{Precision::kNvfp4, Precision::kMxfp4},
                                std::pair{Precision::kMxfp4, Precision::kNvfp4}}) {
    if (c.dense_peak.count(from) && !c.dense_peak.count(to)) c.dense_peak[to] = c.dense_peak[from];
  }
  c.nvlink_bandwidth =
      doc.optional_quantity("interconnect.nvlink_bandwidth", Kind::kBandwidth).value_or(0);
  c.nvlink_gpus = whole(doc.optional_quantity("interconnect.nvlink_gpus", std::nullopt)
                            .value_or(c.nvlink_bandwidth > 0 ? 8 : 0),
                        doc.where("interconnect.nvlink_gpus"));
  c.pcie_generation = whole(doc.optional_quantity("interconnect.pcie_generation", std::nullopt)
                                .value_or(4),
                            doc.where("interconnect.pcie_generation"));
  c.pcie_lanes = whole(doc.optional_quantity("interconnect.pcie_lanes", std::nullopt).value_or(16),
                       doc.where("interconnect.pcie_lanes"));
  check_range(doc, "interconnect.nvlink_bandwidth", c.nvlink_bandwidth, 0, 100e12, true, "GB/s", 1e9);
  check_range(doc, "interconnect.nvlink_gpus", c.nvlink_gpus, 0, 1024, true, "GPUs", 1);
  check_range(doc, "interconnect.pcie_generation", c.pcie_generation, 1, 7, true, "", 1);
  check_range(doc, "interconnect.pcie_lanes", c.pcie_lanes, 1, 256, true, "lanes", 1);  // CPUs: 160
  c.peer_to_peer = doc.has("interconnect.peer_to_peer") && doc.flag("interconnect.peer_to_peer");
  c.tdp_watts = doc.quantity("tdp", Kind::kPower);
  check_range(doc, "tdp", c.tdp_watts, 0, 20e3, false, "W", 1);
  c.ecc = doc.flag("ecc");
  c.mig_instances = whole(doc.optional_quantity("mig_instances", std::nullopt).value_or(0),
                          doc.where("mig_instances"));
  c.bandwidth_efficiency = doc.quantity("efficiency.memory_bandwidth", std::nullopt);
  c.compute_efficiency = doc.quantity("efficiency.compute", std::nullopt);
  c.kernel_floor_s = doc.optional_quantity("efficiency.kernel_floor", Kind::kTime).value_or(0);
  check_range(doc, "efficiency.kernel_floor", c.kernel_floor_s, 0, 1e-3, true, "us", 1e-6);
  c.compute_efficiency_fp8 = doc.optional_quantity("efficiency.compute_fp8", std::nullopt).value_or(0);
  if (c.compute_efficiency_fp8 > 1) {
    throw Error(doc.where("efficiency.compute_fp8") + ": " + std::to_string(c.compute_efficiency_fp8) +
                " is not a fraction in (0, 1]");
  }
  c.attention_bandwidth_efficiency =
      doc.optional_quantity("efficiency.attention_bandwidth", std::nullopt).value_or(0);
  if (doc.has("efficiency.attention_bandwidth") &&
      !(c.attention_bandwidth_efficiency > 0 && c.attention_bandwidth_efficiency <= 1)) {
    throw Error(doc.where("efficiency.attention_bandwidth") + ": " +
                std::to_string(c.attention_bandwidth_efficiency) + " is not a fraction in (0, 1]");
  }
  if (c.compute_efficiency_fp8 > 0 && !c.supports(Precision::kFp8)) {
    throw Error(doc.where("efficiency.compute_fp8") + ": the card has no fp8 in dense_peak");
  }
  // The per-format GEMM efficiencies (fp8 and fp4 kernels), each optional and only where the
  // card has that format's tensor cores; 0 = as the 16-bit value.
  for (const auto& [field, out, p, key] :
       {std::tuple{"efficiency.compute_fp4", &c.compute_efficiency_fp4, Precision::kNvfp4, "fp4"},
        std::tuple{"efficiency.memory_bandwidth_fp8", &c.bandwidth_efficiency_fp8, Precision::kFp8, "fp8"},
        std::tuple{"efficiency.memory_bandwidth_fp4", &c.bandwidth_efficiency_fp4, Precision::kNvfp4, "fp4"}}) {
    if (!doc.has(field)) continue;
    *out = doc.quantity(field, std::nullopt);
    if (!(*out > 0 && *out <= 1)) {
      throw Error(doc.where(field) + ": " + std::to_string(*out) + " is not a fraction in (0, 1]");
    }
    if (!c.supports(p)) throw Error(doc.where(field) + ": the card has no " + key + " in dense_peak");
  }
  for (const char* f : {"efficiency.memory_bandwidth", "efficiency.compute"}) {
    const double v = doc.quantity(f, std::nullopt);
    if (v <= 0 || v > 1) {
      throw Error(doc.where(f) + ": " + std::to_string(v) + " is not a fraction in (0, 1]");
    }
  }
  c.card_class = sourced_word(doc, "card_class", {"datacenter", "workstation", "consumer"}, {});
  c.efficiency_data = sourced_word(doc, "efficiency.data", {"measured", "partial", "assumed"}, {"basis"});
  if (!c.efficiency_data.empty()) {
    c.efficiency_data_basis = yaml_scalar(doc.find("efficiency.data")["basis"], doc.where("efficiency.data.basis"));
    if (c.efficiency_data_basis.empty()) throw Error(doc.where("efficiency.data.basis") + ": empty; say what the efficiencies rest on");
  }
  for (const char* f : {"card_class", "efficiency.data", "memory", "memory_visible", "memory_bandwidth", "tdp",
                        "interconnect.nvlink_bandwidth", "efficiency.memory_bandwidth",
                        "efficiency.compute", "efficiency.compute_fp8", "efficiency.compute_fp4",
                        "efficiency.memory_bandwidth_fp8", "efficiency.memory_bandwidth_fp4",
                        "efficiency.attention_bandwidth", "efficiency.kernel_floor"}) {
    const std::string s = doc.source_of(f);
    if (!s.empty()) c.sources[f] = s;
  }
  return c;
}

void CardCatalogue::set_use_calibration(bool on) { calibration_setting() = on ? 1 : 0; }

bool CardCatalogue::use_calibration() {
  if (calibration_setting() >= 0) return calibration_setting() == 1;
  const char* env = std::getenv("CAPSIM_NO_CALIBRATION");
  return !(env && std::string(env) == "1");
}

Card CardCatalogue::load_catalogue_file(const std::string& dir, const std::string& path) {
  namespace fs = std::filesystem;
  Card c = load_file(path);
  if (use_calibration()) {
    fs::path cards_dir = fs::path(dir).lexically_normal();
    if (cards_dir.filename().empty()) cards_dir = cards_dir.parent_path();
    const fs::path profile = cards_dir.parent_path() / "profiles" / (c.name + ".yaml");
    if (fs::exists(profile)) {
      calibration::apply_calibration_profile(c, profile.string());
      // Measured on this card: the profile is refused unless it was fitted on it.
      const bool bw = c.sources["efficiency.memory_bandwidth"] == c.calibration;
      const bool compute = c.sources["efficiency.compute"] == c.calibration;
      if (!c.calibration.empty() && (bw || compute)) {
        c.efficiency_data = bw && compute ? "measured" : c.efficiency_data == "measured" ? "measured" : "partial";
        c.efficiency_data_basis = c.calibration;
      }
    }
  }
  {
    fs::path cards_dir = fs::path(dir).lexically_normal();
    if (cards_dir.filename().empty()) cards_dir = cards_dir.parent_path();
    const fs::path tables = cards_dir.parent_path() / "kernels" / c.name;
    c.measured_kernels = MeasuredKernels::on_demand(tables.string(), c.name);
  }
  return c;
}

CardCatalogue CardCatalogue::load_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error(dir + ": card catalogue directory not found");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  CardCatalogue cat;
  std::map<std::string, std::string> owner;  // lower-case name or alias -> file
  for (const auto& f : files) {
    Card c = load_catalogue_file(dir, f);
    std::vector<std::string> keys = {c.name};
    keys.insert(keys.end(), c.aliases.begin(), c.aliases.end());
    for (const auto& k : keys) {
      auto [it, fresh] = owner.emplace(lower(k), f);
      if (!fresh) throw Error(f + ": name or alias '" + k + "' is also used by " + it->second);
    }
    cat.cards_.push_back(std::move(c));
  }
  return cat;
}

std::vector<std::string> CardCatalogue::names() const {
  std::vector<std::string> out;
  for (const auto& c : cards_) out.push_back(c.name);
  return out;
}

const Card& CardCatalogue::find(const std::string& wanted) const {
  const std::string key = lower(wanted);
  for (const auto& c : cards_) {
    if (lower(c.name) == key) return c;
  }
  for (const auto& c : cards_) {
    for (const auto& a : c.aliases) {
      if (lower(a) == key) return c;
    }
  }
  // The non-throwing exists(): a name too long for the file system (ENAMETOOLONG) is simply no
  // such file; the throwing one let std::filesystem_error escape (found by fuzz_scenario).
  std::error_code ec;
  if (wanted.size() > 5 && wanted.substr(wanted.size() - 5) == ".yaml" &&
      std::filesystem::exists(wanted, ec)) {
    extra_.push_back(load_file(wanted));
    return extra_.back();
  }
  throw Error(unknown_name_message("card", wanted, names()));
}

}  // namespace capsim
