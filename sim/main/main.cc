// capsim: an LLM inference-server capacity simulator. One visible table of subcommands.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "sim/core/allocator_tuning.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/core/progress.h"
#include "sim/answers/default_job.h"
#include "sim/emulate/emulate.h"
#include "sim/server/serve_command.h"
#include "sim/hardware/measured_kernels.h"

// Before anything allocates and before any thread exists (sim/core/allocator_tuning.h): as a
// constructor of priority 101, ahead of every static constructor of default priority (the
// iostream and locale set-up, static strings and tables), whose allocations would otherwise
// fill glibc's first heap below the huge-page range, faulted in 4 KiB at a time (17 faults of
// ~151 in a `--requests 1` run).
[[gnu::constructor(101)]] static void tune_allocator_first() { capsim::tune_allocator(); }

// What the command printed must have reached stdout: a full disk or a closed pipe behind
// `--json -` is a failed run (2), not a success with the answer lost.
static int checked_exit(int code) {
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "capsim: error: cannot write stdout: " << std::strerror(errno) << "\n";
    return 2;
  }
  return code;
}

int main(int argc, char** argv) {
  using namespace capsim::cli;
  CLI::App app{"capsim: how many GPUs of which type serve model M to N users, and at what cost"};
  app.require_subcommand(0, 1);
  // Set as soon as it is parsed: subcommand callbacks run inside parse() and need it.
  app.add_option_function<std::string>("--data-dir", [](const std::string& d) { set_data_dir(d); },
                                       "where calibration/, models/ and workloads/ live")
      ->trigger_on_parse();
  app.add_flag_callback("--measured-kernels", [] { capsim::MeasuredKernels::set_enabled(true); },
                        "time GEMMs, attention, MoE and all-reduce from calibration/kernels/<card>/ where the "
                        "card has tables, whatever the engine file says (also CAPSIM_MEASURED_KERNELS=1; "
                        "docs/cost-model.md#measured-kernels)")
      ->trigger_on_parse();
  int exit_code = 0;
  // The commands in the order `capsim --help` lists them.
  using Adder = void (*)(CLI::App&, int&);
  static const std::pair<const char*, Adder> kCommands[] = {
      {"fit", add_fit_command},           {"roofline", add_roofline_command},
      {"list", add_list_command},         {"simulate", add_simulate_command},
      {"calibrate", add_calibrate_command}, {"plan", add_plan_command},
      {"capacity", add_capacity_command}, {"compare", add_compare_command},
      {"finetune", add_finetune_command}, {"batch-serve", add_batch_serve_command},
      {"check", add_check_command},       {"diff", add_diff_command},
      {"serve", capsim::server::add_serve_command},       {"emulate", capsim::emulate::add_emulate_command},
      {"sweep", add_sweep_commands},      {"merge", add_sweep_commands},
      {"kernels", add_kernels_command}};
  // Building a command's flags costs CLI11 time quadratic in their number (each new option's
  // names are checked against the command's others): ~10 M instructions for all of them, a
  // third of a short run's start-up. A command line that starts with one of the commands (after
  // --data-dir DIR and --allow-large only) gets only that command, which parses it as the full
  // table would; anything else (no command, --help, a misspelt name) gets them all.
  const char* named = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data-dir") {
      ++i;
      continue;
    }
    if (a.rfind("--data-dir=", 0) == 0 || a == "--allow-large" || a == "--measured-kernels") continue;
    if (!a.empty() && a[0] != '-') named = argv[i];
    break;
  }
  Adder only = nullptr;
  for (const auto& [name, add] : kCommands) {
    if (named && std::string(named) == name) only = add;
  }
  if (only) {
    only(app, exit_code);
  } else {
    for (const auto& [name, add] : kCommands) {
      if (std::string(name) != "merge") add(app, exit_code);  // add_sweep_commands adds both
    }
  }
  refuse_non_finite(app);
  add_allow_large(app);
  add_output_checks(app);
  app.footer("run `capsim <command> --help` for a command's flags and examples");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // `compare A B` reads as naming deployments; they are flags, and CLI11 alone only says
    // "arguments were not expected".
    // (Asked of the parsed commands: got_subcommand("compare") throws when the command line
    // named another command, whose table then holds no `compare`.)
    const auto parsed = app.get_subcommands();
    const bool compare = std::any_of(parsed.begin(), parsed.end(),
                                     [](const CLI::App* sub) { return sub->get_name() == "compare"; });
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && compare) {
      std::cerr << "capsim compare: name each deployment with --deployment (-d), e.g. "
                   "-d '4x rtx-4090' -d '1x h100-sxm'; the one positional argument is a scenario YAML\n";
    }
    return code == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    return report_error(e);
  }
  if (app.get_subcommands().empty()) {
    // The main job on built-in defaults: the question of the domain notes' chatbot scenario, with
    // the numbers `capsim plan` and `capsim simulate --replications 8` give
    // (sim/answers/default_job.h).
    try {
      // The scenario's own deployment is decided over kDefaultSeeds seeds: one 30-minute run of
      // this saturated closed loop is not enough (seed 1 alone reads INCONCLUSIVE at 1.0 s, seeds
      // 1-8 give TTFT p95 estimates of 1.0-4.5 s; docs/planning.md#how-sure-an-answer-is).
      constexpr int kDefaultSeeds = 8;
      const std::string path = "workloads/chatbot-500-users.yaml";
      capsim::answers::DefaultJobRequest req;
      load_scenario_file(data_dir() + "/" + path, req.scenario);
      req.scenario_path = path;
      req.seeds = kDefaultSeeds;
      std::cout << "capsim: no command given; answering " << path
                << "'s question (`capsim --help` lists the commands).\n\n"
                << std::flush;
      capsim::ProgressLine line;
      req.stage = [&line](const std::string& what) { line.update("capsim: simulating " + what); };
      req.plan_progress = [&line](std::size_t done, std::size_t total, const char* what) {
        line.update("capsim: planning, " + std::string(what) + " " + std::to_string(done) + "/" + std::to_string(total));
      };
      const capsim::answers::DefaultJobAnswer a = capsim::answers::answer_default_job(req);
      line.finish("capsim: done");
      std::cout << a.text;
      return checked_exit(a.exit_code());
    } catch (const std::exception& e) {
      return report_error(e);
    }
  }
  return checked_exit(exit_code);
}
