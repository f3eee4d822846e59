// Streaming readers for recorded request traces: when each request arrived and how many tokens
// it read and wrote. The file is read one line at a time (memory stays bounded for traces of
// millions of rows); nothing is loaded up front.
//
// Formats (sample files: workloads/traces/, public sources: workloads/traces/README.md):
//  - azure     Azure LLM inference trace 2023 (AzurePublicDataset, AzureLLMInferenceDataset2023).
//              CSV, header `TIMESTAMP,ContextTokens,GeneratedTokens`; TIMESTAMP is wall-clock
//              `YYYY-MM-DD HH:MM:SS[.fffffff]` (up to 7 fractional digits, no zone; 'T' also
//              accepted between date and time). Crossing midnight, month or year ends is fine.
//  - mooncake  Mooncake FAST'25 traces. JSON lines `{"timestamp": ms, "input_length": n,
//              "output_length": n, "hash_ids": [...]}`; timestamp in milliseconds; hash_ids (one
//              id per 512-token block, equal ids = shared prefix) are kept as given and may be
//              absent (then empty). Other keys are ignored.
//  - burstgpt  BurstGPT CSV, header `Timestamp,Model,Request tokens,Response tokens,Total
//              tokens,Log Type`; Timestamp in seconds. Rows with `Response tokens` 0 are failed
//              requests and are SKIPPED (counted in TraceReader::skipped_rows()); Model, Total
//              tokens and Log Type are not used.
//  - csv       plain CSV with a header naming `arrival_s,input_tokens,output_tokens` (seconds;
//              any column order; other columns ignored).
// CSV columns are found by header name (case-insensitive, surrounding spaces ignored); fields
// may be double-quoted. Lines may end in CRLF; blank lines and a UTF-8 byte-order mark are
// ignored.
//
// Validation (capsim::Error, naming path:line, the column or field, the text and what is
// accepted): timestamps must be non-decreasing; token counts must be non-negative integers,
// input and output at least 1; required columns/fields must be present; JSON must parse; a
// trace without any request is "path: no requests".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace capsim {

struct TraceRecord {
  double arrival_s = 0;  // seconds after the first record (first = 0), time_scale applied
  std::int64_t input_tokens = 0;   // >= 1
  std::int64_t output_tokens = 0;  // >= 1
  std::vector<std::uint64_t> hash_ids;  // prefix-block ids (Mooncake); empty for other formats
};

class TraceReader {
 public:
  virtual ~TraceReader();
  // Fills `out` with the next request; false at the end of the trace. Throws capsim::Error on
  // bad input (the records before it have been returned).
  virtual bool next(TraceRecord& out) = 0;
  // Rows read so far that were not requests (BurstGPT failed requests); 0 for other formats.
  virtual std::int64_t skipped_rows() const { return 0; }
};

enum class TraceFormat { kAzure, kMooncake, kBurstGpt, kPlainCsv };

// "azure", "mooncake", "burstgpt", "csv" (case-insensitive); anything else is an Error listing
// the accepted names.
TraceFormat parse_trace_format(const std::string& name);
// The name parse_trace_format accepts for `format`.
std::string trace_format_name(TraceFormat format);

// Tells the format from the first non-blank line: a JSON object is mooncake, otherwise the CSV
// header's column names decide. Error when the file is missing, empty ("path: no requests") or
// the first line matches no format.
TraceFormat detect_trace_format(const std::string& path);

// Opens `path` for streaming. `format` empty = detect_trace_format(path). `time_scale`
// multiplies every gap between arrivals (0.5 replays twice as fast, 2 half as fast); it must be
// a positive finite number. The first record is read here, so a missing file, a bad header or
// an empty trace fails at open.
std::unique_ptr<TraceReader> open_trace(const std::string& path,
                                        std::optional<TraceFormat> format,
                                        double time_scale = 1.0);

}  // namespace capsim
