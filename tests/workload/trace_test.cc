// Trace readers (sim/workload/trace.h) against the real public traces in the shared folder
// (see <shared>/traces/SOURCES.md for their origin and licences), the repository's samples and
// small files written to a temporary directory; the refusals are in trace_errors_test.cc.
#include "sim/workload/trace.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"
#include "tests/workload/trace_fixtures.h"

using namespace capsim_test::trace;

// ---------------------------------------------------------------------------------------------
// Format names and detection

TEST_CASE("parse_trace_format accepts the four names and rejects others", "[trace]") {
  CHECK(capsim::parse_trace_format("azure") == TraceFormat::kAzure);
  CHECK(capsim::parse_trace_format("mooncake") == TraceFormat::kMooncake);
  CHECK(capsim::parse_trace_format("burstgpt") == TraceFormat::kBurstGpt);
  CHECK(capsim::parse_trace_format("csv") == TraceFormat::kPlainCsv);
  CHECK(capsim::parse_trace_format("Azure") == TraceFormat::kAzure);
  for (auto f : {TraceFormat::kAzure, TraceFormat::kMooncake, TraceFormat::kBurstGpt,
                 TraceFormat::kPlainCsv}) {
    CHECK(capsim::parse_trace_format(capsim::trace_format_name(f)) == f);
  }
  CHECK(error_of([] { capsim::parse_trace_format("azur"); }) ==
        "unknown trace format 'azur'; did you mean: azure?; accepted: azure, mooncake, "
        "burstgpt, csv");
  CHECK(error_of([] { capsim::parse_trace_format("jsonl"); }) ==
        "unknown trace format 'jsonl'; accepted: azure, mooncake, burstgpt, csv");
}

TEST_CASE("the format is detected from the first line", "[trace]") {
  CAPSIM_REQUIRE_SHARED(kTraces);
  using capsim::detect_trace_format;
  CHECK(detect_trace_format(kTraces + "AzureLLMInferenceTrace_code.csv") == TraceFormat::kAzure);
  CHECK(detect_trace_format(kTraces + "AzureLLMInferenceTrace_conv.csv") == TraceFormat::kAzure);
  CHECK(detect_trace_format(kTraces + "conversation_trace.jsonl") == TraceFormat::kMooncake);
  CHECK(detect_trace_format(kTraces + "synthetic_trace.jsonl") == TraceFormat::kMooncake);
  CHECK(detect_trace_format(kTraces + "BurstGPT_1_first400rows.csv") == TraceFormat::kBurstGpt);
  CHECK(detect_trace_format(kSamples + "azure-sample.csv") == TraceFormat::kAzure);
  CHECK(detect_trace_format(kSamples + "mooncake-sample.jsonl") == TraceFormat::kMooncake);
  CHECK(detect_trace_format(kSamples + "burstgpt-sample.csv") == TraceFormat::kBurstGpt);
  CHECK(detect_trace_format(kSamples + "plain-sample.csv") == TraceFormat::kPlainCsv);

  TempDir tmp;
  // Length-only statistics files (no timestamps) are not traces.
  const std::string stats = tmp.write("stats.csv", "num_prefill_tokens,num_decode_tokens\n5,6\n");
  CHECK(error_of([&] { capsim::detect_trace_format(stats); }) ==
        stats +
            ":1: cannot tell the trace format from the first line "
            "'num_prefill_tokens,num_decode_tokens'; accepted: azure (header "
            "TIMESTAMP,ContextTokens,GeneratedTokens), mooncake (JSON lines with timestamp, "
            "input_length, output_length, hash_ids), burstgpt (header Timestamp,Model,Request "
            "tokens,Response tokens,Total tokens,Log Type), csv (header "
            "arrival_s,input_tokens,output_tokens); or name the format");
  // open_trace without a format detects, so it fails the same way.
  CHECK(read_error(stats).rfind(stats + ":1: cannot tell the trace format", 0) == 0);
  // A header that lacks one of the plain CSV columns is not recognised either.
  const std::string partial = tmp.write("partial.csv", "\n\narrival_s,input_tokens\n1,2\n");
  CHECK(read_error(partial).rfind(partial + ":3: cannot tell the trace format from the first "
                                            "line 'arrival_s,input_tokens'; accepted:",
                                  0) == 0);
}

