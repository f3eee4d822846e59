#include "sim/calibration/step_compare.h"

#include <cmath>
#include <map>

#include "sim/calibration/vidur.h"
#include "sim/core/error.h"

namespace capsim::calibration {

std::vector<StepRow> load_step_csv(const std::string& path) {
  const auto rows = read_csv(path);
  const std::vector<std::string> need = {"model", "card", "batch", "context", "prefill_tokens", "step_ms"};
  if (rows.empty()) {
    throw Error(path + ": empty; expected a header line with columns model,card,batch,context,prefill_tokens,step_ms");
  }
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < rows[0].size(); ++i) col[rows[0][i]] = i;
  for (const auto& c : need) {
    if (!col.count(c)) {
      throw Error(path + ":1: column " + c +
                  ": missing; expected the header model,card,batch,context,prefill_tokens,step_ms "
                  "(as scripts/model_step_bench.py writes it)");
    }
  }
  std::vector<StepRow> out;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    const int line = static_cast<int>(r + 1);
    const auto cell = [&](const std::string& c) -> std::string {
      const std::size_t i = col.at(c);
      return i < row.size() ? row[i] : "";
    };
    const auto number = [&](const std::string& c, double min) {
      const std::string t = cell(c);
      double v = 0;
      try {
        std::size_t used = 0;
        v = std::stod(t, &used);
        if (used != t.size()) throw std::invalid_argument(t);
      } catch (const std::exception&) {
        throw Error(path + ":" + std::to_string(line) + ": " + c + ": '" + t + "' is not a number");
      }
      if (!std::isfinite(v) || v < min) {
        throw Error(path + ":" + std::to_string(line) + ": " + c + ": '" + t + "' is out of range; expected >= " +
                    std::to_string(static_cast<long long>(min)));
      }
      return v;
    };
    const auto whole = [&](const std::string& c, double min) {
      const double v = number(c, min);
      if (v != std::floor(v) || v > 1e12) {
        throw Error(path + ":" + std::to_string(line) + ": " + c + ": '" + cell(c) +
                    "' is not a whole number (at most 1e12)");
      }
      return static_cast<std::int64_t>(v);
    };
    StepRow s;
    s.line = line;
    s.model = cell("model");
    s.card = cell("card");
    s.batch = whole("batch", 1);
    s.context = whole("context", 1);
    s.prefill_tokens = whole("prefill_tokens", 0);
    s.step_ms = number("step_ms", 0);
    if (!(s.step_ms > 0)) {
      throw Error(path + ":" + std::to_string(line) + ": step_ms: '" + cell("step_ms") +
                  "' is not a time; expected milliseconds > 0");
    }
    out.push_back(s);
  }
  if (out.empty()) throw Error(path + ": no rows after the header");
  return out;
}

BatchShape step_shape(const StepRow& r, const std::string& path) {
  BatchShape b;
  if (r.prefill_tokens == 0) {
    for (std::int64_t i = 0; i < r.batch; ++i) b.add_decode(r.context);
    return b;
  }
  if (r.prefill_tokens % r.batch != 0) {
    throw Error(path + ":" + std::to_string(r.line) + ": prefill_tokens: " + std::to_string(r.prefill_tokens) +
                " is not a multiple of batch " + std::to_string(r.batch) +
                "; a prefill row holds batch sequences of equal chunks");
  }
  const std::int64_t chunk = r.prefill_tokens / r.batch;
  if (chunk > r.context) {
    throw Error(path + ":" + std::to_string(r.line) + ": context: " + std::to_string(r.context) +
                " is shorter than the prefill chunk of " + std::to_string(chunk) +
                " tokens per sequence; context counts every token up to the end of the chunk");
  }
  for (std::int64_t i = 0; i < r.batch; ++i) b.add_prefill_chunk(r.context - chunk, chunk, true);
  return b;
}

}  // namespace capsim::calibration
