// The jobs of the HTTP API's commands without a scenario (batch-serve, finetune, calibrate;
// declared in api_internal.h): the body is the command's flags as fields, checked and turned into
// the answer's request, and the answer's messages are reworded from flags to the body's fields.
#include "sim/server/api_internal.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>
#include <yaml-cpp/yaml.h>

#include "sim/check/assumptions.h"
#include "sim/cluster/simulation.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/units.h"
#include "sim/http/request_guard.h"
#include "sim/llm/speculative.h"
#include "sim/plan/search.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"
#include "sim/answers/batch_serve_answer.h"
#include "sim/answers/calibrate_answer.h"
#include "sim/answers/capacity_answer.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/held_models.h"
#include "sim/llm/model_config_json.h"
#include "sim/answers/compare_answer.h"
#include "sim/answers/diff_answer.h"
#include "sim/answers/finetune_answer.h"
#include "sim/answers/fit_answer.h"
#include "sim/answers/kernels_answer.h"
#include "sim/answers/listings.h"
#include "sim/answers/plan_answer.h"
#include "sim/scenario/scenario.h"
#include "sim/answers/simulate_report.h"

namespace capsim::server::detail {
namespace {

// The commands without a scenario (batch-serve, finetune, calibrate): the body is the command's
// flags as fields ("max_batch" for --max-batch), nothing else. `files` are flags that name a file
// or folder: refused, whatever they hold, with `why`.
void command_fields(const nlohmann::json& body, const std::string& command, const std::vector<std::string>& keys,
                    const std::vector<std::string>& files, const std::string& why) {
  for (const auto& [k, v] : body.items()) {
    if (std::find(files.begin(), files.end(), k) != files.end()) throw HttpError(400, k + ": " + why);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      throw HttpError(400, k + ": not a field of a " + command + " body; accepted: " + joined(keys));
    }
  }
}

std::string text_field(const nlohmann::json& v, const std::string& field, const std::string& example) {
  if (!v.is_string()) throw HttpError(400, field + ": expected text such as " + example + ", got " + json_type_word(v));
  return v.get<std::string>();
}

bool bool_field(const nlohmann::json& v, const std::string& field) {
  if (!v.is_boolean()) throw HttpError(400, field + ": expected true or false, got " + json_type_word(v));
  return v.get<bool>();
}

// "a,b" or ["a", "b"] -> {"a", "b"}.
std::vector<std::string> list_field(const nlohmann::json& v, const std::string& field) {
  std::vector<std::string> out;
  std::stringstream in(list_text(v, field));
  for (std::string x; std::getline(in, x, ',');) out.push_back(x);
  return out;
}

// Whole numbers the answer range-checks itself (its message, in the body's words): only what
// fits the C++ type is checked here.
template <typename T>
T whole_field(const nlohmann::json& v, const std::string& field) {
  return number<T>(v, field, static_cast<double>(std::numeric_limits<T>::min()),
                   std::min(static_cast<double>(std::numeric_limits<T>::max()), 9007199254740992.0));
}

// The answers name the command's flags (--max-batch); a body names fields (max_batch). Each of
// `fields` as its flag, where a flag ends, is reworded.
std::string as_fields(std::string message, const std::vector<std::string>& fields) {
  for (const auto& f : fields) {
    std::string flag = "--" + f;
    std::replace(flag.begin(), flag.end(), '_', '-');
    for (std::size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at)) {
      const std::size_t end = at + flag.size();
      const bool whole = end == message.size() || !(std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-');
      if (!whole) {
        at = end;
        continue;
      }
      message.replace(at, flag.size(), f);
      at += f.size();
    }
  }
  return message;
}

}  // namespace

const std::vector<std::string> kBatchServeFields = {"model",     "flops_per_item", "weights_bytes", "card",     "precision",
                                                    "rate",      "per_day",        "max_batch",     "max_delay", "seq_len",
                                                    "requests",  "duration",       "slo",           "overhead", "seed",
                                                    "price"};