// ---------------------------------------------------------------------------------------------
// Real traces

TEST_CASE("Azure code trace: first records, counts and token sums", "[trace][azure]") {
  CAPSIM_REQUIRE_SHARED(kTraces);
  const std::string path = kTraces + "AzureLLMInferenceTrace_code.csv";
  // head -4 AzureLLMInferenceTrace_code.csv (CRLF line ends):
  //   TIMESTAMP,ContextTokens,GeneratedTokens
  //   2023-11-16 18:17:03.9799600,4808,10
  //   2023-11-16 18:17:04.0319600,3180,8
  //   2023-11-16 18:17:04.0781490,110,27
  const auto first = first_records(path, 3);
  REQUIRE(first.size() == 3);
  CHECK(first[0].arrival_s == 0.0);
  CHECK(first[0].input_tokens == 4808);
  CHECK(first[0].output_tokens == 10);
  CHECK(first[0].hash_ids.empty());
  CHECK(first[1].arrival_s == Approx(0.052).epsilon(0).margin(1e-9));
  CHECK(first[1].input_tokens == 3180);
  CHECK(first[1].output_tokens == 8);
  CHECK(first[2].arrival_s == Approx(0.098189).epsilon(0).margin(1e-9));
  CHECK(first[2].input_tokens == 110);
  CHECK(first[2].output_tokens == 27);

  // awk -F, 'NR>1 {n++; a+=$2; b+=$3} END {print n, a, b}' AzureLLMInferenceTrace_code.csv
  //   -> 8819 18059974 245896
  const Summary s = summarize(path);
  CHECK(s.records == 8819);
  CHECK(s.input_tokens == 18059974);
  CHECK(s.output_tokens == 245896);
  CHECK(s.hash_ids == 0);
  CHECK(s.non_decreasing);
  CHECK(s.skipped_rows == 0);
  // Last row (no final newline): 2023-11-16 19:14:19.9280160,549,173
  // 19:14:19.9280160 - 18:17:03.9799600 = 57 min 15.948056 s
  CHECK(s.last_arrival_s == Approx(3435.948056).epsilon(0).margin(1e-6));
}

TEST_CASE("Azure conversation trace: first records, counts and token sums", "[trace][azure]") {
  CAPSIM_REQUIRE_SHARED(kTraces);
  const std::string path = kTraces + "AzureLLMInferenceTrace_conv.csv";
  // head -4 AzureLLMInferenceTrace_conv.csv:
  //   TIMESTAMP,ContextTokens,GeneratedTokens
  //   2023-11-16 18:15:46.6805900,374,44
  //   2023-11-16 18:15:50.9951690,396,109
  //   2023-11-16 18:15:51.2224670,879,55
  const auto first = first_records(path, 3, TraceFormat::kAzure);
  REQUIRE(first.size() == 3);
  CHECK(first[0].arrival_s == 0.0);
  CHECK(first[0].input_tokens == 374);
  CHECK(first[0].output_tokens == 44);
  CHECK(first[1].arrival_s == Approx(4.314579).epsilon(0).margin(1e-9));
  CHECK(first[1].input_tokens == 396);
  CHECK(first[1].output_tokens == 109);
  CHECK(first[2].arrival_s == Approx(4.541877).epsilon(0).margin(1e-9));
  CHECK(first[2].input_tokens == 879);
  CHECK(first[2].output_tokens == 55);

  // awk -F, 'NR>1 {n++; a+=$2; b+=$3} END {print n, a, b}' AzureLLMInferenceTrace_conv.csv
  //   -> 19366 22361870 4088665
  const Summary s = summarize(path);
  CHECK(s.records == 19366);
  CHECK(s.input_tokens == 22361870);
  CHECK(s.output_tokens == 4088665);
  CHECK(s.non_decreasing);
  // Last row: 2023-11-16 19:14:08.4025270,197,183 -> 58 min 21.721937 s after the first
  CHECK(s.last_arrival_s == Approx(3501.721937).epsilon(0).margin(1e-6));
}

