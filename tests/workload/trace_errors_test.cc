// Trace readers (sim/workload/trace.h) against small bad files written to a temporary directory
// and bad rows of the real traces: every refusal names the file, line, column and what is accepted.
#include <catch2/catch.hpp>
#include <string>

#include "tests/support/skip.h"
#include "tests/workload/trace_fixtures.h"

using namespace capsim_test::trace;

// ---------------------------------------------------------------------------------------------
// Bad input: each message pinned

TEST_CASE("missing, empty and header-only files", "[trace][errors]") {
  TempDir tmp;
  const std::string missing = tmp.path() + "/nope.csv";
  CHECK(read_error(missing) == missing + ": no such trace file");
  CHECK(read_error(missing, TraceFormat::kAzure) == missing + ": no such trace file");
  CHECK(read_error(tmp.path()) == tmp.path() + ": is a directory, not a trace file");

  const std::string empty = tmp.write("empty.csv", "");
  const std::string blank = tmp.write("blank.jsonl", "\n  \r\n\n");
  for (const auto& path : {empty, blank}) {
    CHECK(read_error(path) == path + ": no requests");
    for (auto f : {TraceFormat::kAzure, TraceFormat::kMooncake, TraceFormat::kBurstGpt,
                   TraceFormat::kPlainCsv}) {
      CHECK(read_error(path, f) == path + ": no requests");
    }
  }
  const std::string azure = tmp.write("header.csv", kAzureHeader);
  CHECK(read_error(azure) == azure + ": no requests");
  const std::string plain = tmp.write("plain.csv", "arrival_s,input_tokens,output_tokens\n\n");
  CHECK(read_error(plain) == plain + ": no requests");
  const std::string failed = tmp.write("failed.csv", kBurstHeader +
                                                         "5,ChatGPT,0,0,0,Conversation log\n"
                                                         "9,GPT-4,12,0,12,API log\n");
  CHECK(read_error(failed) == failed +
                                  ": no requests (all 2 rows have Response tokens 0, i.e. failed "
                                  "requests, which are skipped)");
}

TEST_CASE("Azure: bad timestamps, tokens, columns and order", "[trace][errors][azure]") {
  CAPSIM_REQUIRE_SHARED(kTraces);
  TempDir tmp;
  const std::string ok = "2023-11-16 18:17:03.9799600,4808,10\n";
  const auto bad_row = [&](const std::string& row) {
    return read_error(tmp.write("a.csv", kAzureHeader + ok + row + "\n"));
  };
  const std::string path = tmp.path() + "/a.csv";

  for (const std::string ts :
       {"2023-11-16 24:00:00", "2023-02-29 10:00:00", "2023-11-16 18:17:04.12345678",
        "2023-11-16 18:17:04.", "2023/11/16 18:17:04", "2023-11-16 18:17", "1700150224",
        "2023-11-16 18:17:04Z", "2023-13-01 00:00:00", ""}) {
    CAPTURE(ts);
    CHECK(bad_row(ts + ",10,5") == path + ":3: column 'TIMESTAMP': '" + ts + "' " +
                                       kTimestampAccepted);
  }
  CHECK(bad_row("2023-11-16 18:17:03.0000000,10,5") ==
        path +
            ":3: column 'TIMESTAMP': '2023-11-16 18:17:03.0000000' is earlier than '2023-11-16 "
            "18:17:03.9799600' on line 2; requests must be in non-decreasing time order");
  CHECK(bad_row("2023-11-16 18:17:05,-5,10") ==
        path + ":3: column 'ContextTokens': '-5' is not a non-negative integer");
  CHECK(bad_row("2023-11-16 18:17:05,10,12.5") ==
        path + ":3: column 'GeneratedTokens': '12.5' is not a non-negative integer");
  CHECK(bad_row("2023-11-16 18:17:05,ten,5") ==
        path + ":3: column 'ContextTokens': 'ten' is not a non-negative integer");
  CHECK(bad_row("2023-11-16 18:17:05,,5") ==
        path + ":3: column 'ContextTokens': '' is not a non-negative integer");
  CHECK(bad_row("2023-11-16 18:17:05,99999999999999999999,5") ==
        path +
            ":3: column 'ContextTokens': '99999999999999999999' is out of range (at most "
            "1000000000 tokens)");
  CHECK(bad_row("2023-11-16 18:17:05,0,5") ==
        path +
            ":3: column 'ContextTokens': '0' must be at least 1 (every request has at least one "
            "input token)");
  CHECK(bad_row("2023-11-16 18:17:05,10,0") ==
        path +
            ":3: column 'GeneratedTokens': '0' must be at least 1 (every request has at least "
            "one output token)");
  CHECK(bad_row("2023-11-16 18:17:05,10") ==
        path + ":3: column 'GeneratedTokens': missing (the row has 2 fields, the header 3)");
  CHECK(bad_row("\"2023-11-16 18:17:05,10,5") == path + ":3: unterminated quoted field");

  // The records before a bad row are delivered; the error comes with the bad row.
  auto reader = open_trace(tmp.write("late.csv", kAzureHeader + ok + ok + "x,1,1\n"),
                           TraceFormat::kAzure);
  TraceRecord r;
  CHECK(reader->next(r));
  CHECK(reader->next(r));
  CHECK(error_of([&] { reader->next(r); }) ==
        tmp.path() + "/late.csv:4: column 'TIMESTAMP': 'x' " + kTimestampAccepted);

  const std::string cols = tmp.write("cols.csv", "TIMESTAMP,ContextTokens\n" + ok);
  CHECK(read_error(cols, TraceFormat::kAzure) ==
        cols +
            ":1: missing column 'GeneratedTokens'; the header has: TIMESTAMP, ContextTokens; the "
            "azure format needs columns TIMESTAMP, ContextTokens, GeneratedTokens");
  // A trace named with the wrong format fails on the header.
  CHECK(read_error(kTraces + "BurstGPT_1_first400rows.csv", TraceFormat::kAzure) ==
        kTraces +
            "BurstGPT_1_first400rows.csv:1: missing column 'ContextTokens'; the header has: "
            "Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type; the azure "
            "format needs columns TIMESTAMP, ContextTokens, GeneratedTokens");
}

