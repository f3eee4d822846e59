#include "sim/answers/batch_serve_answer.h"

#include <cmath>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/plan/costs.h"
#include "sim/report/table.h"
#include "sim/scenario/catalogues.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

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

// Energy at TDP for the busy time only.
double kwh_per_1000_items(const BatchServeAnswer& a) {
  const double busy_per_item_s = a.result.items > 0 ? a.result.busy_s / a.result.items : 0;
  return a.setup.card.tdp_watts * busy_per_item_s * 1000.0 / 3.6e6;
}

}  // namespace

BatchServeSetup resolve_batch_serve(const BatchServeRequest& o) {
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
  BatchServeSetup setup;
  try {
    setup.card = cards().find(o.card);
  } catch (const Error& e) {
    throw Error(std::string("--card: ") + e.what());
  }
  const Card& card = setup.card;
  const Precision precision = parse_precision(o.precision, "--precision");
  if (precision != Precision::kFp32 && precision != Precision::kBf16 &&
      precision != Precision::kFp16 && precision != Precision::kInt8) {
    throw Error("--precision: '" + o.precision +
                "' is not served here; accepted: fp32, bf16, "
                "fp16, int8");
  }
  setup.precision = precision;
  if (o.model) {
    if (o.weights_bytes) {
      throw Error(
          "--weights-bytes: applies with --flops-per-item only; a catalogue model's "
          "weights come from its config");
    }
    const ModelSpec m = models().find(*o.model);
    setup.work = encoder_item_work(m, o.seq_len, precision);
    setup.model_name = m.name + " (seq " + std::to_string(o.seq_len) + ")";
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
    setup.work = generic_item_work(*o.flops_per_item, bytes);
    setup.model_name = "generic model (" + units::format_bytes(bytes) + " of weights)";
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
  BatchServeConfig& config = setup.config;
  config.cost = make_batch_cost(setup.work, card, precision, overhead);
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
  for (const auto& s : o.slos) setup.slos.push_back(parse_latency_slo(s));
  setup.prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(),
      o.price_overrides);
  setup.overhead_s = overhead;
  return setup;
}

BatchServeAnswer answer_batch_serve(const BatchServeSetup& setup) {
  BatchServeAnswer a;
  a.setup = setup;
  a.result = simulate_batch_serving(setup.config);
  a.capacity = setup.config.cost.throughput(setup.config.max_batch);
  a.weights_fit = setup.work.model_bytes <= setup.card.visible_memory_bytes;
  // In the order the JSON was first written: each statistic of latency, then of wait.
  a.latency.mean = a.result.latency_s.mean();
  a.wait.mean = a.result.wait_s.mean();
  LatencyStatistics* both[] = {&a.latency, &a.wait};
  const Samples* samples[] = {&a.result.latency_s, &a.result.wait_s};
  for (const double p : {50.0, 90.0, 95.0, 99.0}) {
    for (int i = 0; i < 2; ++i) {
      const double v = samples[i]->percentile(p);
      (p == 50 ? both[i]->p50 : p == 90 ? both[i]->p90 : p == 95 ? both[i]->p95 : both[i]->p99) = v;
    }
  }
  a.latency.max = a.result.latency_s.max();
  a.wait.max = a.result.wait_s.max();
  for (const auto& s : setup.slos) {
    const double v = statistic(a.result.latency_s, s.statistic);
    const bool met = v <= s.seconds;
    a.slos_met = a.slos_met && met;
    a.slos.push_back({s.text, v, met});
  }
  return a;
}

nlohmann::json batch_serve_json(const BatchServeAnswer& a) {
  const BatchCost& c = a.setup.config.cost;
  const BatchServeResult& r = a.result;
  const int max_batch = a.setup.config.max_batch;
  nlohmann::json j = {
      {"model", a.setup.model_name},
      {"card", a.setup.card.name},
      {"precision", precision_name(a.setup.precision)},
      {"flops_per_item", c.flops_per_item},
      {"weight_bytes_per_batch", c.weight_bytes},
      {"model_bytes", a.setup.work.model_bytes},
      {"weights_fit_in_memory", a.weights_fit},
      {"rate_items_per_s", a.setup.config.rate},
      {"max_batch", max_batch},
      {"max_delay_s", a.setup.config.max_delay_s},
      {"overhead_s", a.setup.overhead_s},
      {"batch_seconds_1", c.seconds(1)},
      {"batch_seconds_max", c.seconds(max_batch)},
      {"capacity_items_per_s", a.capacity},
      {"items", r.items},
      {"batches", r.batches},
      {"mean_batch", r.mean_batch()},
      {"throughput_items_per_s", r.throughput()},
      {"utilisation", r.utilisation()},
      {"makespan_s", r.makespan_s},
      {"seed", a.setup.config.seed},
  };
  const auto stats = [](const LatencyStatistics& x) {
    return nlohmann::json{{"mean", x.mean}, {"p50", x.p50}, {"p90", x.p90}, {"p95", x.p95}, {"p99", x.p99}};
  };
  j["latency_s"] = stats(a.latency);
  j["latency_s"]["max"] = a.latency.max;
  j["wait_s"] = stats(a.wait);
  nlohmann::json slo_json = nlohmann::json::array();
  for (const auto& s : a.slos) slo_json.push_back({{"slo", s.slo}, {"value_s", s.value_s}, {"met", s.met}});
  j["slos"] = slo_json;

  // Cost: rent for the wall-clock time, energy at TDP for the busy time only.
  const CardPrice* price = a.setup.prices.find(a.setup.card.name);
  const double kwh_per_1000 = kwh_per_1000_items(a);
  nlohmann::json cost = {
      {"tdp_watts", a.setup.card.tdp_watts},
      {"kwh_per_1000_items", kwh_per_1000},
      {"electricity_usd_per_kwh", a.setup.prices.electricity_usd_per_kwh()},
      {"electricity_usd_per_1000_items", kwh_per_1000 * a.setup.prices.electricity_usd_per_kwh()}};
  if (price) {
    cost["usd_per_hour"] = price->rent.value;
    cost["usd_per_1000_items_at_this_load"] =
        usd_per_million(price->rent.value, r.throughput()) / 1000.0;
    cost["usd_per_1000_items_at_capacity"] = usd_per_million(price->rent.value, a.capacity) / 1000.0;
  } else {
    cost["usd_per_hour"] = nullptr;
  }
  j["cost"] = cost;
  return j;
}