TEST_CASE("Mooncake conversation trace: first records, counts, sums and hash ids",
          "[trace][mooncake]") {
  CAPSIM_REQUIRE_SHARED(kTraces);
  const std::string path = kTraces + "conversation_trace.jsonl";
  // head -3 conversation_trace.jsonl:
  //   {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, ..., 13]}
  //   {"timestamp": 0, "input_length": 7322, "output_length": 490, "hash_ids": [0, 14, ..., 27]}
  //   {"timestamp": 0, "input_length": 7236, "output_length": 794, "hash_ids": [0, 28, ..., 41]}
  // line 11: {"timestamp": 3000, "input_length": 13544, "output_length": ..., "hash_ids": [0, 219,
  const auto first = first_records(path, 11);
  REQUIRE(first.size() == 11);
  CHECK(first[0].arrival_s == 0.0);
  CHECK(first[0].input_tokens == 6758);
  CHECK(first[0].output_tokens == 500);
  std::vector<std::uint64_t> ids0;
  for (std::uint64_t k = 0; k <= 13; ++k) ids0.push_back(k);
  CHECK(first[0].hash_ids == ids0);  // ceil(6758 / 512) = 14 blocks
  CHECK(first[1].input_tokens == 7322);
  CHECK(first[1].output_tokens == 490);
  REQUIRE(first[1].hash_ids.size() == 15);
  CHECK(first[1].hash_ids[0] == 0);
  CHECK(first[1].hash_ids[1] == 14);
  CHECK(first[1].hash_ids[14] == 27);
  CHECK(first[2].input_tokens == 7236);
  CHECK(first[2].output_tokens == 794);
  CHECK(first[9].arrival_s == 0.0);
  CHECK(first[10].arrival_s == Approx(3.0).epsilon(0).margin(1e-12));  // timestamp 3000 ms
  CHECK(first[10].input_tokens == 13544);
  CHECK(first[10].hash_ids[1] == 219);

  // python3 -c "import json; r=[json.loads(l) for l in open('conversation_trace.jsonl')];
  //   print(len(r), sum(x['input_length'] for x in r), sum(x['output_length'] for x in r),
  //   sum(len(x['hash_ids']) for x in r), sum(sum(x['hash_ids']) for x in r),
  //   r[-1]['timestamp'])"
  //   -> 12031 144793823 4122048 288500 23407000830 3536999
  const Summary s = summarize(path);
  CHECK(s.records == 12031);
  CHECK(s.input_tokens == 144793823);
  CHECK(s.output_tokens == 4122048);
  CHECK(s.hash_ids == 288500);
  CHECK(s.hash_id_sum == 23407000830ULL);
  CHECK(s.non_decreasing);
  CHECK(s.last_arrival_s == Approx(3536.999).epsilon(0).margin(1e-9));
}

