// What the trace reader tests share (trace_test.cc, trace_errors_test.cc): where the traces
// are, reading a whole trace into counts and sums, and the error a bad file raises.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/workload/trace.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_SHARED_DIR
#error "CAPSIM_SHARED_DIR must name the shared data folder (the build defines it)"
#endif

namespace capsim_test::trace {

using capsim::open_trace;
using capsim::TraceFormat;
using capsim::TraceRecord;

inline const std::string kTraces = std::string(CAPSIM_SHARED_DIR) + "/traces/";
#ifdef CAPSIM_DATA_DIR
inline const std::string kSamples = std::string(CAPSIM_DATA_DIR) + "/workloads/traces/";
#else
inline const std::string kSamples = "workloads/traces/";  // standalone build run from the repo root
#endif

struct Summary {
  std::int64_t records = 0;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::int64_t hash_ids = 0;        // total number of ids
  std::uint64_t hash_id_sum = 0;    // sum of all ids
  double last_arrival_s = 0;
  bool non_decreasing = true;
  std::int64_t skipped_rows = 0;
};

inline Summary summarize(const std::string& path, std::optional<TraceFormat> format = std::nullopt,
                  double time_scale = 1.0) {
  auto reader = open_trace(path, format, time_scale);
  Summary s;
  TraceRecord r;
  double prev = 0;
  while (reader->next(r)) {
    if (s.records == 0) CHECK(r.arrival_s == 0.0);
    if (r.arrival_s < prev) s.non_decreasing = false;
    prev = r.arrival_s;
    ++s.records;
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
    s.hash_ids += static_cast<std::int64_t>(r.hash_ids.size());
    for (auto id : r.hash_ids) s.hash_id_sum += id;
    s.last_arrival_s = r.arrival_s;
  }
  s.skipped_rows = reader->skipped_rows();
  return s;
}

inline std::vector<TraceRecord> first_records(const std::string& path, std::size_t n,
                                       std::optional<TraceFormat> format = std::nullopt,
                                       double time_scale = 1.0) {
  auto reader = open_trace(path, format, time_scale);
  std::vector<TraceRecord> out;
  TraceRecord r;
  while (out.size() < n && reader->next(r)) out.push_back(r);
  return out;
}

inline std::vector<TraceRecord> all_records(const std::string& path,
                                     std::optional<TraceFormat> format = std::nullopt,
                                     double time_scale = 1.0) {
  return first_records(path, std::numeric_limits<std::size_t>::max(), format, time_scale);
}

// The message of the capsim::Error that `f` throws; "(no error)" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Opens and reads the whole trace; the error message, wherever it is raised.
inline std::string read_error(const std::string& path, std::optional<TraceFormat> format = std::nullopt,
                       double time_scale = 1.0) {
  return error_of([&] { all_records(path, format, time_scale); });
}

using capsim_test::TempDir;

inline const std::string kAzureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
inline const std::string kBurstHeader =
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
inline const std::string kTimestampAccepted =
    "is not a timestamp like '2023-11-16 18:15:46.6805900' (YYYY-MM-DD HH:MM:SS, up to 7 "
    "fractional digits)";
inline const std::string kJsonExample =
    R"({"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]})";

}  // namespace capsim_test::trace
