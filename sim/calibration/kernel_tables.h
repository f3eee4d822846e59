// Measured-kernel tables (docs/data-formats.md#measured-kernel-tables) from a capsim-calibrate
// profile: one's own GPU's measurements in the one format the cost model reads, beside the
// tables imported from public databases (scripts/kernel-import/).
//
// Contract: kernel_tables_from_profile turns what the profile holds into table texts and says
// what it left out and why; it writes nothing (the front end writes every file or none).
//   - gemm-bf16.csv, gemm-fp8.csv: cuBLASLt GEMMs, the median of each shape's repetitions
//     (repetitions of one shape measured under several labels are pooled), 4 significant
//     digits. The reader needs every n measured with every k, so the largest complete (n, k)
//     grid is kept and every other shape is named in `left_out` (capsim-calibrate
//     --gemm-grid measures a complete one). fp16 GEMMs are left out: the tables are bf16, fp8
//     and nvfp4, as vLLM runs them.
//   - attention and all-reduce are left out, named: capsim-calibrate's attention kernels are
//     its own simple ones, not FlashAttention/FlashInfer, and its all-reduce is NCCL's, while
//     capsim reads an allreduce table as vLLM's custom all-reduce.
// Throws capsim::Error when the card name is not a plain folder name or no GEMM forms a table.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/calibration/profile.h"

namespace capsim::calibration {

struct KernelTableText {
  std::string file;  // "<op>-<dtype>.csv", the name the reader expects in calibration/kernels/<card>/
  std::string text;
  std::size_t rows = 0;
};

struct KernelTablesFromProfile {
  std::vector<KernelTableText> tables;
  std::vector<std::string> left_out;  // one line each: what was not written and why
};

KernelTablesFromProfile kernel_tables_from_profile(const Profile& profile, const std::string& card);

}  // namespace capsim::calibration