TEST_CASE("Mooncake synthetic trace: counts and sums", "[trace][mooncake]") {
  CAPSIM_REQUIRE_SHARED(kTraces);
  const std::string path = kTraces + "synthetic_trace.jsonl";
  // head -4 synthetic_trace.jsonl (timestamps 0, 0, 40, 277 ms):
  //   {"timestamp": 0, "input_length": 40160, "output_length": 6, "hash_ids": [0, 1, ..., 78]}
  //   {"timestamp": 0, "input_length": 36640, "output_length": 4, "hash_ids": [79, 80, ...
  //   {"timestamp": 40, "input_length": 23769, "output_length": 3, "hash_ids": [151, 152, ...
  //   {"timestamp": 277, "input_length": 32140, "output_length": 92, "hash_ids": [198, 199, ...
  const auto first = first_records(path, 4, TraceFormat::kMooncake);
  REQUIRE(first.size() == 4);
  CHECK(first[0].input_tokens == 40160);
  CHECK(first[0].output_tokens == 6);
  CHECK(first[0].hash_ids.size() == 79);
  CHECK(first[1].hash_ids.front() == 79);
  CHECK(first[2].arrival_s == Approx(0.040).epsilon(0).margin(1e-12));
  CHECK(first[2].input_tokens == 23769);
  CHECK(first[3].arrival_s == Approx(0.277).epsilon(0).margin(1e-12));
  CHECK(first[3].output_tokens == 92);
  CHECK(first[3].hash_ids.front() == 198);

  // Same python one-liner on synthetic_trace.jsonl
  //   -> 3993 61194628 595432 121877 2510208276 1022025
  const Summary s = summarize(path);
  CHECK(s.records == 3993);
  CHECK(s.input_tokens == 61194628);
  CHECK(s.output_tokens == 595432);
  CHECK(s.hash_ids == 121877);
  CHECK(s.hash_id_sum == 2510208276ULL);
  CHECK(s.last_arrival_s == Approx(1022.025).epsilon(0).margin(1e-9));
}

TEST_CASE("BurstGPT slice: failed rows skipped, counts and sums", "[trace][burstgpt]") {
  CAPSIM_REQUIRE_SHARED(kTraces);
  const std::string path = kTraces + "BurstGPT_1_first400rows.csv";
  // head -4 BurstGPT_1_first400rows.csv:
  //   Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
  //   5,ChatGPT,472,18,490,Conversation log
  //   45,ChatGPT,1087,230,1317,Conversation log
  //   118,GPT-4,417,276,693,Conversation log
  const auto first = first_records(path, 3);
  REQUIRE(first.size() == 3);
  CHECK(first[0].arrival_s == 0.0);
  CHECK(first[0].input_tokens == 472);
  CHECK(first[0].output_tokens == 18);
  CHECK(first[1].arrival_s == 40.0);
  CHECK(first[1].input_tokens == 1087);
  CHECK(first[1].output_tokens == 230);
  CHECK(first[2].arrival_s == 113.0);
  CHECK(first[2].input_tokens == 417);
  CHECK(first[2].output_tokens == 276);

  // awk -F, 'NR>1 && $4!=0 {n++; a+=$3; b+=$4} NR>1 && $4==0 {s++} END {print n, s, a, b}'
  //   BurstGPT_1_first400rows.csv -> 383 17 208189 110612
  // (the 17 failed rows all read "...,0,0,0,Conversation log", e.g. line 27: 1106,ChatGPT,0,0,0)
  const Summary s = summarize(path);
  CHECK(s.records == 383);
  CHECK(s.skipped_rows == 17);
  CHECK(s.input_tokens == 208189);
  CHECK(s.output_tokens == 110612);
  CHECK(s.non_decreasing);
  // Last row: 37274,ChatGPT,67,58,125,Conversation log -> 37274 - 5
  CHECK(s.last_arrival_s == 37269.0);
}

