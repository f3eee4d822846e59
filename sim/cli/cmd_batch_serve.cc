// `capsim batch-serve`: a dynamic-batching server for models that do one forward pass per item
// (BERT-class encoders from the catalogue, or any model given by FLOPs and weight bytes) under
// Poisson load: latency percentiles, throughput, utilisation, mean batch, the SLO, and cost.
#include <cmath>
#include <iostream>

#include "sim/batchserve/batch_cost.h"
#include "sim/batchserve/batch_server.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/plan/costs.h"
#include "sim/plan/prices.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct BatchServeOptions {
  std::optional<std::string> model;
  std::optional<double> flops_per_item;
  std::optional<std::string> weights_bytes;
  std::string card;
  std::string precision = "fp32";
  std::optional<double> rate;
  std::optional<double> per_day;
  int max_batch = 8;
  std::string max_delay = "10ms";
  long long seq_len = 128;
  std::optional<long long> requests;
  std::optional<std::string> duration;
  std::vector<std::string> slos;
  std::string overhead = "1ms";
  std::uint64_t seed = 0;
  std::vector<std::string> prices;
  std::string prices_file;
  std::string json;
};

struct LatencySlo {
  std::string text;       // as given
  std::string statistic;  // mean, p50, p90, p95, p99
  double seconds = 0;
};

const char* const kSloForm =
    "accepted: STAT<=DURATION with STAT one of mean, p50, p90, p95, p99 and a duration with a "
    "unit, e.g. --slo 'p95<=3s'";

LatencySlo parse_latency_slo(const std::string& text) {
  const std::size_t op = text.find("<=");
  if (op == std::string::npos) {
    throw Error("--slo: '" + text + "' is not a latency SLO; " + kSloForm);
  }
  LatencySlo s;
  s.text = text;
  s.statistic = text.substr(0, op);
  if (s.statistic != "mean" && s.statistic != "p50" && s.statistic != "p90" &&
      s.statistic != "p95" && s.statistic != "p99") {
    throw Error("--slo: '" + s.statistic + "' in '" + text + "' is not a statistic; " + kSloForm);
  }
  s.seconds = units::parse_time(text.substr(op + 2), "--slo");
  return s;
}

double statistic(const Samples& x, const std::string& stat) {
  if (stat == "mean") return x.mean();
  return x.percentile(std::stod(stat.substr(1)));
}

std::string pct(double fraction) { return fmt("%.1f", 100.0 * fraction) + "%"; }

