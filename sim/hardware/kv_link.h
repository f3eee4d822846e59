// The links a disaggregated deployment moves KV caches over, between its prefill and decode
// pools: NVLink inside a node, InfiniBand/RoCE between nodes, PCIe through host memory. Read from
// calibration/links.yaml (every figure {value, source}); docs/deployment-options.md.
#pragma once

#include <string>
#include <vector>

namespace capsim {

struct KvLink {
  std::string name;
  std::string description;
  // One direction, per GPU: each GPU of a TP group sends its KV shard over its own link (a DGX
  // H100 has one 400 Gb/s NIC per GPU), bytes per second.
  double bandwidth_bytes_per_s = 0;
  // Fixed cost of one request's transfer (seconds): setup and completion notification.
  double latency_s = 0;
  std::string bandwidth_source, latency_source;  // citations
};

class KvLinkCatalogue {
 public:
  // Throws capsim::Error naming the file and field.
  static KvLinkCatalogue load_file(const std::string& path);
  const KvLink& find(const std::string& name) const;  // throws with the accepted names
  std::vector<std::string> names() const;
  const std::vector<KvLink>& links() const { return links_; }

 private:
  std::vector<KvLink> links_;
};

}  // namespace capsim
