// `capsim calibrate`: fit a card's cost-model constants to measurements (docs/calibration.md).
//
//   capsim calibrate fit PROFILE.json --card CARD [--out FILE] [--force]
//   capsim calibrate fit --vidur DIR --card CARD [--sku SKU] [--out FILE]
//   capsim calibrate compare STEPS.csv [--card CARD] [--model M] [--tp N] ...
//   capsim calibrate show [--card CARD]
//   capsim calibrate tables PROFILE.json --card CARD [--out DIR]
//   capsim calibrate runs RESULT.json... --model M --card CARD [--tp N] [--engine E] --out PROFILE.yaml
//
// Also registers the global flag --no-calibration (before the command: `capsim --no-calibration
// roofline ...`), which keeps calibration/profiles/*.yaml from being applied to the cards.
#include <filesystem>
#include <iostream>

#include "sim/answers/calibrate_answer.h"
#include "sim/answers/calibrate_runs_answer.h"
#include "sim/calibration/card_profile.h"
#include "sim/calibration/kernel_tables.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/report/json_output.h"
#include "sim/scenario/catalogues.h"

namespace capsim::cli {
namespace {

struct FitOptions {
  answers::CalibrateFitRequest request;
  std::string out;
  std::string json;
};

int run_fit(const FitOptions& o) {
  answers::CalibrateFitRequest request = o.request;
  std::string out = o.out;
  request.before_profile = [&](const Card& card) {
    if (!o.out.empty()) return;
    // The default profile's folder is made when missing (a --data-dir without one), then checked
    // with --json before the fit, as a given --out is (add_output_checks).
    out = data_dir() + "/calibration/profiles/" + card.name + ".yaml";
    std::filesystem::create_directories(std::filesystem::path(out).parent_path());
    check_outputs({{"--json", o.json}, {"--out", out}});
  };
  const answers::CalibrateFitAnswer a = answers::answer_calibrate_fit(request);
  const bool quiet = o.json == "-" || out == "-";
  if (!quiet) answers::print_calibrate_fit(std::cout, a);

  OutputSet outputs;
  if (!o.json.empty()) outputs.add_json(o.json, answers::calibrate_fit_json(a, out));
  outputs.add("--out", out, calibration::card_profile_yaml(a.fit));
  outputs.commit();
  if (!quiet) {
    const std::string canonical = data_dir() + "/calibration/profiles/" + a.card.name + ".yaml";
    std::cout << "\nwrote " << out;
    if (std::filesystem::weakly_canonical(out) == std::filesystem::weakly_canonical(canonical)) {
      std::cout << "; capsim now applies it to " << a.card.name
                << " (off: `capsim --no-calibration <command>` or CAPSIM_NO_CALIBRATION=1)";
    } else {
      std::cout << "; copy it to calibration/profiles/" << a.card.name << ".yaml to apply it";
    }
    std::cout << "\n";
  }
  return 0;
}

struct CompareOptions {
  answers::CalibrateCompareRequest request;
  std::string json;
};

int run_compare(const CompareOptions& o) {
  const answers::CalibrateCompareAnswer a = answers::answer_calibrate_compare(o.request);
  if (o.json != "-") answers::print_calibrate_compare(std::cout, a);
  if (!o.json.empty()) write_json(o.json, answers::calibrate_compare_json(a));
  return 0;
}

int run_show(const std::string& card_name) {
  answers::print_calibrate_show(std::cout, answers::answer_calibrate_show(card_name));
  return 0;
}

struct TablesOptions {
  std::string profile, card, out;
};

// Writes every table or none (OutputSet), into calibration/kernels/<card>/ unless --out says.
int run_tables(const TablesOptions& o) {
  const Card& card = scenario::find_card(o.card);
  const calibration::KernelTablesFromProfile t =
      calibration::kernel_tables_from_profile(calibration::load_profile(o.profile), card.name);
  const std::string dir = o.out.empty() ? data_dir() + "/calibration/kernels/" + card.name : o.out;
  std::filesystem::create_directories(dir);
  OutputSet outputs;
  for (const auto& table : t.tables) outputs.add("--out", dir + "/" + table.file, table.text);
  outputs.commit();
  for (const auto& table : t.tables) {
    std::cout << "wrote " << dir << "/" << table.file << " (" << table.rows << " rows)\n";
  }
  for (const auto& line : t.left_out) std::cout << "left out: " << line << "\n";
  std::cout << "capsim reads them for " << card.name << " where the engine profile has kernels.measured_kernels "
            << "on (or --measured-kernels); see docs/cost-model.md#measured-kernels\n";
  return 0;
}

struct RunsOptions {
  answers::CalibrateRunsRequest request;
  std::string out, json;
};

// The report, then the profile (and --json) written together or not at all.
int run_runs(const RunsOptions& o) {
  const answers::CalibrateRunsAnswer a = answers::answer_calibrate_runs(o.request);
  const bool quiet = o.json == "-" || o.out == "-";
  if (!quiet) answers::print_calibrate_runs(std::cout, a);
  OutputSet outputs;
  if (!o.json.empty()) outputs.add_json(o.json, answers::calibrate_runs_json(a, o.out.empty() ? std::nullopt
                                                                                                : std::optional(o.out)));
  outputs.add("--out", o.out, a.profile_yaml);
  outputs.commit();
  if (!quiet) {
    if (o.out.empty()) {
      std::cout << "\nno profile written (give --out PROFILE.yaml)\n";
    } else {
      std::cout << "\nwrote " << o.out << "; use it with `capsim simulate|plan|check --engine " << o.out << "`\n";
    }
  }
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, int& exit_code) {
  app.add_flag_callback("--no-calibration", [] { CardCatalogue::set_use_calibration(false); },
                        "ignore calibration/profiles/*.yaml (also CAPSIM_NO_CALIBRATION=1)")
      ->trigger_on_parse();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "fit a card's efficiencies to GPU measurements; compare measured step times");
  cmd->require_subcommand(1);
  cmd->footer(
      "examples:\n"
      "  capsim-calibrate --quick --out h100.json          (on the GPU; build with -DCAPSIM_CUDA=ON)\n"
      "  capsim calibrate fit h100.json --card h100-sxm\n"
      "  capsim calibrate fit --vidur ../shared/reference/vidur_profiles --card h100-sxm --out -\n"
      "  capsim calibrate compare steps.csv --model llama-3.1-8b --card h100-sxm\n"
      "  capsim calibrate show --card h100-sxm\n"
      "  capsim calibrate tables h100.json --card h100-sxm   (the profile as measured-kernel tables)\n"
      "  capsim calibrate runs conc8.json conc32.json rate4.json --model llama-3.1-8b --card h100-sxm \\\n"
      "      --out my-vllm.yaml                               (fit your deployment's engine overheads)\n"
      "see docs/calibration.md");

