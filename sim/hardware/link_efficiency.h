// The share of a link's one-direction line rate that a bulk transfer between GPUs reaches. One
// figure for every transfer capsim models (TP all-reduce, pipeline hand-offs, expert-parallel
// dispatch and combine, the P/D KV transfer between pools), so they cannot drift apart.
#pragma once

namespace capsim {

// NCCL over NVLink 4: "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get
// an effective NVLink bandwidth of 370GB/s", observable as nccl-tests' busBw (S. Jeaugey, NCCL,
// NVIDIA/nccl-tests issue #212, 2024-05-06): 370 / 450 = 0.82, rounded to 0.8. Measured for NCCL
// on NVLink only; for PCIe, InfiniBand/RoCE and the KV connector's RDMA (NIXL/UCX) it is ASSUMED.
inline constexpr double kLinkEfficiency = 0.8;

}  // namespace capsim
