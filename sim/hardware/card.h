// A compute card (GPU or CPU server) as the cost model and memory plan need it, resolved to
// plain SI numbers from calibration/cards/<name>.yaml (format: docs/data-formats.md#cards).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/hardware/precision.h"

namespace capsim {

class MeasuredKernels;

struct Card {
  std::string name;          // catalogue name, e.g. "h100-sxm"
  std::string display_name;  // "NVIDIA H100 SXM5 80GB"
  std::vector<std::string> aliases;
  std::string vendor, architecture;
  bool is_cpu = false;
  std::string file;  // the YAML it came from

  double memory_bytes = 0;         // datasheet capacity
  double visible_memory_bytes = 0; // what the driver reports (torch total_memory); <= memory
  double memory_bandwidth = 0;     // bytes/s, datasheet peak
  std::map<Precision, double> dense_peak;  // operations/s; absent = unsupported
  double nvlink_bandwidth = 0;     // bytes/s total per GPU (both directions); 0 = no NVLink
  int nvlink_gpus = 0;             // GPUs joined all-to-all by NVLink (8 on SXM boards, 2 with a bridge)
  int pcie_generation = 0;
  int pcie_lanes = 16;
  bool peer_to_peer = false;
  double tdp_watts = 0;
  bool ecc = false;
  int mig_instances = 0;

  double bandwidth_efficiency = 0.75;  // achieved / peak memory bandwidth
  double compute_efficiency = 0.7;     // achieved / dense peak on large GEMMs
  double compute_efficiency_fp8 = 0;   // the same for fp8 GEMMs; 0 = as compute_efficiency
  double compute_efficiency_fp4 = 0;   // the same for fp4 (nvfp4/mxfp4) GEMMs; 0 = as compute_efficiency
  // Achieved / peak bandwidth of memory-bound fp8 and fp4 GEMMs (their kernels read weights at a
  // different share of peak than 16-bit ones: docs/card-efficiencies.md); 0 = as bandwidth_efficiency.
  double bandwidth_efficiency_fp8 = 0;
  double bandwidth_efficiency_fp4 = 0;
  // Achieved / peak bandwidth of decode attention's KV-cache reads, where a card's attention
  // kernels reach a different share than its weight reads (H200: docs/card-fits.md);
  // 0 = as bandwidth_efficiency.
  double attention_bandwidth_efficiency = 0;
  double kernel_floor_s = 0;           // minimum time of one operator-group kernel

  // The product line (`card_class`): "datacenter", "workstation" or "consumer" (GeForce); empty
  // when the card file does not say. `plan --card-class` / `--datacenter-only` select on it.
  std::string card_class;
  // Whether the efficiencies above rest on data of this very card (`efficiency.data`):
  // "measured" (profiles, microbenchmarks or fits of this card), "partial" (some of them),
  // "assumed" (borrowed from another card, or a default); empty when the file does not say. A
  // calibration profile of the card that sets both efficiencies makes them "measured".
  std::string efficiency_data;
  std::string efficiency_data_basis;  // what they rest on, "A40 profile (same GA102 die)"
  // "assumed from A40 profile (same GA102 die)"; "unstated" when the file does not say.
  std::string efficiency_data_text() const;

  std::map<std::string, std::string> sources;  // field -> citation
  // The calibration profile applied to the efficiencies, "calibration/profiles/<card>.yaml fitted
  // <date> from <GPU ...>"; empty when none (docs/calibration.md).
  std::string calibration;
  // Kernel times measured on this card, calibration/kernels/<name>/ (sim/hardware/measured_kernels.h);
  // null when the catalogue has none for it (and for a card loaded by path).
  std::shared_ptr<const MeasuredKernels> measured_kernels;

  bool supports(Precision p) const { return dense_peak.count(p) != 0; }
  double peak(Precision p) const;  // REQUIRES: supports(p)
  // PCIe bandwidth per direction in bytes/s (x16: gen3 15.75, gen4 31.5, gen5 63 GB/s).
  double pcie_bandwidth() const;
  // How the GPUs of a `tp`-way tensor-parallel group talk: NVLink when the group fits in the
  // NVLink domain (nvlink_gpus: 8 on SXM boards, 2 for a bridged pair), else PCIe, with CUDA
  // peer-to-peer only where the card file says PCIe P2P works (peer_to_peer); without it NCCL
  // stages through host memory. A bridged pair's P2P ends at the pair: TP 4 or 8 on RTX 3090s
  // runs over PCIe without P2P. The one rule the cost model, fit, plan and compare all use.
  struct TpLink {
    enum class Kind { kSingle, kNvlink, kPcieP2p, kPcieHost } kind = Kind::kSingle;
    double bandwidth = 0;  // bytes/s per direction, datasheet (before NCCL efficiency)
    std::string name() const;  // "NVLink", "PCIe P2P", "PCIe via host (no P2P)", "-"
  };
  TpLink tp_link(int tp) const;
  // The names of supported precisions, "fp32, fp16, ..." for messages.
  std::string supported_precisions() const;
};

class CardCatalogue {
 public:
  // Loads every *.yaml in `dir`. Throws capsim::Error for a malformed file or duplicate names.
  // When calibration is on, a card with a fitted profile <dir>/../profiles/<name>.yaml gets its
  // efficiencies from it (sim/calibration/card_profile.h; a malformed or foreign profile throws).
  static CardCatalogue load_dir(const std::string& dir);
  // Calibration profiles are applied unless turned off here (`capsim --no-calibration`) or, when
  // never set, by the environment variable CAPSIM_NO_CALIBRATION=1.
  static void set_use_calibration(bool on);
  static bool use_calibration();
  // Loads one card file (also usable for a user's own card file).
  static Card load_file(const std::string& path);
  // One file of the catalogue directory `dir` as load_dir reads it: load_file, then the card's
  // calibration profile when calibration is on (no check against the other files' names), and
  // the measured kernel tables of <dir>/../kernels/<name>/ when there are any.
  static Card load_catalogue_file(const std::string& dir, const std::string& path);

  // By name, alias (case-insensitive) or a path to a .yaml file. Unknown names throw with
  // "did you mean" and the accepted names.
  const Card& find(const std::string& name_or_path) const;
  const std::vector<Card>& cards() const { return cards_; }
  std::vector<std::string> names() const;

 private:
  std::vector<Card> cards_;
  mutable std::deque<Card> extra_;  // cards loaded by path on demand
};

}  // namespace capsim
