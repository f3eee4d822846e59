// Input that was read silently as something else (issue #35, minor items), through the capsim
// command line: each is now bad input (exit 2) with a message naming the file and column, the
// field or the flag actually given. Each command stops before simulating.
#include <catch2/catch.hpp>
#include <string>

#include "tests/check/cli_run.h"

namespace {

using capsim_test::Run;
using capsim_test::Scratch;

std::string q(const std::string& s) { return "'" + s + "'"; }

void check_refused(const std::string& args, const std::string& message) {
  const Run r = capsim_test::run_capsim(args);
  INFO(args << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "capsim: error: " + message + "\n");
}

}  // namespace

TEST_CASE("readers cli: a trace CSV naming a column twice is refused, naming the file and column",
          "[cli][trace][errors]") {
  Scratch tmp("readers");
  // Before, the first input_tokens column was read and the second ignored unseen.
  const std::string plain =
      tmp.write("plain.csv", "arrival_s,input_tokens,output_tokens,Input_Tokens\n0,100,10,900\n1,200,20,900\n");
  check_refused("simulate -q --trace " + q(plain),
                plain + ":1: column 'Input_Tokens' appears twice in the header (columns 2 and 4); each column "
                        "may be named once");
  const std::string azure = tmp.write("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens,TIMESTAMP\n"
                                                   "2023-11-16 18:15:46.6805900,374,44,x\n");
  check_refused("simulate -q --trace-format azure --trace " + q(azure),
                azure + ":1: column 'TIMESTAMP' appears twice in the header (columns 1 and 4); each column may "
                        "be named once");
  // An empirical length distribution reads one column by name: that one may not repeat (before,
  // the last of them was read).
  const std::string lengths = tmp.write("lengths.csv", "len,len,other,other\n100,200,1,2\n");
  check_refused("simulate -q --rate 1 -n 5 --input-tokens empirical:" + lengths + ":len",
                "--input-tokens: " + lengths +
                    ": column 'len' appears twice in the header (columns 1 and 2); each column may be named once");
}

TEST_CASE("readers cli: --burstiness outside 0.01..100 is refused with the range", "[cli][simulate][errors]") {
  // Before, 1e-300 ran (nearly every gap 0 ns, the rest astronomically long).
  check_refused("simulate -q --rate 1 -n 5 --burstiness 1e-300",
                "--burstiness: '1e-300' is not a gamma shape in 0.01..100 (1 = Poisson, below 1 burstier, above 1 "
                "more regular)");
  check_refused("simulate -q --rate 1 -n 5 --arrival gamma --burstiness 1000",
                "--burstiness: '1000' is not a gamma shape in 0.01..100 (1 = Poisson, below 1 burstier, above 1 "
                "more regular)");
  // The bounds themselves run.
  for (const char* shape : {"0.01", "100"}) {
    const Run r = capsim_test::run_capsim(std::string("simulate -q --rate 1 -n 5 --burstiness ") + shape);
    INFO(shape << ": " << r.err);
    CHECK(r.status == 0);
  }
  Scratch tmp("readers");
  const std::string file = tmp.write("s.yaml", "model: llama-3.1-8b\nworkload: {rate: 1, requests: 5, burstiness: 0.001}\n");
  check_refused("simulate -q " + q(file), file + ": workload.burstiness: '0.001' is not a gamma shape in 0.01..100 "
                                                 "(1 = Poisson, below 1 burstier, above 1 more regular)");
}

TEST_CASE("readers cli: plan --cards with an empty entry is refused, not read as every card",
          "[cli][plan][errors]") {
  // Before, `--cards ,` split into no names, which means all 136 candidates of the catalogue.
  check_refused("plan -q workloads/chat-8b-1x-h100.yaml --cards ,",
                "--cards: ',' has an empty entry; give values separated by single commas");
  check_refused("plan -q workloads/chat-8b-1x-h100.yaml --cards h100-sxm,,l4",
                "--cards: 'h100-sxm,,l4' has an empty entry; give values separated by single commas");
  check_refused("plan -q workloads/chat-8b-1x-h100.yaml --cards l4 --tp 1,",
                "--tp: '1,' has an empty entry; give values separated by single commas");
}

TEST_CASE("readers cli: a closed loop too large names --concurrency or the file's field, not --users",
          "[cli][simulate][errors]") {
  const std::string limit =
      ": 10000000 users is more than one run may ask for (at most 1000000 users; such a run takes minutes and "
      "gigabytes); pass --allow-large to run it anyway";
  check_refused("simulate -q --concurrency 10000000 -n 5", "--concurrency" + limit);
  check_refused("simulate -q --max-concurrency 10000000 -n 5", "--concurrency" + limit);
  check_refused("simulate -q --users 10000000 -n 5", "--users" + limit);
  Scratch tmp("readers");
  const std::string file = tmp.write("c.yaml", "model: llama-3.1-8b\nworkload: {concurrency: 10000000, requests: 5}\n");
  check_refused("simulate -q " + q(file), file + ": workload.concurrency" + limit);
}
