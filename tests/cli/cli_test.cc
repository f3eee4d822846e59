// The capsim command line, run as a user runs it: the built binary (CAPSIM_BINARY) with its
// stdout, stderr and exit status. Exit status: 0 ok / fits, 1 does not fit, 2 bad input.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sim/hardware/card.h"
#include "tests/support/catalogues.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_BINARY
#error "CAPSIM_BINARY must name the built capsim executable (the build defines it)"
#endif
#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using capsim_test::TempDir;

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `capsim <args>` with the data of the source tree (CAPSIM_DATA_DIR unset in the
// environment, so the built-in default applies).
Result run_capsim(const std::string& args) {
  TempDir tmp;
  const std::string err = tmp.path() + "/stderr";
  const std::string cmd =
      "env -u CAPSIM_DATA_DIR '" + std::string(CAPSIM_BINARY) + "' " + args + " 2>'" + err + "'";
  Result r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int raw = ::pclose(pipe);
  REQUIRE(WIFEXITED(raw));
  r.status = WEXITSTATUS(raw);
  r.err = slurp(err);
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr auto& cards = capsim_test::card_catalogue;

}  // namespace

TEST_CASE("cli: fit says what would fit when a model does not", "[cli]") {
  const Result r = run_capsim("fit --model llama-3.1-70b --card rtx-4090");
  CHECK(r.status == 1);
  CHECK(r.err.empty());
  CHECK(contains(r.out, "does not fit: "));
  CHECK(contains(r.out, "  what would fit:\n"));
  // At least one alternative line: "    --<flag> ...: N KV tokens, M sequences of 4096 tokens".
  int alternatives = 0;
  for (const auto& l : lines(r.out)) {
    if (l.rfind("    --", 0) == 0 && contains(l, " KV tokens, ")) ++alternatives;
  }
  CHECK(alternatives >= 1);
}

TEST_CASE("cli: fit's alternatives include int4 over 4 cards for Llama-3.1-70B on RTX 4090s", "[cli]") {
  // 70B fits no 4090 pair in any precision; over 4 cards both fp8 and int4 first fit. Both are
  // listed at TP 4 (int4 over 4 x 4090 is the usual setup), each line with the KV capacity that
  // `fit` of that deployment reports; TP 8 adds only bf16 (fp8 and int4 already fit at TP 4).
  const Result r = run_capsim("fit --model llama-3.1-70b --card rtx-4090");
  CHECK(r.status == 1);
  const auto kv_tokens = [](const std::string& args) {
    const Result f = run_capsim("fit --model llama-3.1-70b --card rtx-4090 " + args + " --json -");
    REQUIRE(f.status == 0);
    return nlohmann::json::parse(f.out).at("kv_tokens").get<long long>();
  };
  std::vector<std::string> alternatives;
  for (const auto& l : lines(r.out)) {
    if (l.rfind("    --", 0) == 0 && contains(l, " KV tokens, ") && !contains(l, "--card ")) {
      alternatives.push_back(l.substr(0, l.find(" KV tokens, ")));
    }
  }
  const std::string link = " (PCIe via host (no P2P)): ";
  CHECK(alternatives == std::vector<std::string>{
                            "    --weights fp8 --tp 4" + link + std::to_string(kv_tokens("--weights fp8 --tp 4")),
                            "    --weights int4 --tp 4" + link + std::to_string(kv_tokens("--weights int4 --tp 4")),
                            "    --tp 8" + link + std::to_string(kv_tokens("--tp 8"))});
}

TEST_CASE("cli: fit --json - prints the plan as JSON with the hand-computed KV capacity",
          "[cli]") {
  const Result r = run_capsim("fit --model llama-3.1-8b --card h100-sxm --json -");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);  // stdout holds the JSON only
  // As in memory_plan_test: 0.9 x visible - 16,060,522,496 (bf16 weights) - 1,050,673,152
  // (sampler activations 1024 x 128256 x 8) - 1.79 GiB (vLLM runtime), in blocks of
  // 16 x 131,072 B, times 16 tokens.
  const double visible = cards().find("h100-sxm").visible_memory_bytes;
  const double kv = 0.9 * visible - 16'060'522'496.0 - 1'050'673'152.0 - 1.79 * 1073741824.0;
  const long long tokens = static_cast<long long>(std::floor(kv / (16 * 131'072.0))) * 16;
  CHECK(j.at("kv_tokens").get<long long>() == tokens);
  CHECK(j.at("fits").get<bool>());
  CHECK(j.at("total_params").get<long long>() == 8'030'261'248);
  CHECK(j.at("weights").get<std::string>() == "bf16");
  CHECK(j.at("alternatives").empty());
}

TEST_CASE("cli: roofline --json FILE writes the step the table shows", "[cli]") {
  TempDir dir;
  const std::string file = dir.path() + "/r.json";
  const Result r = run_capsim(
      "roofline --model llama-3.1-8b --card h100-sxm --batch 8 --context 2048 --json '" + file + "'");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  REQUIRE(std::filesystem::exists(file));
  // Only the file itself: its temporary was renamed into it.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);
  const nlohmann::json j = nlohmann::json::parse(slurp(file));
  const double step = j.at("step_seconds").get<double>();
  CHECK(step > 0);
  // The table's total row: "step  <GFLOP>  <MB>  <time> <unit>  100%".
  bool found = false;
  for (const auto& l : lines(r.out)) {
    std::stringstream s(l);
    std::string first, gflop, mb, unit, share;
    double value = 0;
    if (!(s >> first) || first != "step") continue;
    REQUIRE(static_cast<bool>(s >> gflop >> mb >> value >> unit >> share));
    CHECK(share == "100%");
    // format_time prints 2 decimals in s and ms, 1 in us, none in ns: equal to within half of the
    // last printed digit.
    double scale = 1, half_digit = 0.005;
    if (unit == "ms") scale = 1e-3;
    else if (unit == "us") scale = 1e-6, half_digit = 0.05;
    else if (unit == "ns") scale = 1e-9, half_digit = 0.5;
    else REQUIRE(unit == "s");
    CHECK(step == Approx(value * scale).margin(half_digit * scale * 1.0001));
    // The GFLOP column is the JSON's flops per GPU / 1e9, to 2 decimals.
    CHECK(j.at("flops_per_gpu").get<double>() / 1e9 == Approx(std::stod(gflop)).margin(0.0050001));
    found = true;
  }
  CHECK(found);
  CHECK(j.at("batch").get<long long>() == 8);
  CHECK(j.at("context").get<long long>() == 2048);
}

TEST_CASE("cli: bad input exits 2 with a message naming the flag and what is accepted",
          "[cli][errors]") {
  SECTION("an unknown card") {
    const Result r = run_capsim("fit --model llama-3.1-8b --card h100-sxx");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "capsim: error: --card: unknown card 'h100-sxx'; did you mean: h100-sxm?; accepted: a10, "
          "a100-40gb-pcie, a100-40gb-sxm, a100-80gb-pcie, a100-80gb-sxm, a10g, b200, b300, "
          "cpu-server-ddr5, gb200, h100-nvl, h100-pcie, h100-sxm, h200, l4, l40s, mi300x, mi325x, "
          "mi355x, rtx-3090, rtx-4090, rtx-pro-6000, t4\n");
  }
  SECTION("an unknown model") {
    const Result r = run_capsim("fit --model phi-3-mino --card h100-sxm");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "capsim: error: --model: unknown model 'phi-3-mino'; did you mean: phi-3-mini?; accepted: a "
          "catalogue name (capsim list models), a Hugging Face id of one, or a path to a "
          "config.json\n");
  }
  SECTION("bf16 weights on a T4, which has no bf16") {
    const Result r = run_capsim("fit --model llama-3.2-1b --weights bf16 --card t4");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "capsim: error: --weights: bf16 is not supported on t4 (" +
                       std::string(CAPSIM_DATA_DIR) +
                       "/calibration/cards/t4.yaml: dense_peak has fp32, fp16, int8, int4); use "
                       "--weights fp16\n");
  }
  SECTION("a TP degree that does not divide the heads") {
    const Result r = run_capsim("fit --model llama-3.1-8b --card h100-sxm --tp 3");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "capsim: error: --tp: 3 does not divide the 32 attention heads of llama-3.1-8b; "
          "accepted: a divisor of 32\n");
  }
  SECTION("TP 0, rejected by the flag's range") {
    const Result r = run_capsim("fit --model llama-3.1-8b --card h100-sxm --tp 0");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    // CLI11 2.1: "<option>: Value <v> not in range <min> to <max>" and a pointer to --help.
    CHECK(r.err == "--tp: Value 0 not in range 1 to 64\nRun with --help for more information.\n");
  }
  SECTION("an unknown precision") {
    const Result r = run_capsim("fit --model llama-3.1-8b --card h100-sxm --weights fp9");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "capsim: error: --weights: unknown precision 'fp9'; accepted: fp32, tf32, fp16, bf16, "
          "fp8, int8, int4, nvfp4, mxfp4 (also float16, bfloat16, fp8_e4m3, fp8_e5m2, awq, gptq, "
          "fp4 = nvfp4)\n");
  }
  SECTION("roofline of an empty step") {
    const Result r = run_capsim("roofline --model llama-3.1-8b --batch 0");
    CHECK(r.status == 2);
    CHECK(r.err ==
          "capsim: error: --batch, --prefill: the step is empty; give --batch >= 1 or "
          "--prefill >= 1\n");
  }
}

