#include "sim/hardware/kv_link.h"

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"

namespace capsim {

KvLinkCatalogue KvLinkCatalogue::load_file(const std::string& path) {
  const YamlDoc doc = YamlDoc::load(path);
  const YAML::Node links = doc.find("links");
  if (!links || !links.IsMap() || links.size() == 0) {
    throw Error(doc.where("links") + ": missing; expected a mapping of link names to {description, bandwidth, latency}");
  }
  KvLinkCatalogue c;
  for (const auto& kv : links) {
    const std::string name = yaml_scalar(kv.first, doc.where("links"));
    const std::string f = "links." + name;
    KvLink l;
    l.name = name;
    l.description = doc.string(f + ".description");
    l.bandwidth_bytes_per_s = doc.quantity(f + ".bandwidth", units::Kind::kBandwidth);
    l.latency_s = doc.quantity(f + ".latency", units::Kind::kTime);
    if (!(l.bandwidth_bytes_per_s > 0)) throw Error(doc.where(f + ".bandwidth") + ": must be > 0");
    if (!(l.latency_s >= 0)) throw Error(doc.where(f + ".latency") + ": must be >= 0");
    l.bandwidth_source = doc.source_of(f + ".bandwidth");
    l.latency_source = doc.source_of(f + ".latency");
    c.links_.push_back(l);
  }
  return c;
}

const KvLink& KvLinkCatalogue::find(const std::string& name) const {
  for (const KvLink& l : links_) {
    if (l.name == name) return l;
  }
  throw Error(unknown_name_message("KV link", name, names()));
}

std::vector<std::string> KvLinkCatalogue::names() const {
  std::vector<std::string> out;
  for (const KvLink& l : links_) out.push_back(l.name);
  return out;
}

}  // namespace capsim
