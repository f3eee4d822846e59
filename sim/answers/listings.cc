#include "sim/answers/listings.h"

#include "sim/cluster/disaggregation.h"
#include "sim/scenario/catalogues.h"
#include "sim/core/units.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;

Listing list_cards() {
  Listing out;
  nlohmann::json& j = out.json;
  j = nlohmann::json::array();
  TextTable& t = out.table;
  t = TextTable({"card", "memory GB", "bandwidth TB/s", "bf16/fp16 TFLOPS", "fp8 TFLOPS", "link", "TDP W"});
  for (const Card& c : cards().cards()) {
    const double half = c.supports(Precision::kBf16) ? c.peak(Precision::kBf16)
                        : c.supports(Precision::kFp16) ? c.peak(Precision::kFp16) : 0;
    const std::string link = c.nvlink_bandwidth > 0
                                 ? "NVLink " + fmt("%.0f", c.nvlink_bandwidth / 1e9) + " GB/s"
                                 : "PCIe gen" + std::to_string(c.pcie_generation);
    t.row({c.name, fmt("%.0f", c.memory_bytes / 1e9), fmt("%.2f", c.memory_bandwidth / 1e12),
           half > 0 ? fmt("%.1f", half / 1e12) : "-",
           c.supports(Precision::kFp8) ? fmt("%.1f", c.peak(Precision::kFp8) / 1e12) : "-", link,
           fmt("%.0f", c.tdp_watts)});
    nlohmann::json peaks;
    for (const auto& [p, v] : c.dense_peak) peaks[std::string(precision_name(p))] = v;
    j.push_back({{"name", c.name}, {"display_name", c.display_name}, {"kind", c.is_cpu ? "cpu" : "gpu"},
                 {"memory_bytes", c.memory_bytes}, {"memory_bandwidth_bytes_per_s", c.memory_bandwidth},
                 {"dense_peak_ops_per_s", peaks}, {"nvlink_bytes_per_s", c.nvlink_bandwidth},
                 {"pcie_generation", c.pcie_generation}, {"tdp_watts", c.tdp_watts},
                 {"card_class", c.card_class.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.card_class)}});
  }
  return out;
}

Listing list_models() {
  Listing out;
  nlohmann::json& j = out.json;
  j = nlohmann::json::array();
  TextTable& t = out.table;
  t = TextTable({"model", "Hugging Face id", "params B", "active B", "layers", "KV KiB/token bf16"});
  for (const ModelEntry& e : models().entries()) {
    const ModelSpec m = models().find(e.name);
    t.row({e.name, e.hf_id, fmt("%.2f", m.total_params() / 1e9), fmt("%.2f", m.active_params() / 1e9),
           std::to_string(m.layers), fmt("%.1f", m.kv_bytes_per_token(Precision::kBf16) / 1024)});
    j.push_back({{"name", e.name}, {"hf_id", e.hf_id}, {"total_params", m.total_params()},
                 {"active_params", m.active_params()}, {"layers", m.layers},
                 {"kv_bytes_per_token_bf16", m.kv_bytes_per_token(Precision::kBf16)}});
  }
  return out;
}

Listing list_engines() {
  Listing out;
  nlohmann::json& j = out.json;
  j = nlohmann::json::array();
  TextTable& t = out.table;
  t = TextTable({"engine", "description", "step overhead", "block size"});
  for (const EngineProfile& e : engines().engines()) {
    t.row({e.name, e.display_name, fmt("%.2f ms", e.step_overhead_s * 1e3), std::to_string(e.block_size)});
    j.push_back({{"name", e.name}, {"display_name", e.display_name},
                 {"step_overhead_s", e.step_overhead_s}, {"block_size", e.block_size}});
  }
  return out;
}

Listing list_serving() {
  Listing out;
  out.json = nlohmann::json::array();
  out.table = TextTable({"serving", "description"});
  for (const ServingModelInfo& s : serving_models()) {
    out.table.row({s.name, s.description});
    out.json.push_back({{"name", s.name}, {"description", s.description}});
  }
  return out;
}

Listing list_kv_links() {
  Listing out;
  out.json = nlohmann::json::array();
  out.table = TextTable({"link", "GB/s per GPU", "latency", "description"});
  for (const KvLink& l : kv_links().links()) {
    out.table.row({l.name, fmt("%.1f", l.bandwidth_bytes_per_s / 1e9), units::format_time(l.latency_s), l.description});
    out.json.push_back({{"name", l.name}, {"description", l.description},
                        {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s}, {"latency_s", l.latency_s},
                        {"bandwidth_source", l.bandwidth_source}, {"latency_source", l.latency_source}});
  }
  return out;
}

}  // namespace capsim::answers