// 23 since issue 32 added b300, gb200, mi325x, mi355x and rtx-pro-6000.
TEST_CASE("cli: list cards lists all 23 cards", "[cli]") {
  const std::vector<std::string> expected = {
      "a10",       "a100-40gb-pcie", "a100-40gb-sxm", "a100-80gb-pcie", "a100-80gb-sxm",
      "a10g",      "b200",           "b300",          "cpu-server-ddr5", "gb200",
      "h100-nvl",  "h100-pcie",      "h100-sxm",      "h200",           "l4",
      "l40s",      "mi300x",         "mi325x",        "mi355x",         "rtx-3090",
      "rtx-4090",  "rtx-pro-6000",   "t4"};
  const Result r = run_capsim("list cards");
  REQUIRE(r.status == 0);
  std::vector<std::string> listed;
  for (const auto& l : lines(r.out)) {
    std::stringstream s(l);
    std::string first;
    s >> first;
    if (std::find(expected.begin(), expected.end(), first) != expected.end()) listed.push_back(first);
  }
  CHECK(listed == expected);
  // The table has a header, a rule and one row per card.
  CHECK(lines(r.out).size() == 2 + expected.size());

  const Result j = run_capsim("list cards --json -");
  REQUIRE(j.status == 0);
  const nlohmann::json cards_json = nlohmann::json::parse(j.out);
  REQUIRE(cards_json.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(cards_json[i].at("name").get<std::string>() == expected[i]);
  }
  // Each card's class from its file (what plan --card-class selects on; the web page's "datacenter
  // cards only" reads it here): the GeForce cards are consumer, the rest datacenter (the RTX PRO
  // 6000 Server Edition, issue 32, included).
  for (const auto& c : cards_json) {
    const std::string name = c.at("name").get<std::string>();
    CHECK(c.at("card_class") == (name == "rtx-3090" || name == "rtx-4090" ? "consumer" : "datacenter"));
  }
}

