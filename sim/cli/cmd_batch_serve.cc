// `capsim batch-serve`: a dynamic-batching server for models that do one forward pass per item
// (BERT-class encoders from the catalogue, or any model given by FLOPs and weight bytes) under
// Poisson load: latency percentiles, throughput, utilisation, mean batch, the SLO, and cost.
#include <iostream>

#include "sim/answers/batch_serve_answer.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/report/json_output.h"

namespace capsim::cli {
namespace {

struct BatchServeOptions {
  answers::BatchServeRequest request;
  std::string json;
};

int run_batch_serve(const BatchServeOptions& o) {
  const answers::BatchServeAnswer a = answers::answer_batch_serve(answers::resolve_batch_serve(o.request));
  if (o.json != "-") answers::print_batch_serve(std::cout, a);
  if (!o.json.empty()) write_json(o.json, answers::batch_serve_json(a));
  return a.slos_met ? 0 : 1;
}

}  // namespace

void add_batch_serve_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<BatchServeOptions>();
  answers::BatchServeRequest* o = &opts->request;
  CLI::App* cmd = app.add_subcommand("batch-serve",
                                     "dynamic-batching server for one-pass models (BERT, image "
                                     "models): latency, throughput, cost");
  cmd->footer(
      "examples:\n"
      "  capsim batch-serve --model bert-base-uncased --card cpu-server-ddr5 --precision int8 "
      "--rate 20\n"
      "  capsim batch-serve --flops-per-item 3e11 --weights-bytes 500MB --card t4 --per-day 10000 "
      "\\\n"
      "      --slo 'p95<=3s'\n"
      "exit status: 0 ok (every SLO met), 1 an SLO missed, 2 bad input");
  cmd->add_option(
      "--model,-m", o->model,
      "encoder-only catalogue model (bert-base-uncased, bert-large-uncased) or config.json");
  cmd->add_option("--flops-per-item", o->flops_per_item,
                  "instead of --model: operations per item, e.g. 2.5e12");
  cmd->add_option("--weights-bytes", o->weights_bytes,
                  "with --flops-per-item: bytes of weights each batch reads, e.g. 500MB");
  cmd->add_option("--card,-c", o->card, "card type (capsim list cards) or a card .yaml path");
  cmd->add_option("--precision", o->precision, "math precision: fp32, bf16, fp16, int8")
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "Poisson arrivals, items per second");
  cmd->add_option("--per-day", o->per_day,
                  "instead of --rate: items per day (Poisson at N / 86400 per second)");
  cmd->add_option("--max-batch", o->max_batch, "largest batch the server forms")
      ->capture_default_str();
  cmd->add_option("--max-delay", o->max_delay,
                  "longest the oldest queued item waits for a fuller batch")
      ->capture_default_str();
  cmd->add_option("--seq-len", o->seq_len, "tokens per item (--model only)")->capture_default_str();
  cmd->add_option("--requests", o->requests, "items to simulate (default 10000)");
  cmd->add_option("--duration", o->duration, "instead of --requests: simulated time, e.g. 1h");
  cmd->add_option("--slo", o->slos, "latency objective, e.g. 'p95<=3s'; repeatable");
  cmd->add_option("--overhead", o->overhead,
                  "fixed time per batch (framework dispatch, host copies); ASSUMED default")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--price", o->price_overrides,
                  "override a rent: CARD=USD_PER_HOUR (per GPU), e.g. t4=0.35; repeatable");
  cmd->add_option("--prices", o->prices_file, "price file (default calibration/prices.yaml)");
  cmd->add_option("--json", opts->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([opts, &exit_code] { exit_code = run_batch_serve(*opts); });
}

}  // namespace capsim::cli