TEST_CASE("BurstGPT and plain CSV: bad values", "[trace][errors]") {
  TempDir tmp;
  const std::string b = tmp.path() + "/b.csv";
  const auto burst = [&](const std::string& rows) {
    return read_error(tmp.write("b.csv", kBurstHeader + rows));
  };
  CHECK(burst("5,ChatGPT,0,20,20,Conversation log\n") ==
        b +
            ":2: column 'Request tokens': '0' must be at least 1 (every request has at least one "
            "input token)");
  CHECK(burst("abc,ChatGPT,10,20,30,Conversation log\n") ==
        b + ":2: column 'Timestamp': 'abc' is not a non-negative number of seconds");
  CHECK(burst("5,ChatGPT,10,-20,30,Conversation log\n") ==
        b + ":2: column 'Response tokens': '-20' is not a non-negative integer");
  CHECK(burst("50,ChatGPT,10,20,30,Conversation log\n40,ChatGPT,10,20,30,Conversation log\n") ==
        b +
            ":3: column 'Timestamp': '40' is earlier than '50' on line 2; requests must be in "
            "non-decreasing time order");
  CHECK(burst("50,ChatGPT\n") ==
        b + ":2: column 'Request tokens': missing (the row has 2 fields, the header 6)");
  const std::string nocol = tmp.write("nocol.csv", "Timestamp,Model,Request tokens\n1,x,2\n");
  CHECK(read_error(nocol, TraceFormat::kBurstGpt) ==
        nocol +
            ":1: missing column 'Response tokens'; the header has: Timestamp, Model, Request "
            "tokens; the burstgpt format needs columns Timestamp, Request tokens, Response "
            "tokens");

  const std::string p = tmp.path() + "/p.csv";
  const auto plain = [&](const std::string& rows) {
    return read_error(tmp.write("p.csv", "arrival_s,input_tokens,output_tokens\n" + rows));
  };
  for (const std::string t : {"-1", "nan", "inf", "1.5s", "", "0x10"}) {
    CAPTURE(t);
    CHECK(plain(t + ",10,5\n") ==
          p + ":2: column 'arrival_s': '" + t + "' is not a non-negative number of seconds");
  }
  CHECK(plain("1,10,5\n0.5,10,5\n") ==
        p +
            ":3: column 'arrival_s': '0.5' is earlier than '1' on line 2; requests must be in "
            "non-decreasing time order");
  CHECK(plain("1,10,5.0\n") ==
        p + ":2: column 'output_tokens': '5.0' is not a non-negative integer");
  CHECK(plain("1,1e3,5\n") == p + ":2: column 'input_tokens': '1e3' is not a non-negative integer");
  const std::string nocol2 = tmp.write("nocol2.csv", "arrival_s,input_tokens\n1,2\n");
  CHECK(read_error(nocol2, TraceFormat::kPlainCsv) ==
        nocol2 +
            ":1: missing column 'output_tokens'; the header has: arrival_s, input_tokens; the csv "
            "format needs columns arrival_s, input_tokens, output_tokens");
}