TEST_CASE("time_scale multiplies the gaps between arrivals", "[trace]") {
  CAPSIM_REQUIRE_SHARED(kTraces);
  for (const std::string name : {"AzureLLMInferenceTrace_code.csv", "conversation_trace.jsonl",
                                 "BurstGPT_1_first400rows.csv"}) {
    CAPTURE(name);
    const auto normal = all_records(kTraces + name);
    const auto fast = all_records(kTraces + name, std::nullopt, 0.5);
    const auto slow = all_records(kTraces + name, std::nullopt, 2.0);
    REQUIRE(fast.size() == normal.size());
    REQUIRE(slow.size() == normal.size());
    for (std::size_t k = 0; k < normal.size(); ++k) {
      CHECK(fast[k].arrival_s == normal[k].arrival_s * 0.5);  // exact: a power of two
      CHECK(slow[k].arrival_s == normal[k].arrival_s * 2.0);
      CHECK(fast[k].input_tokens == normal[k].input_tokens);
      CHECK(fast[k].output_tokens == normal[k].output_tokens);
      CHECK(fast[k].hash_ids == normal[k].hash_ids);
      if (k > 0) {
        const double gap = normal[k].arrival_s - normal[k - 1].arrival_s;
        CHECK(fast[k].arrival_s - fast[k - 1].arrival_s ==
              Approx(0.5 * gap).epsilon(0).margin(1e-9));
      }
    }
  }
  // A non-power-of-two scale: 0.3 of the Azure code trace's 3435.948056 s.
  const Summary s = summarize(kTraces + "AzureLLMInferenceTrace_code.csv", std::nullopt, 0.3);
  CHECK(s.last_arrival_s == Approx(3435.948056 * 0.3).epsilon(0).margin(1e-6));

  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    const std::string msg = read_error(kTraces + "BurstGPT_1_first400rows.csv", std::nullopt, bad);
    CHECK(msg.rfind(kTraces + "BurstGPT_1_first400rows.csv: time scale '", 0) == 0);
    CHECK(msg.find("' must be a positive number (it multiplies the gaps between arrivals; 0.5 "
                   "replays twice as fast)") != std::string::npos);
  }
  CHECK(read_error(kTraces + "BurstGPT_1_first400rows.csv", std::nullopt, 0.0) ==
        kTraces +
            "BurstGPT_1_first400rows.csv: time scale '0' must be a positive number (it "
            "multiplies the gaps between arrivals; 0.5 replays twice as fast)");
  CHECK(read_error(kTraces + "BurstGPT_1_first400rows.csv", std::nullopt, -1.5) ==
        kTraces +
            "BurstGPT_1_first400rows.csv: time scale '-1.5' must be a positive number (it "
            "multiplies the gaps between arrivals; 0.5 replays twice as fast)");
}

// ---------------------------------------------------------------------------------------------
// Our synthetic samples (workloads/traces/, made by scripts/make_sample_traces.py)

TEST_CASE("the synthetic sample traces read cleanly", "[trace][samples]") {
  const Summary azure = summarize(kSamples + "azure-sample.csv");
  CHECK(azure.records == 120);
  // First 2023-12-31 23:59:45.3084741, last 2024-01-01 00:00:06.8514450: across the year end.
  CHECK(azure.last_arrival_s == Approx(21.5429709).epsilon(0).margin(1e-9));
  const Summary mooncake = summarize(kSamples + "mooncake-sample.jsonl");
  CHECK(mooncake.records == 100);
  CHECK(mooncake.hash_ids > 0);
  const Summary burst = summarize(kSamples + "burstgpt-sample.csv");
  CHECK(burst.records == 139);
  CHECK(burst.skipped_rows == 11);
  const Summary plain = summarize(kSamples + "plain-sample.csv");
  CHECK(plain.records == 100);
  for (const auto* s : {&azure, &mooncake, &burst, &plain}) CHECK(s->non_decreasing);
}

// ---------------------------------------------------------------------------------------------
// Dates, CSV details

