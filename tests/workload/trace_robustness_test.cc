// Traces whose numbers would overflow on the way in (issue #11): each is refused at its line with
// the column or field and the accepted range, instead of wrapping to a negative count or time.
#include <catch2/catch.hpp>
#include <limits>
#include <string>

#include "sim/core/error.h"
#include "sim/workload/trace.h"
#include "tests/support/temp_dir.h"

namespace {

using Catch::Matchers::Contains;

// Reads the whole trace; the error text after the temporary folder's path, or "(no error)".
std::string read_error(const std::string& name, const std::string& text, double scale = 1.0) {
  capsim_test::TempDir dir("trace");
  const std::string path = dir.write(name, text);
  try {
    auto r = capsim::open_trace(path, std::nullopt, scale);
    capsim::TraceRecord rec;
    while (r->next(rec)) {
    }
  } catch (const capsim::Error& e) {
    const std::string msg = e.what();
    return msg.substr(msg.find(name));
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("trace robustness: an int64-max length is out of range, not negative later",
          "[workload][trace][robust]") {
  CHECK(read_error("t.jsonl", R"({"timestamp": 0, "input_length": 9223372036854775807, "output_length": 5})" "\n") ==
        "t.jsonl:1: field 'input_length': '9223372036854775807' is out of range (at most "
        "1000000000 tokens)");
  CHECK(read_error("t.csv", "arrival_s,input_tokens,output_tokens\n0,10,9223372036854775807\n") ==
        "t.csv:2: column 'output_tokens': '9223372036854775807' is out of range (at most "
        "1000000000 tokens)");
  CHECK(read_error("t.csv", "arrival_s,input_tokens,output_tokens\n0,99999999999999999999999,1\n") ==
        "t.csv:2: column 'input_tokens': '99999999999999999999999' is out of range (at most "
        "1000000000 tokens)");
  CHECK(read_error("t.csv", "arrival_s,input_tokens,output_tokens\n0,1000000000,1\n") == "(no error)");
}

TEST_CASE("trace robustness: a time of 1e300 s is past what can be simulated",
          "[workload][trace][robust]") {
  CHECK(read_error("t.csv", "arrival_s,input_tokens,output_tokens\n0,10,5\n1e300,10,5\n") ==
        "t.csv:3: column 'arrival_s': '1e300' is 1e+300 s after the first request (time scale "
        "applied); at most 1000000000 s can be simulated");
  CHECK(read_error("t.jsonl",
                   "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
                   "{\"timestamp\": 1e300, \"input_length\": 1, \"output_length\": 1}\n") ==
        "t.jsonl:2: field 'timestamp': '1e+300' is 1e+297 s after the first request (time scale "
        "applied); at most 1000000000 s can be simulated");
  // Within the limit alone, past it once the time scale multiplies the gaps.
  const std::string day = "arrival_s,input_tokens,output_tokens\n0,10,5\n86400,10,5\n";
  CHECK(read_error("t.csv", day, 1.0) == "(no error)");
  CHECK_THAT(read_error("t.csv", day, 1e6), Contains("is 8.64e+10 s after the first request"));
}

TEST_CASE("trace robustness: a number beyond double's range is malformed JSON at its line",
          "[workload][trace][robust]") {
  CHECK(read_error("t.jsonl", "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
                              "{\"timestamp\": 1e400, \"input_length\": 1, \"output_length\": 1}\n") ==
        "t.jsonl:2: malformed JSON ([json.exception.out_of_range.406] number overflow parsing "
        "'1e400'); each line must be one JSON object like "
        R"({"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]})");
}

TEST_CASE("trace robustness: JSON nested 100k deep and a line without end are refused",
          "[workload][trace][robust]") {
  const std::string deep = R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": )" +
                           std::string(100'000, '[') + std::string(100'000, ']') + "}\n";
  CHECK(read_error("t.jsonl", deep) ==
        "t.jsonl:1: JSON nested deeper than 128 levels; each line must be one JSON object like "
        R"({"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]})");
  // 3 MiB without a newline: refused at the 1 MiB line limit, not read whole.
  const std::string huge = "arrival_s,input_tokens,output_tokens\n" + std::string(3u << 20, '1');
  CHECK(read_error("t.csv", huge) ==
        "t.csv:2: line longer than 1 MiB; a trace has one request per line (is this a trace "
        "file?)");
}
