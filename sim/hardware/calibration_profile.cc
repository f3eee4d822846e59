#include "sim/hardware/calibration_profile.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"

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

// As report/table.h's fmt("%.6g", v), which this layer does not see.
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

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
