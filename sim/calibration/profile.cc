#include "sim/calibration/profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_limits.h"

namespace capsim::calibration {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  std::string where(const std::string& field) const { return file_ + ": " + field; }

  const json& member(const json& obj, const std::string& key, const std::string& field,
                     const std::string& expected) const {
    if (!obj.contains(key) || obj.at(key).is_null()) {
      throw Error(where(field) + ": missing (required); expected " + expected);
    }
    return obj.at(key);
  }

  std::string string(const json& obj, const std::string& key, const std::string& field,
                     const std::string& expected) const {
    const json& v = member(obj, key, field, expected);
    if (!v.is_string() || v.get<std::string>().empty()) {
      throw Error(where(field) + ": expected a non-empty string: " + expected);
    }
    return v.get<std::string>();
  }

  std::string optional_string(const json& obj, const std::string& key) const {
    if (!obj.contains(key) || !obj.at(key).is_string()) return "";
    return obj.at(key).get<std::string>();
  }

  std::int64_t whole(const json& obj, const std::string& key, const std::string& field,
                     std::int64_t min = 1) const {
    const json& v = member(obj, key, field, "a whole number >= " + std::to_string(min));
    if (!v.is_number()) {
      throw Error(where(field) + ": expected a whole number >= " + std::to_string(min) + ", got " +
                  v.dump());
    }
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(min) || d > 9.0e15) {
      throw Error(where(field) + ": expected a whole number >= " + std::to_string(min) + ", got " +
                  v.dump());
    }
    return static_cast<std::int64_t>(d);
  }

  double positive(const json& obj, const std::string& key, const std::string& field,
                  const std::string& what) const {
    const json& v = member(obj, key, field, what);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
      throw Error(where(field) + ": expected " + what + " (a number > 0), got " + v.dump());
    }
    return v.get<double>();
  }

  std::vector<double> seconds(const json& obj, const std::string& field) const {
    const std::string f = field + ".seconds";
    const std::string expected = "a non-empty list of positive numbers (seconds, one per repetition)";
    if (!obj.contains("seconds")) throw Error(where(f) + ": missing (required); expected " + expected);
    const json& v = obj.at("seconds");
    if (!v.is_array() || v.empty()) throw Error(where(f) + ": expected " + expected);
    std::vector<double> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number() || !std::isfinite(v[i].get<double>()) || v[i].get<double>() <= 0) {
        throw Error(where(f + "[" + std::to_string(i) + "]") + ": " + v[i].dump() +
                    " is not a time; expected " + expected);
      }
      out.push_back(v[i].get<double>());
    }
    return out;
  }

  // An optional list section: absent or null = empty; anything but a list is refused.
  const json* list(const json& root, const std::string& key, const std::string& expected) const {
    if (!root.contains(key) || root.at(key).is_null()) return nullptr;
    if (!root.at(key).is_array()) throw Error(where(key) + ": expected a list of " + expected);
    return &root.at(key);
  }

  const json& entry(const json& list, std::size_t i, const std::string& key,
                    const std::string& expected) const {
    if (!list[i].is_object()) {
      throw Error(where(key + "[" + std::to_string(i) + "]") + ": expected an object " + expected);
    }
    return list[i];
  }

 private:
  std::string file_;
};

std::string idx(const std::string& key, std::size_t i) { return key + "[" + std::to_string(i) + "]"; }

double kv_bytes(const Reader& r, const json& e, const std::string& field) {
  const std::string key = e.contains("kv_dtype") ? "kv_dtype" : "dtype";
  if (!e.contains(key)) return 2;
  const json& v = e.at(key);
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s == "bf16" || s == "fp16") return 2;
  if (s == "fp8") return 1;
  throw Error(r.where(field + "." + key) + ": '" + s + "' is not a KV dtype; accepted: bf16, fp16, fp8");
}

}  // namespace

double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.size() == 1) return v[0];
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * f;
}

Profile load_profile(const std::string& path) {
  const std::string text = read_input_file(path, "calibration profile");
  json j;
  try {
    j = parse_json(text, path);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) +
                "; expected a capsim calibration profile written by capsim-calibrate");
  }
  Profile p = parse_profile(j, path);
  p.path = path;
  return p;
}