  auto fo = std::make_shared<FitOptions>();
  CLI::App* fit = cmd->add_subcommand("fit", "fit compute/bandwidth efficiency and kernel floor to a profile");
  fit->add_option("profile", fo->request.profile, "profile JSON written by capsim-calibrate");
  fit->add_option("--vidur", fo->request.vidur, "a folder of Vidur per-operator CSVs instead of a profile");
  fit->add_option("--sku", fo->request.sku, "Vidur GPU SKU to read (default: from the card name, e.g. h100)");
  fit->add_option("--card,-c", fo->request.card, "card to calibrate (capsim list cards)")->capture_default_str();
  fit->add_option("--out,-o", fo->out,
                  "where to write the fitted profile (default: calibration/profiles/<card>.yaml, which capsim "
                  "then applies; '-' = stdout)");
  fit->add_flag("--force", fo->request.force, "accept a profile measured on a GPU that does not match the card");
  fit->add_option("--json", fo->json, "also write the fit, with every GEMM's residual, as JSON ('-' = stdout only)");
  fit->callback([fo, &exit_code] {
    answers::CalibrateFitRequest& r = fo->request;
    r.command_line = "capsim calibrate fit";
    if (!r.profile.empty()) r.command_line += " " + r.profile;
    if (!r.vidur.empty()) r.command_line += " --vidur " + r.vidur;
    r.command_line += " --card " + r.card;
    if (r.force) r.command_line += " --force";
    exit_code = run_fit(*fo);
  });

  auto co = std::make_shared<CompareOptions>();
  CLI::App* cmp = cmd->add_subcommand(
      "compare", "measured model step times (scripts/model_step_bench.py CSV) vs the cost model, with errors");
  cmp->add_option("file", co->request.file, "CSV: model,card,batch,context,prefill_tokens,step_ms")->required();
  add_deployment_flags(*cmp, co->request.deployment, false);
  cmp->add_option("--json", co->json, "also write the comparison as JSON ('-' = stdout only)");
  cmp->callback([co, &exit_code, cmp] {
    co->request.model_given = cmp->get_option("--model")->count() > 0;
    co->request.card_given = cmp->get_option("--card")->count() > 0;
    exit_code = run_compare(*co);
  });

  auto card = std::make_shared<std::string>();
  CLI::App* show = cmd->add_subcommand("show", "the efficiencies each card uses and where they come from");
  show->add_option("--card,-c", *card, "one card (default: all)");
  show->callback([card, &exit_code] { exit_code = run_show(*card); });

  auto to = std::make_shared<TablesOptions>();
  CLI::App* tables = cmd->add_subcommand(
      "tables", "write a capsim-calibrate profile's GEMMs as measured-kernel tables (calibration/kernels/<card>/)");
  tables->add_option("profile", to->profile, "profile JSON written by capsim-calibrate")->required();
  tables->add_option("--card,-c", to->card, "the card it was measured on (capsim list cards)")->required();
  tables->add_option("--out,-o", to->out, "folder to write <op>-<dtype>.csv into (default: calibration/kernels/<card>)");
  tables->callback([to, &exit_code] { exit_code = run_tables(*to); });

  auto ro = std::make_shared<RunsOptions>();
  CLI::App* runs = cmd->add_subcommand(
      "runs", "fit one deployment's engine overheads to its own vllm bench serve / GuideLLM result files");
  runs->add_option("files", ro->request.files,
                   "result JSON files: vllm bench serve --save-result, or GuideLLM reports (every benchmark a run)")
      ->required();
  add_deployment_flags(*runs, ro->request.deployment, true);
  // The runs measured one deployment: naming it is not left to the defaults.
  runs->get_option("--model")->required();
  runs->get_option("--card")->required();
  runs->add_option("--out,-o", ro->out, "where to write the fitted engine profile (.yaml; '-' = stdout)");
  runs->add_option("--json", ro->json, "also write the fit as JSON ('-' = stdout only)");
  runs->add_option("--date", ro->request.date, "the date the sources name (default: today, UTC)");
  runs->add_option("--seed", ro->request.seed, "seed of every replay")->capture_default_str();
  runs->callback([ro, &exit_code] {
    answers::CalibrateRunsRequest& r = ro->request;
    r.command_line = "capsim calibrate runs";
    for (const std::string& f : r.files) r.command_line += " " + f;
    r.command_line += " --model " + r.deployment.model + " --card " + r.deployment.card + " --tp " +
                      std::to_string(r.deployment.tp) + " --engine " + r.deployment.engine;
    exit_code = run_runs(*ro);
  });
}

}  // namespace capsim::cli
