// Mooncake (FAST'25) JSON-lines traces: one object per line,
//   {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, ...]}
// timestamp in milliseconds; hash_ids optional; other keys ignored.
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/workload/trace_internal.h"

namespace capsim::trace_detail {
namespace {

using nlohmann::json;

constexpr const char* kExample =
    R"({"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]})";

const char* type_word(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    default: return "a number";
  }
}

class MooncakeSource final : public RowSource {
 public:
  explicit MooncakeSource(const std::string& path) : src_(path) {}

  bool next(RawRow& out) override {
    if (!src_.next(line_)) return false;
    json j;
    if (json_depth(line_).line_over) {
      throw Error(src_.here() + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                  " levels; each line must be one JSON object like " + kExample);
    }
    try {
      j = json::parse(line_);
    } catch (const json::parse_error& e) {
      throw Error(src_.here() + ": malformed JSON at character " + std::to_string(e.byte) +
                  "; each line must be one JSON object like " + kExample);
    } catch (const json::exception& e) {  // a number beyond double's range: out_of_range 406
      throw Error(src_.here() + ": malformed JSON (" + e.what() +
                  "); each line must be one JSON object like " + kExample);
    }
    if (!j.is_object()) {
      throw Error(src_.here() + ": expected a JSON object, found " + type_word(j) +
                  "; each line must be one JSON object like " + kExample);
    }
    const double ms = timestamp(j);
    if (first_) {
      first_ms_ = ms;
      first_ = false;
    }
    out.offset_s = (ms - first_ms_) / 1000.0;
    out.time_text = field(j, "timestamp").dump();
    out.input_tokens = count(j, "input_length", "input");
    out.output_tokens = count(j, "output_length", "output");
    out.hash_ids.clear();
    const auto it = j.find("hash_ids");
    if (it != j.end()) {
      if (!it->is_array()) {
        fail(src_, "field 'hash_ids'", it->dump(), "is not an array of non-negative integers");
      }
      out.hash_ids.reserve(it->size());
      for (std::size_t k = 0; k < it->size(); ++k) {
        const json& id = (*it)[k];
        if (!id.is_number_unsigned()) {  // non-negative JSON integers parse as unsigned
          fail(src_, "field 'hash_ids' element " + std::to_string(k), id.dump(),
               "is not a non-negative integer");
        }
        out.hash_ids.push_back(id.get<std::uint64_t>());
      }
    }
    return true;
  }
  const LineSource& lines() const override { return src_; }
  std::string time_label() const override { return "field 'timestamp'"; }

 private:
  const json& field(const json& j, const char* name) const {
    const auto it = j.find(name);
    if (it == j.end()) {
      throw Error(src_.here() + ": missing field '" + name +
                  "'; each line needs timestamp (ms), input_length, output_length and "
                  "optionally hash_ids, like " +
                  kExample);
    }
    return *it;
  }

  double timestamp(const json& j) const {
    const json& t = field(j, "timestamp");
    const double ms = t.is_number() ? t.get<double>() : -1;
    if (!t.is_number() || !std::isfinite(ms) || ms < 0) {
      fail(src_, "field 'timestamp'", t.dump(), "is not a non-negative number of milliseconds");
    }
    return ms;
  }

  std::int64_t count(const json& j, const char* name, const char* what) const {
    const json& v = field(j, name);
    const std::string label = std::string("field '") + name + "'";
    if (!v.is_number_unsigned()) fail(src_, label, v.dump(), "is not a non-negative integer");
    const auto value = v.get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(checked::kMaxTokens)) {
      fail(src_, label, v.dump(),
           "is out of range (at most " + std::to_string(checked::kMaxTokens) + " tokens)");
    }
    const auto n = static_cast<std::int64_t>(value);
    if (n < 1) require_positive(src_, label, v.dump(), n, what);
    return n;
  }

  LineSource src_;
  std::string line_;
  bool first_ = true;
  double first_ms_ = 0;
};

}  // namespace

std::unique_ptr<RowSource> make_mooncake_source(const std::string& path) {
  return std::make_unique<MooncakeSource>(path);
}

}  // namespace capsim::trace_detail