Job prepare_batch_serve(const nlohmann::json& body, const Limits& limits) {
  const std::vector<std::string>& fields = kBatchServeFields;
  command_fields(body, "batch-serve", fields, {"prices", "json"},
                 "the server reads and writes no files; give rents as price: {\"t4\": 0.35}");
  answers::BatchServeRequest r;
  if (body.contains("model")) {
    r.model = text_field(body["model"], "model", "\"bert-base-uncased\"");
    catalogue_model(*r.model, "model");
  }
  if (body.contains("flops_per_item")) r.flops_per_item = number<double>(body["flops_per_item"], "flops_per_item", -1e300, 1e300);
  if (body.contains("weights_bytes")) r.weights_bytes = text_field(body["weights_bytes"], "weights_bytes", "\"500MB\"");
  if (body.contains("card")) {
    r.card = text_field(body["card"], "card", "\"t4\"");
    catalogue_card(r.card, "card");
  }
  if (body.contains("precision")) r.precision = text_field(body["precision"], "precision", "\"int8\"");
  if (body.contains("rate")) r.rate = number<double>(body["rate"], "rate", -1e300, 1e300);
  if (body.contains("per_day")) r.per_day = number<double>(body["per_day"], "per_day", -1e300, 1e300);
  if (body.contains("max_batch")) r.max_batch = whole_field<int>(body["max_batch"], "max_batch");
  if (body.contains("max_delay")) r.max_delay = text_field(body["max_delay"], "max_delay", "\"10ms\"");
  if (body.contains("seq_len")) r.seq_len = whole_field<long long>(body["seq_len"], "seq_len");
  if (body.contains("requests")) r.requests = whole_field<long long>(body["requests"], "requests");
  if (body.contains("duration")) r.duration = text_field(body["duration"], "duration", "\"1h\"");
  if (body.contains("slo")) {
    const nlohmann::json& s = body["slo"];
    if (s.is_string()) {
      r.slos.push_back(s.get<std::string>());
    } else {
      if (!s.is_array()) throw HttpError(400, "slo: expected a latency objective such as \"p95<=3s\", or a list of them");
      for (const auto& x : s) r.slos.push_back(text_field(x, "slo", "\"p95<=3s\""));
    }
  }
  if (body.contains("overhead")) r.overhead = text_field(body["overhead"], "overhead", "\"1ms\"");
  if (body.contains("seed")) r.seed = number<std::uint64_t>(body["seed"], "seed", 0, 9007199254740992.0);
  if (body.contains("price")) r.price_overrides = price_overrides(body["price"], "price");
  check_duration(r.duration, "duration", limits);
  answers::BatchServeSetup setup;
  try {
    setup = answers::resolve_batch_serve(r);
  } catch (const Error& e) {
    throw HttpError(400, as_fields(e.what(), fields));
  }
  const BatchServeConfig& c = setup.config;
  const double items = c.duration_s ? c.rate * *c.duration_s : static_cast<double>(c.requests);
  if (items > static_cast<double>(limits.max_requests)) {
    throw HttpError(422, std::string(c.duration_s ? "duration" : "requests") + ": " + fmt("%.0f", items) +
                             " items is more than the server runs (at most " + std::to_string(limits.max_requests) +
                             " per run; capsim serve --max-requests)");
  }
  return [setup](const CancelFlag&, const ProgressFn&) {
    return guarded([&] { return json_text(answers::batch_serve_json(answers::answer_batch_serve(setup))); });
  };
}

const std::vector<std::string> kFinetuneFields = {"model", "method", "optimizer", "batch", "seq_len", "lora_rank",
                                                  "gradient_checkpointing", "flash_attention", "cards", "gpus", "price",
                                                  "tokens"};

