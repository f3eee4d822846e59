#include "sim/plan/training_speed.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/stats.h"
#include "sim/core/yaml_fields.h"
#include "sim/hardware/kernel_table_text.h"
#include "sim/llm/parallelism.h"

namespace capsim {
namespace {

const std::vector<std::string> kColumns = {"card", "model", "params", "seq_len", "gpus", "mfu_percent",
                                           "hfu_percent", "activation_checkpointing", "tokens_per_s_per_gpu"};

double in_range(const std::string& text, const std::string& where, double lo, double hi) {
  const double v = parse_number(text, where);
  if (!std::isfinite(v) || v < lo || v > hi) {
    std::ostringstream r;
    r << where << ": " << text << " is not in " << lo << ".." << hi;
    throw Error(r.str());
  }
  return v;
}

double median(const std::vector<double>& v) {
  Samples s;
  for (const double x : v) s.add(x);
  return s.median();
}

}  // namespace

TrainingTable load_training_table(const std::string& path) {
  TrainingTable t;
  t.file = path;
  const auto where = [&](int line_no) { return path + ":" + std::to_string(line_no); };
  const std::map<std::string, std::string> meta = kernel_table::scan_table(
      path,
      [&](int line_no, const std::vector<std::string>& columns, const std::string&,
          const std::map<std::string, std::string>&) {
        if (columns != kColumns) throw Error(where(line_no) + ": the header must be " + kernel_table::joined(kColumns));
      },
      [&](int line_no, const std::vector<std::string>& c, const std::string&) {
        const std::string at = where(line_no);
        TrainingRun r;
        r.card = c[0];
        r.model = c[1];
        if (r.card.empty()) throw Error(at + ": card: empty");
        r.params = in_range(c[2], at + ": params", 1e6, 1e13);
        r.seq_len = in_range(c[3], at + ": seq_len", 1, 1e7);
        r.gpus = static_cast<int>(in_range(c[4], at + ": gpus", 1, 1e6));
        r.mfu = in_range(c[5], at + ": mfu_percent", 0.1, 100) / 100;
        r.hfu = in_range(c[6], at + ": hfu_percent", 0.1, 100) / 100;
        if (c[7] != "0" && c[7] != "1") throw Error(at + ": activation_checkpointing: '" + c[7] + "' is not 0 or 1");
        r.checkpointing = c[7] == "1";
        r.tokens_per_s_per_gpu = in_range(c[8], at + ": tokens_per_s_per_gpu", 0, 1e9);
        t.runs.push_back(std::move(r));
      },
      "training-throughput table");
  if (const auto it = meta.find("source"); it != meta.end()) t.source = it->second;
  if (const auto it = meta.find("licence"); it != meta.end()) t.licence = it->second;
  if (t.runs.empty()) throw Error(path + ": no runs");
  if (t.source.empty()) throw Error(path + ": no '# source:' line; every table names where it comes from");
  return t;
}

TrainingFlops training_flops_per_token(const ModelSpec& m, const FinetuneSetup& s, std::int64_t adapter_params) {
  // A decoder's LM head runs on every trained token; an encoder's task head is a few outputs.
  const double head = m.encoder_only ? 0.0 : 2.0 * static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  const double matmul = m.linear_flops_per_token() + head;
  const double attention = m.attention_flops_per_token(static_cast<double>(s.seq_len));
  const double adapters = 2.0 * static_cast<double>(s.adapters() ? adapter_params : 0);
  TrainingFlops f;
  f.forward = matmul + attention + adapters;
  f.hardware = s.adapters() ? 2 * matmul + 3 * attention + 3 * adapters : 3 * (matmul + attention);
  if (s.gradient_checkpointing) f.hardware += f.forward;
  return f;
}

namespace {

struct Nearest {
  double hfu = 0;
  const TrainingRun* first = nullptr;
  int ties = 0;
  std::vector<std::string> cards;  // of the ties, in the table's order
};

// The rule of the header over `pool` (not empty).
Nearest nearest_hfu(std::vector<const TrainingRun*> pool, double params, double seq_len, bool checkpointing) {
  std::vector<const TrainingRun*> same;
  for (const TrainingRun* run : pool) {
    if (run->checkpointing == checkpointing) same.push_back(run);
  }
  if (!same.empty()) pool = same;
  const auto distance = [&](const TrainingRun* run) {
    return std::fabs(std::log(run->params / params)) + std::fabs(std::log(run->seq_len / seq_len));
  };
  double best = INFINITY;
  for (const TrainingRun* run : pool) best = std::min(best, distance(run));
  Nearest n;
  std::vector<double> hfus;
  for (const TrainingRun* run : pool) {
    if (distance(run) <= best + 1e-9) {
      if (!n.first) n.first = run;
      hfus.push_back(run->hfu);
      if (std::find(n.cards.begin(), n.cards.end(), run->card) == n.cards.end()) n.cards.push_back(run->card);
    }
  }
  n.ties = static_cast<int>(hfus.size());
  n.hfu = median(hfus);
  return n;
}

}  // namespace

std::optional<TrainingRate> training_rate(const TrainingTable& t, const Card& card, double params, double seq_len,
                                          bool checkpointing) {
  TrainingRate r;
  if (card.is_cpu) return std::nullopt;
  if (card.supports(Precision::kBf16)) r.peak = card.peak(Precision::kBf16);
  else if (card.supports(Precision::kFp16)) r.peak = card.peak(Precision::kFp16);
  else return std::nullopt;
  std::vector<const TrainingRun*> pool;
  for (const TrainingRun& run : t.runs) {
    if (run.card == card.name) pool.push_back(&run);
  }
  r.measured = !pool.empty();
  if (!r.measured) {
    for (const TrainingRun& run : t.runs) pool.push_back(&run);
  }
  const Nearest n = nearest_hfu(pool, params, seq_len, checkpointing);
  const std::vector<std::string>& cards = n.cards;
  r.nearest = n.first;
  r.ties = n.ties;
  r.hfu = n.hfu;
  r.flops_per_s = r.hfu * r.peak;
  std::ostringstream b;
  b << (r.measured ? "measured: " : "assumed: ") << r.nearest->model
    << " at " << static_cast<long long>(r.nearest->seq_len) << " tokens on ";
  for (std::size_t i = 0; i < cards.size(); ++i) b << (i ? i + 1 == cards.size() ? " and " : ", " : "") << cards[i];
  b << (r.nearest->checkpointing ? ", checkpointed" : "");
  if (r.ties > 1) b << " (median of " << r.ties << " runs)";
  r.basis = b.str();
  return r;
}

TrainingStep training_step(const Card& card, const FinetuneSetup& s, const TrainingFlops& f, const TrainingRate& r,
                           double weight_bytes) {
  TrainingStep st;
  st.tokens = static_cast<double>(s.batch) * static_cast<double>(s.seq_len);
  st.compute_s = st.tokens * f.hardware / r.flops_per_s;
  if (s.gpus > 1) {
    GpuLink slowest;
    for (int g = 0; g < s.gpus; ++g) {
      const GpuLink l = link_between(card, g, (g + 1) % s.gpus);
      if (slowest.kind == GpuLink::Kind::kSame || l.bandwidth < slowest.bandwidth) slowest = l;
    }
    const double passes = s.adapters() ? 2.0 : 3.0;
    const double bytes = passes * weight_bytes * static_cast<double>(s.gpus - 1) / static_cast<double>(s.gpus);
    st.comm_s = bytes / (slowest.bandwidth * kLinkEfficiency);
    st.link = slowest.name();
  }
  st.seconds = std::max(st.compute_s, st.comm_s);
  return st;
}

TrainingRateCheck check_training_rates(const TrainingTable& t) {
  TrainingRateCheck c;
  c.runs = t.runs.size();
  std::vector<double> model_out, card_out;
  std::vector<std::string> cards;
  for (const TrainingRun& run : t.runs) {
    if (std::find(cards.begin(), cards.end(), run.card) == cards.end()) cards.push_back(run.card);
  }
  for (const std::string& card : cards) {
    std::vector<double> errors;
    for (const TrainingRun& run : t.runs) {
      if (run.card != card) continue;
      std::vector<const TrainingRun*> other_models, other_cards;
      for (const TrainingRun& o : t.runs) {
        if (o.card == card && o.model != run.model) other_models.push_back(&o);
        if (o.card != card) other_cards.push_back(&o);
      }
      if (!other_models.empty()) {
        model_out.push_back(std::fabs(nearest_hfu(other_models, run.params, run.seq_len, run.checkpointing).hfu / run.hfu - 1));
      }
      if (!other_cards.empty()) {
        errors.push_back(std::fabs(nearest_hfu(other_cards, run.params, run.seq_len, run.checkpointing).hfu / run.hfu - 1));
      }
    }
    if (errors.empty()) continue;
    card_out.insert(card_out.end(), errors.begin(), errors.end());
    const double m = median(errors);
    if (m > c.card_out_worst_median) {
      c.card_out_worst_median = m;
      c.worst_card = card;
    }
  }
  if (!model_out.empty()) {
    Samples s;
    for (const double e : model_out) s.add(e);
    c.model_out_median = s.median();
    c.model_out_p90 = s.percentile(90);
  }
  if (!card_out.empty()) c.card_out_median = median(card_out);
  return c;
}

}  // namespace capsim