void print_batch_serve(std::ostream& os, const BatchServeAnswer& a) {
  const BatchCost& c = a.setup.config.cost;
  const BatchServeResult& r = a.result;
  const Card& card = a.setup.card;
  const Precision precision = a.setup.precision;
  const double rate = a.setup.config.rate;
  const int max_batch = a.setup.config.max_batch;
  os << "capsim batch-serve: " << a.setup.model_name << " on " << card.name << ", "
     << precision_name(precision) << "; Poisson " << fmt("%.4g", rate) << " items/s ("
     << fmt("%.0f", rate * 86400) << "/day); max batch " << max_batch << ", max delay "
     << units::format_time(a.setup.config.max_delay_s) << "\n\n";
  os << "  item: " << fmt("%.2f", c.flops_per_item / 1e9) << " GFLOP (" << a.setup.work.description
     << "); weights read per batch " << units::format_bytes(c.weight_bytes) << "; model "
     << units::format_bytes(a.setup.work.model_bytes) << "\n";
  os << "  card: " << precision_name(precision) << " " << fmt("%.2f", c.compute_rate / 1e12)
     << (precision == Precision::kInt8 ? " TOPS" : " TFLOPS") << " achieved (peak x "
     << fmt("%.2f", card.compute_efficiency) << "), " << fmt("%.0f", c.memory_rate / 1e9)
     << " GB/s (x " << fmt("%.2f", card.bandwidth_efficiency) << "), overhead "
     << units::format_time(a.setup.overhead_s) << " per batch\n";
  os << "  batch time: 1 item " << units::format_time(c.seconds(1)) << " (compute "
     << units::format_time(c.compute_seconds(1)) << ", memory "
     << units::format_time(c.memory_seconds()) << "); batch of " << max_batch << ": "
     << units::format_time(c.seconds(max_batch)) << " -> capacity " << fmt("%.4g", a.capacity)
     << " items/s\n";
  if (!a.weights_fit) {
    os << "  warning: the model (" << units::format_bytes(a.setup.work.model_bytes)
       << ") does not fit in " << card.name << "'s "
       << units::format_bytes(card.visible_memory_bytes) << "\n";
  }
  if (rate >= a.capacity) {
    os << "  warning: offered load " << fmt("%.4g", rate) << " items/s >= capacity "
       << fmt("%.4g", a.capacity)
       << " items/s: the queue grows for as long as the run "
          "lasts, so the latencies below depend on its length\n";
  }
  os << "\n";
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
  t.print(os);
  os << "\n  " << r.items << " items in " << r.batches << " batches (mean batch "
     << fmt("%.2f", r.mean_batch()) << ") over " << units::format_time(r.makespan_s)
     << "; throughput " << fmt("%.4g", r.throughput()) << " items/s; utilisation "
     << pct(r.utilisation()) << "\n";
  for (const auto& s : a.slos) {
    os << "  SLO " << s.slo << ": " << (s.met ? "met" : "MISSED") << " ("
       << units::format_time(s.value_s) << ")\n";
  }
  const CardPrice* price = a.setup.prices.find(card.name);
  const double kwh_per_1000 = kwh_per_1000_items(a);
  if (price) {
    os << "  cost: $" << fmt("%.4g", price->rent.value) << "/h (" << card.name
       << (price->rent.date.empty() ? ", --price" : ", " + price->rent.date) << ") -> $"
       << fmt("%.4g", usd_per_million(price->rent.value, r.throughput()) / 1000.0)
       << " per 1000 items at this load, $"
       << fmt("%.4g", usd_per_million(price->rent.value, a.capacity) / 1000.0)
       << " at capacity\n";
  } else {
    os << "  cost: no price for " << card.name << " in " << a.setup.prices.path()
       << "; pass --price " << card.name << "=USD_PER_HOUR\n";
  }
  os << "  energy: " << fmt("%.3g", kwh_per_1000 * 1000.0) << " Wh per 1000 items ("
     << fmt("%.0f", card.tdp_watts) << " W TDP while busy), $"
     << fmt("%.3g", kwh_per_1000 * a.setup.prices.electricity_usd_per_kwh())
     << " of electricity at $" << fmt("%.4g", a.setup.prices.electricity_usd_per_kwh()) << "/kWh\n";
}

}  // namespace capsim::answers