Job prepare_finetune(const nlohmann::json& body, const Limits&) {
  const std::vector<std::string>& fields = kFinetuneFields;
  command_fields(body, "finetune", fields, {"prices", "json"},
                 "the server reads and writes no files; give rents as price: {\"h100-sxm\": 2.49}");
  answers::FinetuneRequest r;
  if (body.contains("model")) r.model = text_field(body["model"], "model", "\"llama-2-13b\"");
  catalogue_model(r.model, "model");
  if (body.contains("method")) r.method = text_field(body["method"], "method", "\"qlora\"");
  if (body.contains("optimizer")) r.optimizer = text_field(body["optimizer"], "optimizer", "\"adamw\"");
  if (body.contains("batch")) r.batch = whole_field<long long>(body["batch"], "batch");
  if (body.contains("seq_len")) r.seq_len = whole_field<long long>(body["seq_len"], "seq_len");
  if (body.contains("lora_rank")) r.lora_rank = whole_field<int>(body["lora_rank"], "lora_rank");
  if (body.contains("gradient_checkpointing")) {
    r.gradient_checkpointing = bool_field(body["gradient_checkpointing"], "gradient_checkpointing");
  }
  if (body.contains("flash_attention")) r.flash_attention = bool_field(body["flash_attention"], "flash_attention");
  if (body.contains("cards")) {
    r.cards = list_field(body["cards"], "cards");
    for (const auto& c : r.cards) catalogue_card(c, "cards");
  }
  if (body.contains("gpus")) r.gpus = whole_field<int>(body["gpus"], "gpus");
  if (body.contains("price")) r.price_overrides = price_overrides(body["price"], "price");
  if (body.contains("tokens")) r.tokens = number<double>(body["tokens"], "tokens", -1e300, 1e300);
  // Arithmetic only (microseconds): answered here, so every refusal comes before the queue.
  std::string answer;
  try {
    answer = json_text(answers::finetune_json(answers::answer_finetune(r)));
  } catch (const Error& e) {
    throw HttpError(400, as_fields(e.what(), fields));
  }
  return [answer](const CancelFlag&, const ProgressFn&) { return answer; };
}

const std::vector<std::string> kCalibrateFields = {"card", "profile", "force"};

// The fit of `capsim calibrate fit` to a profile the body carries (capsim-calibrate's JSON
// object). No path: the server reads no profile, Vidur folder or card file a client names, and
// writes no fitted profile (the answer's "out" is null).
Job prepare_calibrate(const nlohmann::json& body, const Limits&) {
  const std::vector<std::string>& fields = kCalibrateFields;
  command_fields(body, "calibrate", fields, {"vidur", "sku", "out", "json", "path"},
                 "the server reads and writes no files; send the profile itself as profile: {...} "
                 "(capsim-calibrate's JSON)");
  answers::CalibrateFitRequest r;
  if (body.contains("card")) r.card = text_field(body["card"], "card", "\"h100-sxm\"");
  catalogue_card(r.card, "card");
  if (body.contains("force")) r.force = bool_field(body["force"], "force");
  if (!body.contains("profile")) {
    throw HttpError(400, "profile: missing; send capsim-calibrate's JSON object (docs/calibration.md#profile)");
  }
  const nlohmann::json& p = body["profile"];
  if (p.is_string()) {
    throw HttpError(400, "profile: the server reads no files; send the profile itself, capsim-calibrate's JSON "
                         "object, not a path");
  }
  if (!p.is_object()) {
    throw HttpError(400, std::string("profile: expected capsim-calibrate's JSON object, got ") + json_type_word(p));
  }
  try {
    r.measured = calibration::parse_profile(p, "profile");
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  r.measured->path = "profile";
  r.command_line = "POST /v1/calibrate";
  return [r](const CancelFlag&, const ProgressFn&) {
    try {
      return json_text(answers::calibrate_fit_json(answers::answer_calibrate_fit(r), std::nullopt));
    } catch (const Error& e) {
      throw HttpError(400, as_fields(e.what(), kCalibrateFields));
    }
  };
}

const std::vector<std::string> kKernelsFields = {"card", "engine", "dtype", "shapes"};

// A GEMM shape's dimension from a shapes list: a positive, finite number.
std::string dimension(const nlohmann::json& shape, const char* name, const std::string& field) {
  const std::string where = field + "." + name;
  if (!shape.contains(name)) throw HttpError(400, where + ": missing; each shape is {\"n\": ..., \"k\": ..., \"m\": ...}");
  const nlohmann::json& v = shape[name];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0)) {
    throw HttpError(400, where + ": expected a positive number (a GEMM dimension), got " + v.dump());
  }
  return fmt("%.17g", v.get<double>());
}