int run_batch_serve(const BatchServeOptions& o) {
  // ---- Validate and resolve, in the order a user reads the flags. ----
  if (o.model && o.flops_per_item) {
    throw Error(
        "--model and --flops-per-item are alternatives; give one (--model for an "
        "encoder-only catalogue model, --flops-per-item with --weights-bytes for any "
        "other model)");
  }
  if (!o.model && !o.flops_per_item) {
    throw Error(
        "batch-serve: no model; give --model NAME (an encoder-only catalogue model such "
        "as bert-base-uncased) or --flops-per-item F with --weights-bytes SIZE");
  }
  if (o.card.empty()) {
    throw Error(
        "--card: missing; accepted: a catalogue card (capsim list cards) or a card .yaml "
        "path");
  }
  const Card* card_ptr = nullptr;
  try {
    card_ptr = &cards().find(o.card);
  } catch (const Error& e) {
    throw Error(std::string("--card: ") + e.what());
  }
  const Card& card = *card_ptr;
  const Precision precision = parse_precision(o.precision, "--precision");
  if (precision != Precision::kFp32 && precision != Precision::kBf16 &&
      precision != Precision::kFp16 && precision != Precision::kInt8) {
    throw Error("--precision: '" + o.precision +
                "' is not served here; accepted: fp32, bf16, "
                "fp16, int8");
  }
  ItemWork work;
  std::string model_name;
  if (o.model) {
    if (o.weights_bytes) {
      throw Error(
          "--weights-bytes: applies with --flops-per-item only; a catalogue model's "
          "weights come from its config");
    }
    const ModelSpec m = models().find(*o.model);
    work = encoder_item_work(m, o.seq_len, precision);
    model_name = m.name + " (seq " + std::to_string(o.seq_len) + ")";
  } else {
    if (!(*o.flops_per_item > 0) || !std::isfinite(*o.flops_per_item)) {
      throw Error("--flops-per-item: " + fmt("%g", *o.flops_per_item) +
                  " is not a FLOP count; accepted: a number > 0, e.g. 2.5e12");
    }
    if (!o.weights_bytes) {
      throw Error(
          "--weights-bytes: missing; --flops-per-item needs the bytes of weights each "
          "batch reads, e.g. --weights-bytes 500MB");
    }
    const double bytes = units::parse_bytes(*o.weights_bytes, "--weights-bytes");
    work = generic_item_work(*o.flops_per_item, bytes);
    model_name = "generic model (" + units::format_bytes(bytes) + " of weights)";
  }
  if (o.rate && o.per_day) {
    throw Error("--rate and --per-day are alternatives; give one");
  }
  if (!o.rate && !o.per_day) {
    throw Error("batch-serve: no load; give --rate ITEMS_PER_SECOND or --per-day ITEMS");
  }
  const double rate = o.rate ? *o.rate : *o.per_day / 86400.0;
  if (o.rate && !(*o.rate > 0 && std::isfinite(*o.rate))) {
    throw Error("--rate: " + fmt("%g", *o.rate) +
                " is not an arrival rate; accepted: items per "
                "second > 0");
  }
  if (o.per_day && !(*o.per_day > 0 && std::isfinite(*o.per_day))) {
    throw Error("--per-day: " + fmt("%g", *o.per_day) +
                " is not a daily volume; accepted: items "
                "per day > 0");
  }
  if (o.max_batch < 1 || o.max_batch > 65536) {
    throw Error("--max-batch: " + std::to_string(o.max_batch) +
                " is not a batch size; accepted: "
                "a whole number from 1 to 65536");
  }
  const double max_delay = units::parse_time(o.max_delay, "--max-delay");
  const double overhead = units::parse_time(o.overhead, "--overhead");
  if (max_delay > 3600) throw Error("--max-delay: longer than 1h; accepted: 0 to 1h");
  if (overhead > 60) throw Error("--overhead: longer than 60s; accepted: 0 to 60s per batch");
  if (o.requests && o.duration) {
    throw Error("--requests and --duration are alternatives; give one");
  }
  BatchServeConfig config;
  config.cost = make_batch_cost(work, card, precision, overhead);
  config.rate = rate;
  config.max_batch = o.max_batch;
  config.max_delay_s = max_delay;
  config.seed = o.seed;
  config.requests = o.requests.value_or(10000);
  if (o.requests && (*o.requests < 1 || *o.requests > 100'000'000)) {
    throw Error("--requests: " + std::to_string(*o.requests) +
                " is not a request count; "
                "accepted: 1 to 100000000");
  }
  if (o.duration) {
    config.duration_s = units::parse_time(*o.duration, "--duration");
    if (*config.duration_s <= 0 || *config.duration_s > 1e9) {
      throw Error("--duration: '" + *o.duration +
                  "' is not a run length; accepted: > 0 and at "
                  "most ~30 years");
    }
    if (rate * *config.duration_s > 1e8) {
      throw Error("--duration: " + *o.duration + " at " + fmt("%g", rate) +
                  " items/s is more than 100000000 items; shorten it or use --requests");
    }
  }
  std::vector<LatencySlo> slos;
  for (const auto& s : o.slos) slos.push_back(parse_latency_slo(s));
  const PriceBook prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(),
      o.prices);

  // ---- Run. ----
  const BatchServeResult r = simulate_batch_serving(config);
  const BatchCost& c = config.cost;
  const double capacity = c.throughput(o.max_batch);
  const bool overloaded = rate >= capacity;
  const bool weights_fit = work.model_bytes <= card.visible_memory_bytes;

  nlohmann::json j = {
      {"model", model_name},
      {"card", card.name},
      {"precision", precision_name(precision)},
      {"flops_per_item", c.flops_per_item},
      {"weight_bytes_per_batch", c.weight_bytes},
      {"model_bytes", work.model_bytes},
      {"weights_fit_in_memory", weights_fit},
      {"rate_items_per_s", rate},
      {"max_batch", o.max_batch},
      {"max_delay_s", max_delay},
      {"overhead_s", overhead},
      {"batch_seconds_1", c.seconds(1)},
      {"batch_seconds_max", c.seconds(o.max_batch)},
      {"capacity_items_per_s", capacity},
      {"items", r.items},
      {"batches", r.batches},
      {"mean_batch", r.mean_batch()},
      {"throughput_items_per_s", r.throughput()},
      {"utilisation", r.utilisation()},
      {"makespan_s", r.makespan_s},
      {"seed", o.seed},
  };
  nlohmann::json lat, wait;
  for (const char* stat : {"mean", "p50", "p90", "p95", "p99"}) {
    lat[stat] = statistic(r.latency_s, stat);
    wait[stat] = statistic(r.wait_s, stat);
  }
  lat["max"] = r.latency_s.max();
  j["latency_s"] = lat;
  j["wait_s"] = wait;
  bool slos_met = true;
  nlohmann::json slo_json = nlohmann::json::array();
  for (const auto& s : slos) {
    const double v = statistic(r.latency_s, s.statistic);
    const bool met = v <= s.seconds;
    slos_met = slos_met && met;
    slo_json.push_back({{"slo", s.text}, {"value_s", v}, {"met", met}});
  }
  j["slos"] = slo_json;

  // Cost: rent for the wall-clock time, energy at TDP for the busy time only.
  const CardPrice* price = prices.find(card.name);
  const double busy_per_item_s = r.items > 0 ? r.busy_s / r.items : 0;
  const double kwh_per_1000 = card.tdp_watts * busy_per_item_s * 1000.0 / 3.6e6;
  nlohmann::json cost = {
      {"tdp_watts", card.tdp_watts},
      {"kwh_per_1000_items", kwh_per_1000},
      {"electricity_usd_per_kwh", prices.electricity_usd_per_kwh()},
      {"electricity_usd_per_1000_items", kwh_per_1000 * prices.electricity_usd_per_kwh()}};
  if (price) {
    cost["usd_per_hour"] = price->rent.value;
    cost["usd_per_1000_items_at_this_load"] =
        usd_per_million(price->rent.value, r.throughput()) / 1000.0;
    cost["usd_per_1000_items_at_capacity"] = usd_per_million(price->rent.value, capacity) / 1000.0;
  } else {
    cost["usd_per_hour"] = nullptr;
  }
  j["cost"] = cost;

  if (o.json != "-") {
    std::cout << "capsim batch-serve: " << model_name << " on " << card.name << ", "
              << precision_name(precision) << "; Poisson " << fmt("%.4g", rate) << " items/s ("
              << fmt("%.0f", rate * 86400) << "/day); max batch " << o.max_batch << ", max delay "
              << units::format_time(max_delay) << "\n\n";
    std::cout << "  item: " << fmt("%.2f", c.flops_per_item / 1e9) << " GFLOP (" << work.description
              << "); weights read per batch " << units::format_bytes(c.weight_bytes) << "; model "
              << units::format_bytes(work.model_bytes) << "\n";
    std::cout << "  card: " << precision_name(precision) << " "
              << fmt("%.2f", c.compute_rate / 1e12)
              << (precision == Precision::kInt8 ? " TOPS" : " TFLOPS") << " achieved (peak x "
              << fmt("%.2f", card.compute_efficiency) << "), " << fmt("%.0f", c.memory_rate / 1e9)
              << " GB/s (x " << fmt("%.2f", card.bandwidth_efficiency) << "), overhead "
              << units::format_time(overhead) << " per batch\n";
    std::cout << "  batch time: 1 item " << units::format_time(c.seconds(1)) << " (compute "
              << units::format_time(c.compute_seconds(1)) << ", memory "
              << units::format_time(c.memory_seconds()) << "); batch of " << o.max_batch << ": "
              << units::format_time(c.seconds(o.max_batch)) << " -> capacity "
              << fmt("%.4g", capacity) << " items/s\n";
    if (!weights_fit) {
      std::cout << "  warning: the model (" << units::format_bytes(work.model_bytes)
                << ") does not fit in " << card.name << "'s "
                << units::format_bytes(card.visible_memory_bytes) << "\n";
    }
    if (overloaded) {
      std::cout << "  warning: offered load " << fmt("%.4g", rate) << " items/s >= capacity "
                << fmt("%.4g", capacity)
                << " items/s: the queue grows for as long as the run "
                   "lasts, so the latencies below depend on its length\n";
    }
    std::cout << "\n";
    TextTable t({"per item", "mean", "p50", "p90", "p95", "p99", "max"});
    t.row({"latency", units::format_time(r.latency_s.mean()),
           units::format_time(r.latency_s.percentile(50)),
           units::format_time(r.latency_s.percentile(90)),
           units::format_time(r.latency_s.percentile(95)),
           units::format_time(r.latency_s.percentile(99)), units::format_time(r.latency_s.max())});
    t.row({"queue wait", units::format_time(r.wait_s.mean()),
           units::format_time(r.wait_s.percentile(50)), units::format_time(r.wait_s.percentile(90)),
           units::format_time(r.wait_s.percentile(95)), units::format_time(r.wait_s.percentile(99)),
           units::format_time(r.wait_s.max())});
    t.print(std::cout);
    std::cout << "\n  " << r.items << " items in " << r.batches << " batches (mean batch "
              << fmt("%.2f", r.mean_batch()) << ") over " << units::format_time(r.makespan_s)
              << "; throughput " << fmt("%.4g", r.throughput()) << " items/s; utilisation "
              << pct(r.utilisation()) << "\n";
    for (const auto& s : slo_json) {
      std::cout << "  SLO " << s["slo"].get<std::string>() << ": "
                << (s["met"].get<bool>() ? "met" : "MISSED") << " ("
                << units::format_time(s["value_s"].get<double>()) << ")\n";
    }
    if (price) {
      std::cout << "  cost: $" << fmt("%.4g", price->rent.value) << "/h (" << card.name
                << (price->rent.date.empty() ? ", --price" : ", " + price->rent.date) << ") -> $"
                << fmt("%.4g", cost["usd_per_1000_items_at_this_load"].get<double>())
                << " per 1000 items at this load, $"
                << fmt("%.4g", cost["usd_per_1000_items_at_capacity"].get<double>())
                << " at capacity\n";
    } else {
      std::cout << "  cost: no price for " << card.name << " in " << prices.path()
                << "; pass --price " << card.name << "=USD_PER_HOUR\n";
    }
    std::cout << "  energy: " << fmt("%.3g", kwh_per_1000 * 1000.0) << " Wh per 1000 items ("
              << fmt("%.0f", card.tdp_watts) << " W TDP while busy), $"
              << fmt("%.3g", kwh_per_1000 * prices.electricity_usd_per_kwh())
              << " of electricity at $" << fmt("%.4g", prices.electricity_usd_per_kwh())
              << "/kWh\n";
  }
  if (!o.json.empty()) write_json(o.json, j);
  return slos_met ? 0 : 1;
}

}  // namespace

void add_batch_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BatchServeOptions>();
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
  cmd->add_option("--price", o->prices,
                  "override a rent: CARD=USD_PER_HOUR (per GPU), e.g. t4=0.35; repeatable");
  cmd->add_option("--prices", o->prices_file, "price file (default calibration/prices.yaml)");
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([o, &exit_code] { exit_code = run_batch_serve(*o); });
}

}  // namespace capsim::cli