TEST_CASE("Mooncake: malformed JSON, missing and bad fields, order", "[trace][errors][mooncake]") {
  TempDir tmp;
  const std::string path = tmp.path() + "/m.jsonl";
  const std::string ok = R"({"timestamp": 100, "input_length": 600, "output_length": 5})";
  const auto bad_line = [&](const std::string& line) {
    return read_error(tmp.write("m.jsonl", ok + "\n" + line + "\n"), TraceFormat::kMooncake);
  };
  CHECK(bad_line(R"({"timestamp": 200, "input_length": 5)") ==
        path + ":2: malformed JSON at character 37; each line must be one JSON object like " +
            kJsonExample);
  CHECK(bad_line(R"({"timestamp": 200, 'input_length': 5})") ==
        path + ":2: malformed JSON at character 20; each line must be one JSON object like " +
            kJsonExample);
  CHECK(bad_line("[1, 2]") ==
        path + ":2: expected a JSON object, found an array; each line must be one JSON object "
               "like " +
            kJsonExample);
  CHECK(bad_line(R"({"timestamp": 200, "input_length": 5})") ==
        path +
            ":2: missing field 'output_length'; each line needs timestamp (ms), input_length, "
            "output_length and optionally hash_ids, like " +
            kJsonExample);
  CHECK(bad_line(R"({"input_length": 5, "output_length": 1})") ==
        path +
            ":2: missing field 'timestamp'; each line needs timestamp (ms), input_length, "
            "output_length and optionally hash_ids, like " +
            kJsonExample);
  CHECK(bad_line(R"({"timestamp": 200, "input_length": -3, "output_length": 1})") ==
        path + ":2: field 'input_length': '-3' is not a non-negative integer");
  CHECK(bad_line(R"({"timestamp": 200, "input_length": 12.5, "output_length": 1})") ==
        path + ":2: field 'input_length': '12.5' is not a non-negative integer");
  CHECK(bad_line(R"({"timestamp": 200, "input_length": "12", "output_length": 1})") ==
        path + ":2: field 'input_length': '\"12\"' is not a non-negative integer");
  CHECK(bad_line(R"({"timestamp": 200, "input_length": 12, "output_length": 0})") ==
        path +
            ":2: field 'output_length': '0' must be at least 1 (every request has at least one "
            "output token)");
  CHECK(bad_line(R"({"timestamp": 200, "input_length": 0, "output_length": 3})") ==
        path +
            ":2: field 'input_length': '0' must be at least 1 (every request has at least one "
            "input token)");
  CHECK(bad_line(R"({"timestamp": "abc", "input_length": 12, "output_length": 3})") ==
        path + ":2: field 'timestamp': '\"abc\"' is not a non-negative number of milliseconds");
  CHECK(bad_line(R"({"timestamp": -5, "input_length": 12, "output_length": 3})") ==
        path + ":2: field 'timestamp': '-5' is not a non-negative number of milliseconds");
  CHECK(bad_line(R"({"timestamp": 50, "input_length": 12, "output_length": 3})") ==
        path +
            ":2: field 'timestamp': '50' is earlier than '100' on line 1; requests must be in "
            "non-decreasing time order");
  CHECK(bad_line(R"({"timestamp": 200, "input_length": 12, "output_length": 3, "hash_ids": 5})") ==
        path + ":2: field 'hash_ids': '5' is not an array of non-negative integers");
  CHECK(bad_line(
            R"({"timestamp": 200, "input_length": 12, "output_length": 3, "hash_ids": [4, -1]})") ==
        path + ":2: field 'hash_ids' element 1: '-1' is not a non-negative integer");
  // A CSV file named as mooncake fails on its first line.
  const std::string csv = tmp.write("x.csv", kAzureHeader);
  CHECK(read_error(csv, TraceFormat::kMooncake) ==
        csv + ":1: malformed JSON at character 1; each line must be one JSON object like " +
            kJsonExample);
}