TEST_CASE("Azure timestamps roll over days, months, leap days and years", "[trace][azure]") {
  TempDir tmp;
  const std::string path =
      tmp.write("rollover.csv", kAzureHeader +
                                    "2023-12-31 23:59:59.5,10,1\n"      // t0
                                    "2024-01-01 00:00:00.25,10,1\n"     // +0.75 s (year end)
                                    "2024-01-01T00:00:01,10,1\n"        // +1.5 s ('T' form)
                                    "2024-02-28 23:59:59.5,10,1\n"      // 59 days later
                                    "2024-02-29 00:00:00.0000001,10,1\n"  // leap day, 100 ns
                                    "2024-03-01 00:00:00,10,1\n");
  const auto r = all_records(path);
  REQUIRE(r.size() == 6);
  CHECK(r[0].arrival_s == 0.0);
  CHECK(r[1].arrival_s == Approx(0.75).epsilon(0).margin(1e-9));
  CHECK(r[2].arrival_s == Approx(1.5).epsilon(0).margin(1e-9));
  // 2023-12-31 23:59:59.5 -> 2024-02-28 23:59:59.5 is 31 + 28 = 59 days.
  const double feb28 = 59 * 86400.0;
  CHECK(r[3].arrival_s == Approx(feb28).epsilon(0).margin(1e-9));
  // 2024 has a 29 February: 100 ns after midnight, then a whole day to 1 March.
  CHECK(r[4].arrival_s == Approx(feb28 + 0.5000001).epsilon(0).margin(1e-9));
  CHECK(r[5].arrival_s == Approx(feb28 + 0.5 + 86400).epsilon(0).margin(1e-9));
}

TEST_CASE("plain CSV: columns by name, extra columns, quotes, BOM, CRLF, blank lines",
          "[trace][csv]") {
  TempDir tmp;
  const std::string path = tmp.write(
      "plain.csv",
      "\xEF\xBB\xBF"
      "id,\"note, with comma\",Output_Tokens, arrival_s ,input_tokens\r\n"
      "7,\"a, \"\"quoted\"\" b\",5,1.5,10\r\n"
      "\r\n"
      "8,x,6, 2.0 ,11\r\n"
      "9,y,7,2.0,12");  // no final newline
  CHECK(capsim::detect_trace_format(path) == TraceFormat::kPlainCsv);
  const auto r = all_records(path);
  REQUIRE(r.size() == 3);
  CHECK(r[0].arrival_s == 0.0);
  CHECK(r[0].input_tokens == 10);
  CHECK(r[0].output_tokens == 5);
  CHECK(r[1].arrival_s == 0.5);
  CHECK(r[1].input_tokens == 11);
  CHECK(r[1].output_tokens == 6);
  CHECK(r[2].arrival_s == 0.5);
  CHECK(r[2].input_tokens == 12);
}

TEST_CASE("BurstGPT: a failed first row does not set the time origin", "[trace][burstgpt]") {
  TempDir tmp;
  const std::string path = tmp.write("b.csv", kBurstHeader +
                                                  "5,ChatGPT,100,0,100,Conversation log\n"
                                                  "10,ChatGPT,100,20,120,Conversation log\n"
                                                  "25,GPT-4,0,0,0,API log\n"
                                                  "25.5,GPT-4,30,40,70,API log\n");
  auto reader = open_trace(path, std::nullopt);
  TraceRecord r;
  REQUIRE(reader->next(r));
  CHECK(r.arrival_s == 0.0);
  CHECK(r.input_tokens == 100);
  CHECK(r.output_tokens == 20);
  REQUIRE(reader->next(r));
  CHECK(r.arrival_s == 15.5);
  CHECK(r.input_tokens == 30);
  CHECK_FALSE(reader->next(r));
  CHECK(reader->skipped_rows() == 2);
}

TEST_CASE("Mooncake: optional hash_ids, extra keys, fractional milliseconds", "[trace][mooncake]") {
  TempDir tmp;
  const std::string path =
      tmp.write("m.jsonl",
                "{\"timestamp\": 1000, \"input_length\": 10, \"output_length\": 2}\n"
                "\n"
                "{\"output_length\": 3, \"input_length\": 600, \"timestamp\": 2500.5, "
                "\"hash_ids\": [7, 8], \"session\": \"abc\"}\n");
  const auto r = all_records(path);
  REQUIRE(r.size() == 2);
  CHECK(r[0].arrival_s == 0.0);
  CHECK(r[0].hash_ids.empty());
  CHECK(r[1].arrival_s == Approx(1.5005).epsilon(0).margin(1e-12));
  CHECK(r[1].input_tokens == 600);
  CHECK(r[1].output_tokens == 3);
  CHECK(r[1].hash_ids == std::vector<std::uint64_t>{7, 8});
}