TEST_CASE("cli: --json to an unwritable path exits 2 and leaves nothing behind", "[cli][errors]") {
  const std::string path = "/nonexistent/x.json";
  REQUIRE_FALSE(std::filesystem::exists("/nonexistent"));
  const Result r = run_capsim("fit --model llama-3.1-8b --card h100-sxm --json " + path);
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: --json: cannot write /nonexistent/x.json: folder /nonexistent does not exist\n");
  CHECK_FALSE(std::filesystem::exists(path));

  const Result roof = run_capsim("roofline --model llama-3.1-8b --json " + path);
  CHECK(roof.status == 2);
  CHECK_FALSE(std::filesystem::exists(path));
}

// --data-dir must take effect before the subcommand's callback loads the catalogues (CLI11 runs
// that callback inside parse()).
TEST_CASE("cli: --data-dir chooses the catalogues", "[cli]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/calibration/cards");
  std::filesystem::copy_file(std::string(CAPSIM_DATA_DIR) + "/calibration/cards/t4.yaml",
                             dir.path() + "/calibration/cards/t4.yaml");
  const Result r = run_capsim("--data-dir '" + dir.path() + "' list cards --json -");
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.size() == 1);  // only the one card of that data root
}

// The models added for issue #9 load and `fit` plans them: exit 0 on a deployment that holds
// them, with the hand-counted totals of model_spec_test.
TEST_CASE("cli: fit works on deepseek-v3, llama-3.1-405b, codellama-34b, mixtral-8x22b, "
          "mistral-small-24b", "[cli][models]") {
  struct Case {
    std::string args;
    long long total;
  };
  const std::vector<Case> cases = {
      // 671,026,419,200 fp8 weights / 8 = ~84 GB per H200 of 141 GB.
      {"--model deepseek-v3 --card h200 --tp 8 --weights fp8", 671'026'419'200},
      // 405,853,388,800 fp8 / 8 = ~51 GB per H100.
      {"--model llama-3.1-405b --card h100-sxm --tp 8 --weights fp8", 405'853'388'800},
      // 2 x 33,743,970,304 = 67.5 GB bf16 on one H200.
      {"--model codellama-34b --card h200", 33'743'970'304},
      // 2 x 140,620,634,112 / 8 = 35 GB per H100.
      {"--model mixtral-8x22b --card h100-sxm --tp 8", 140'620'634'112},
      // 2 x 23,572,403,200 = 47 GB on one H100.
      {"--model mistral-small-24b --card h100-sxm", 23'572'403'200},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const Result r = run_capsim("fit " + c.args + " --json -");
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j.at("total_params").get<long long>() == c.total);
    CHECK(j.at("fits").get<bool>());
    CHECK(j.at("kv_tokens").get<long long>() > 0);
  }
}

TEST_CASE("cli: fit --max-model-len is checked against the context and the KV cache",
          "[cli][errors]") {
  SECTION("above max_position_embeddings: exit 2 naming the flag and the accepted range") {
    const Result r = run_capsim("fit --model llama-3.1-8b --card h100-sxm --max-model-len 200000");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "capsim: error: --max-model-len: 200000 exceeds llama-3.1-8b's context "
                          "of 131072 tokens (max_position_embeddings in "));
    CHECK(contains(r.err, "accepted: 1 to 131072 tokens\n"));
  }
  SECTION("more than the KV cache holds: does not fit (exit 1), vLLM's numbers") {
    // rtx-4090: 16 GB of bf16 weights leave a few GB; one 131072-token sequence needs
    // 131072 x 131,072 B = 17,179,869,184 B.
    const Result r = run_capsim("fit --model llama-3.1-8b --card rtx-4090 --max-model-len 131072");
    CHECK(r.status == 1);
    CHECK(contains(r.out, "does not fit: to serve one request of max_model_len 131072 tokens, "
                          "17179869184 B (16.00 GiB) of KV cache is needed per GPU"));
  }
  SECTION("one that fits sets the concurrency context and the JSON field") {
    const Result r = run_capsim("fit --model llama-3.1-8b --card rtx-4090 --max-model-len 8192 --json -");
    CHECK(r.status == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j.at("max_model_len").get<long long>() == 8192);
    CHECK(j.at("context").get<long long>() == 8192);
  }
}

TEST_CASE("cli: fit on gemma-2-9b reports the sliding-window layout", "[cli][sliding]") {
  const Result r = run_capsim("fit --model gemma-2-9b --card h100-sxm --json -");
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("sliding_window").get<long long>() == 4096);
  CHECK(j.at("sliding_layers").get<long long>() == 21);
  CHECK(j.at("kv_layers_per_block").get<long long>() == 21);
  // A block of 16 tokens x 21 layers x 8192 B = 2,752,512 B.
  CHECK(j.at("kv_block_bytes").get<double>() == 2'752'512.0);
}

TEST_CASE("cli: an A100 80GB offers the 79.25 GiB CUDA reports, so Llama-3.1-70B fits on two",
          "[cli][fit]") {
  // calibration/cards/a100-80gb-sxm.yaml memory_visible: 79.25 GiB = 85,094,039,552 B (not the
  // datasheet's decimal 80 GB = 74.51 GiB, which left this deployment 3.12 GiB short).
  const Result r = run_capsim("fit --model llama-3.1-70b --card a100-80gb-sxm --tp 2 --json -");
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& g = j.at("per_gpu");
  CHECK(g.at("visible_bytes").get<double>() == 85'094'039'552.0);
  CHECK(g.at("budget_bytes").get<double>() == Approx(0.9 * 85'094'039'552.0));
  CHECK(j.at("fits") == true);
  // KV per GPU: budget - weights 70.55 GB (141.1 GB / 2) - activations - runtime = 1.91 GB;
  // a 16-token block per GPU is 16 x 80 layers x 4 KV heads x 128 x 2 (K, V) x 2 B = 2,621,440 B.
  const double kv = g.at("budget_bytes").get<double>() - 70'553'706'496.0 -
                    g.at("activations_bytes").get<double>() - g.at("runtime_bytes").get<double>();
  CHECK(g.at("kv_cache_bytes").get<double>() == Approx(kv));
  CHECK(j.at("kv_blocks") == static_cast<long long>(kv / 2'621'440.0));
  CHECK(j.at("kv_blocks") == 728);
}

TEST_CASE("cli: an answer that cannot be written to stdout is a failed run", "[cli][errors]") {
  // /dev/full refuses every write (ENOSPC): before, `--json - > /dev/full` exited 0, the answer lost.
  if (!std::filesystem::exists("/dev/full")) {
    CAPSIM_SKIP("no /dev/full on this system");
  }
  for (const char* args : {"fit > /dev/full", "simulate -q -n 5 --rate 1 --json - > /dev/full"}) {
    const Result r = run_capsim(args);
    INFO(args);
    CHECK(r.status == 2);
    CHECK(r.err == "capsim: error: cannot write stdout: No space left on device\n");
  }
  CHECK(run_capsim("fit > /dev/null").status == 0);
}
