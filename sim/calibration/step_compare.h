// Model-level step times measured by scripts/model_step_bench.py, against the cost model.
//
// CSV columns (header required, any order, extra columns ignored):
//   model, card, batch, context, prefill_tokens, step_ms
// A row with prefill_tokens = 0 is a decode step: `batch` sequences decode one token each at a
// context of `context` tokens (the new one included). A row with prefill_tokens > 0 is a prefill
// step: `batch` sequences each compute prefill_tokens / batch new tokens, ending at `context`
// (so context - prefill_tokens / batch were cached before).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/batch_shape.h"

namespace capsim::calibration {

struct StepRow {
  int line = 0;  // 1-based line in the file
  std::string model, card;
  std::int64_t batch = 0, context = 0, prefill_tokens = 0;
  double step_ms = 0;
};

// Throws capsim::Error "<path>:<line>: <column>: ..." for a malformed file or row.
std::vector<StepRow> load_step_csv(const std::string& path);

// The engine step the row measured. Throws capsim::Error naming the file and line when
// prefill_tokens is not a multiple of batch or a chunk is longer than the context.
BatchShape step_shape(const StepRow& row, const std::string& path);

}  // namespace capsim::calibration