Profile parse_profile(const json& j, const std::string& file) {
  const Reader r(file);
  const std::string accepted_format =
      std::string("accepted: \"") + kProfileFormat + "\" (written by capsim-calibrate)";
  if (!j.is_object()) throw Error(file + ": expected a JSON object at the top level; " + accepted_format);
  if (!j.contains("format")) {
    throw Error(r.where("format") + ": missing; this is not a capsim calibration profile (" +
                accepted_format + ")");
  }
  const json& fmtv = j.at("format");
  const std::string format = fmtv.is_string() ? fmtv.get<std::string>() : fmtv.dump();
  if (format != kProfileFormat) {
    throw Error(r.where("format") + ": '" + format + "' is not a capsim calibration profile; " +
                accepted_format);
  }
  if (!j.contains("version") || !j.at("version").is_number_integer() ||
      j.at("version").get<long long>() != kProfileVersion) {
    throw Error(r.where("version") + ": " + (j.contains("version") ? j.at("version").dump() : "missing") +
                " is not a supported profile version; accepted: " + std::to_string(kProfileVersion));
  }

  Profile p;
  p.path = file;
  p.source = "capsim-calibrate";
  const std::string prov_expected = "an object with gpu_name, compute_capability and date";
  const json& prov = r.member(j, "provenance", "provenance", prov_expected);
  if (!prov.is_object()) throw Error(r.where("provenance") + ": expected " + prov_expected);
  p.provenance.raw = prov;
  p.provenance.gpu_name = r.string(prov, "gpu_name", "provenance.gpu_name",
                                   "the GPU's name as the driver reports it");
  p.provenance.compute_capability =
      r.string(prov, "compute_capability", "provenance.compute_capability", "\"<major>.<minor>\"");
  p.provenance.date = r.string(prov, "date", "provenance.date", "an ISO 8601 time");
  p.provenance.driver = r.optional_string(prov, "driver");
  p.provenance.cuda_runtime = r.optional_string(prov, "cuda_runtime");
  p.provenance.hostname = r.optional_string(prov, "hostname");
  p.provenance.command_line = r.optional_string(prov, "command_line");
  if (prov.contains("l2_bytes") && prov.at("l2_bytes").is_number()) {
    p.provenance.l2_bytes = prov.at("l2_bytes").get<double>();
  }

  // GEMMs: required, non-empty (the card's compute and bandwidth efficiencies come from them).
  const std::string gemm_expected = "{dtype, m, n, k, seconds}";
  const json* gemm = r.list(j, "gemm", gemm_expected);
  if (!gemm || gemm->empty()) {
    throw Error(r.where("gemm") + ": missing or empty; expected a list of " + gemm_expected);
  }
  for (std::size_t i = 0; i < gemm->size(); ++i) {
    const std::string f = idx("gemm", i);
    const json& e = r.entry(*gemm, i, "gemm", gemm_expected);
    GemmSample s;
    const std::string dt = r.string(e, "dtype", f + ".dtype", "one of fp16, bf16, fp8");
    if (dt == "fp16") s.dtype = Precision::kFp16;
    else if (dt == "bf16") s.dtype = Precision::kBf16;
    else if (dt == "fp8") s.dtype = Precision::kFp8;
    else throw Error(r.where(f + ".dtype") + ": '" + dt + "' is not a GEMM dtype; accepted: fp16, bf16, fp8");
    s.m = r.whole(e, "m", f + ".m");
    s.n = r.whole(e, "n", f + ".n");
    s.k = r.whole(e, "k", f + ".k");
    s.label = r.optional_string(e, "label");
    s.seconds = r.seconds(e, f);
    p.gemm.push_back(std::move(s));
  }

  if (const json* bw = r.list(j, "bandwidth", "{kernel, buffer_bytes, bytes_moved, seconds}")) {
    for (std::size_t i = 0; i < bw->size(); ++i) {
      const std::string f = idx("bandwidth", i);
      const json& e = r.entry(*bw, i, "bandwidth", "{kernel, buffer_bytes, bytes_moved, seconds}");
      BandwidthSample s;
      s.kernel = r.string(e, "kernel", f + ".kernel", "read or copy");
      if (s.kernel != "read" && s.kernel != "copy") {
        throw Error(r.where(f + ".kernel") + ": '" + s.kernel + "' is not a bandwidth kernel; accepted: read, copy");
      }
      s.buffer_bytes = r.positive(e, "buffer_bytes", f + ".buffer_bytes", "the buffer size in bytes");
      s.bytes_moved = r.positive(e, "bytes_moved", f + ".bytes_moved", "bytes read + written per call");
      s.seconds = r.seconds(e, f);
      p.bandwidth.push_back(std::move(s));
    }
  }

  const std::string dec_expected = "{batch, context, q_heads, kv_heads, head_dim, seconds}";
  if (const json* ad = r.list(j, "attention_decode", dec_expected)) {
    for (std::size_t i = 0; i < ad->size(); ++i) {
      const std::string f = idx("attention_decode", i);
      const json& e = r.entry(*ad, i, "attention_decode", dec_expected);
      AttentionDecodeSample s;
      s.batch = r.whole(e, "batch", f + ".batch");
      s.context = r.whole(e, "context", f + ".context");
      s.q_heads = r.whole(e, "q_heads", f + ".q_heads");
      s.kv_heads = r.whole(e, "kv_heads", f + ".kv_heads");
      s.head_dim = r.whole(e, "head_dim", f + ".head_dim");
      s.block_size = e.contains("block_size") ? r.whole(e, "block_size", f + ".block_size") : 0;
      s.kv_element_bytes = kv_bytes(r, e, f);
      s.kernel = r.optional_string(e, "kernel");
      s.seconds = r.seconds(e, f);
      p.attention_decode.push_back(std::move(s));
    }
  }

  const std::string pre_expected = "{batch, tokens, cached, q_heads, kv_heads, head_dim, seconds}";
  if (const json* ap = r.list(j, "attention_prefill", pre_expected)) {
    for (std::size_t i = 0; i < ap->size(); ++i) {
      const std::string f = idx("attention_prefill", i);
      const json& e = r.entry(*ap, i, "attention_prefill", pre_expected);
      AttentionPrefillSample s;
      s.batch = r.whole(e, "batch", f + ".batch");
      s.tokens = r.whole(e, "tokens", f + ".tokens");
      s.cached = e.contains("cached") ? r.whole(e, "cached", f + ".cached", 0) : 0;
      s.q_heads = r.whole(e, "q_heads", f + ".q_heads");
      s.kv_heads = r.whole(e, "kv_heads", f + ".kv_heads");
      s.head_dim = r.whole(e, "head_dim", f + ".head_dim");
      s.kv_element_bytes = kv_bytes(r, e, f);
      s.kernel = r.optional_string(e, "kernel");
      s.seconds = r.seconds(e, f);
      p.attention_prefill.push_back(std::move(s));
    }
  }

  if (j.contains("launch") && !j.at("launch").is_null()) {
    const json& l = j.at("launch");
    if (!l.is_object()) {
      throw Error(r.where("launch") + ": expected an object {empty_kernel_launch_s, empty_kernel_graph_s, small_kernel_graph_s}");
    }
    p.launch.present = true;
    const auto list_of = [&](const char* key, std::vector<double>& out) {
      if (!l.contains(key)) return;
      json wrapper = {{"seconds", l.at(key)}};
      out = r.seconds(wrapper, std::string("launch.") + key);
    };
    list_of("empty_kernel_launch_s", p.launch.launch_s);
    list_of("empty_kernel_graph_s", p.launch.graph_kernel_s);
    list_of("small_kernel_graph_s", p.launch.small_kernel_graph_s);
    p.launch.small_kernel = r.optional_string(l, "small_kernel");
  }

  if (const json* ar = r.list(j, "allreduce", "{gpus, bytes, seconds}")) {
    for (std::size_t i = 0; i < ar->size(); ++i) {
      const std::string f = idx("allreduce", i);
      const json& e = r.entry(*ar, i, "allreduce", "{gpus, bytes, seconds}");
      AllReduceSample s;
      s.gpus = static_cast<int>(r.whole(e, "gpus", f + ".gpus", 2));
      s.bytes = r.positive(e, "bytes", f + ".bytes", "the message size in bytes");
      s.seconds = r.seconds(e, f);
      p.allreduce.push_back(std::move(s));
    }
  }
  return p;
}

}  // namespace capsim::calibration