// `capsim kernels`: the card's measured tables, or the times of the shapes the body carries (a
// list of {n, k, m} or the CSV text --shapes reads). No table file: the card's own tables only.
Job prepare_kernels(const nlohmann::json& body, const Limits&) {
  const std::vector<std::string>& fields = kKernelsFields;
  command_fields(body, "kernels", fields, {"table", "json"},
                 "the server reads no table files; it times shapes against the card's own measured tables");
  answers::KernelsRequest r;
  r.table_allowed = false;
  if (body.contains("card")) r.card = text_field(body["card"], "card", "\"h100-sxm\"");
  catalogue_card(r.card, "card");
  if (body.contains("engine")) r.engine = text_field(body["engine"], "engine", "\"vllm\"");
  catalogue_engine(r.engine, "engine");
  if (body.contains("dtype")) r.dtype = text_field(body["dtype"], "dtype", "\"fp8\"");
  if (body.contains("shapes")) {
    const nlohmann::json& v = body["shapes"];
    if (v.is_string()) {
      r.shapes_csv = v.get<std::string>();
    } else if (v.is_array()) {
      std::string csv = "n,k,m\n";
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string field = "shapes[" + std::to_string(i) + "]";
        if (!v[i].is_object()) throw HttpError(400, field + ": expected {\"n\": ..., \"k\": ..., \"m\": ...}");
        csv += dimension(v[i], "n", field) + "," + dimension(v[i], "k", field) + "," + dimension(v[i], "m", field) + "\n";
      }
      r.shapes_csv = std::move(csv);
    } else {
      throw HttpError(400, "shapes: expected a list of {\"n\", \"k\", \"m\"} or CSV text with columns n, k, m; got " +
                               std::string(json_type_word(v)));
    }
    r.shapes_where = "shapes";
  }
  return [r](const CancelFlag&, const ProgressFn&) {
    try {
      return json_text(answers::answer_kernels(r).json);
    } catch (const Error& e) {
      throw HttpError(400, as_fields(e.what(), kKernelsFields));
    }
  };
}

const std::vector<std::string> kDiffFields = {"a", "b", "min_change"};

// `capsim diff`: the two results are the body's objects "a" and "b" (each the JSON a simulate,
// plan, capacity or compare answer gave), never paths; messages and the answer name them a and b.
Job prepare_diff(const nlohmann::json& body, const Limits&) {
  command_fields(body, "diff", kDiffFields, {"json"}, "the server writes no files");
  std::vector<diff::Input> results;
  for (const char* side : {"a", "b"}) {
    if (!body.contains(side)) {
      throw HttpError(400, std::string(side) + ": missing; send the JSON object of a simulate, plan, capacity or "
                                               "compare answer");
    }
    const nlohmann::json& v = body[side];
    if (v.is_string()) {
      throw HttpError(400, std::string(side) + ": the server reads no files; send the result's JSON object itself, "
                                               "not a path");
    }
    try {
      results.push_back(diff::recognise_result(v, side));
    } catch (const Error& e) {
      throw HttpError(400, e.what());
    }
  }
  double min_change = 0;
  if (body.contains("min_change")) min_change = number<double>(body["min_change"], "min_change", 0, 1e300);
  return [results, min_change](const CancelFlag&, const ProgressFn&) {
    return guarded([&] { return json_text(answers::answer_diff(results[0], results[1], min_change).json); });
  };
}

}  // namespace capsim::server::detail
