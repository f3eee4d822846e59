#include "sim/calibration/vidur.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "sim/core/error.h"

namespace capsim::calibration {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

class Table {
 public:
  Table(std::string path, std::vector<std::vector<std::string>> rows)
      : path_(std::move(path)), rows_(std::move(rows)) {
    if (!rows_.empty()) {
      for (std::size_t i = 0; i < rows_[0].size(); ++i) col_[rows_[0][i]] = i;
    }
  }
  bool has(const std::string& c) const { return col_.count(c) != 0; }
  std::size_t size() const { return rows_.empty() ? 0 : rows_.size() - 1; }
  const std::string& path() const { return path_; }

  // Row r (0-based, after the header); line numbers in messages are 1-based file lines.
  std::string text(std::size_t r, const std::string& c) const {
    const auto& row = rows_[r + 1];
    const std::size_t i = col_.at(c);
    return i < row.size() ? row[i] : "";
  }
  std::optional<double> number(std::size_t r, const std::string& c) const {
    const std::string t = text(r, c);
    if (t.empty()) return std::nullopt;
    try {
      std::size_t used = 0;
      const double v = std::stod(t, &used);
      if (used != t.size() || !std::isfinite(v)) throw std::invalid_argument(t);
      return v;
    } catch (const std::exception&) {
      throw Error(path_ + ":" + std::to_string(r + 2) + ": column " + c + ": '" + t +
                  "' is not a number");
    }
  }
  double required(std::size_t r, const std::string& c) const {
    const auto v = number(r, c);
    if (!v) throw Error(path_ + ":" + std::to_string(r + 2) + ": column " + c + ": empty; expected a number");
    return *v;
  }
  std::int64_t whole(std::size_t r, const std::string& c) const {
    const double v = required(r, c);
    // The upper bound keeps the conversion defined; no profiled batch or context comes near it.
    if (v != std::floor(v) || v < 1 || v > 1e12) {
      throw Error(path_ + ":" + std::to_string(r + 2) + ": column " + c + ": '" + text(r, c) +
                  "' is not a whole number in 1..1e12");
    }
    return static_cast<std::int64_t>(v);
  }

 private:
  std::string path_;
  std::vector<std::vector<std::string>> rows_;
  std::map<std::string, std::size_t> col_;
};

bool truthy(const std::string& s) {
  const std::string l = lower(s);
  return l == "true" || l == "1" || l == "yes";
}

void add_gemm(Profile& p, std::int64_t m, std::int64_t n, std::int64_t k, double ms,
              const std::string& label) {
  if (!(ms > 0) || n < 1 || k < 1) return;
  GemmSample g;
  g.dtype = Precision::kFp16;
  g.m = m;
  g.n = n;
  g.k = k;
  g.label = label;
  g.seconds = {ms / 1000.0};
  p.gemm.push_back(std::move(g));
}

// The four linear operators of one transformer layer shard.
int add_layer_gemms(Profile& p, std::int64_t tokens, std::int64_t tp, const VidurModelShape& s,
                    const std::map<std::string, std::optional<double>>& ms, const std::string& what) {
  const std::int64_t q = s.heads * s.head_dim;
  const std::int64_t kv = s.kv_heads * s.head_dim;
  const std::size_t before = p.gemm.size();
  const auto get = [&](const char* op) { return ms.at(op).value_or(0); };
  add_gemm(p, tokens, (q + 2 * kv) / tp, s.hidden, get("attn_pre_proj"), what + " attn_pre_proj (qkv)");
  add_gemm(p, tokens, s.hidden, q / tp, get("attn_post_proj"), what + " attn_post_proj (o)");
  add_gemm(p, tokens, (s.gated ? 2 : 1) * s.intermediate / tp, s.hidden, get("mlp_up_proj"),
           what + " mlp_up_proj");
  add_gemm(p, tokens, s.hidden, s.intermediate / tp, get("mlp_down_proj"), what + " mlp_down_proj");
  return static_cast<int>(p.gemm.size() - before);
}

const char* kOps[] = {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"};

}  // namespace

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(cell);
      cell.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !cell.empty()) {
        row.push_back(cell);
        rows.push_back(row);
      }
      row.clear();
      cell.clear();
      any = false;
    } else {
      cell += c;
      any = true;
    }
  }
  if (any || !cell.empty()) {
    row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

std::string vidur_sku_of(const std::string& card_name) {
  std::string cur;
  std::vector<std::string> toks;
  for (const char ch : card_name + "-") {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else if (!cur.empty()) {
      toks.push_back(cur);
      cur.clear();
    }
  }
  for (const auto& t : toks) {
    if (std::any_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); })) return t;
  }
  return toks.empty() ? lower(card_name) : toks[0];
}

Profile load_vidur_dir(const std::string& dir, const std::string& sku_in,
                       const VidurShapeResolver& resolve, VidurReport* report) {
  if (!fs::is_directory(dir)) throw Error(dir + ": not a folder (expected Vidur profiling CSVs)");
  const std::string sku = lower(sku_in);
  VidurReport local;
  VidurReport& rep = report ? *report : local;
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && lower(e.path().extension().string()) == ".csv") {
      files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());

  Profile p;
  p.path = dir;
  p.source = "vidur";
  p.provenance.gpu_name = "Vidur SKU " + sku;
  p.provenance.compute_capability = "unknown";
  p.provenance.date = "unknown (Vidur profiles do not record it)";
  std::vector<std::string> used_files;

  for (const auto& file : files) {
    const std::string rel = fs::relative(file, dir).generic_string();
    // Which SKU the file is for.
    bool mine = false;
    std::vector<std::string> parts;
    for (const auto& part : fs::path(rel).parent_path()) parts.push_back(lower(part.string()));
    for (const auto& part : parts) mine = mine || part == sku;
    const std::string name = lower(fs::path(file).filename().string());
    mine = mine || name.rfind(sku + "_", 0) == 0;

    const Table t(file, read_csv(file));
    if (t.size() == 0) {
      rep.skipped.push_back(rel + ": empty");
      continue;
    }
    const bool derived = t.has("gpu_dir") && t.has("model") && t.has("tp") && t.has("num_tokens") &&
                         t.has("attn_pre_proj_ms");
    const bool mlp = t.has("time_stats.attn_pre_proj.median") && t.has("n_embd") && t.has("num_tokens");
    const bool attention = t.has("time_stats.attn_decode.median") || t.has("time_stats.attn_prefill.median");
    const bool allreduce = t.has("time_stats.all_reduce.median") && t.has("num_workers") && t.has("size");
    if (!derived && !mlp && !attention && !allreduce) {
      rep.skipped.push_back(rel + ": not a Vidur profile this reader knows (no time_stats.<op>.median columns)");
      continue;
    }
    if (!derived && !mine) {
      rep.skipped.push_back(rel + ": not for SKU " + sku + " (no folder '" + sku + "' or prefix '" + sku + "_')");
      continue;
    }
    int added = 0;
    std::string kind;
    if (derived) {
      kind = "GEMM samples (derived linear ops)";
      std::map<std::string, std::optional<VidurModelShape>> shapes;
      for (std::size_t r = 0; r < t.size(); ++r) {
        if (lower(t.text(r, "gpu_dir")) != sku) continue;
        const std::string model = t.text(r, "model");
        if (!shapes.count(model)) shapes[model] = resolve ? resolve(model) : std::nullopt;
        if (!shapes[model]) {
          throw Error(file + ":" + std::to_string(r + 2) + ": column model: '" + model +
                      "' is not a catalogue model (capsim list models); its shapes are needed");
        }
        std::map<std::string, std::optional<double>> ms;
        for (const char* op : kOps) ms[op] = t.number(r, std::string(op) + "_ms");
        added += add_layer_gemms(p, t.whole(r, "num_tokens"), t.whole(r, "tp"), *shapes[model], ms,
                                 model + " tp" + t.text(r, "tp"));
      }
    } else if (mlp) {
      kind = "GEMM samples (mlp.csv)";
      for (const char* c : {"n_head", "n_kv_head", "n_expanded_embd", "num_tensor_parallel_workers"}) {
        if (!t.has(c)) throw Error(file + ": column " + std::string(c) + ": missing; a Vidur mlp.csv has it");
      }
      for (std::size_t r = 0; r < t.size(); ++r) {
        VidurModelShape s;
        s.hidden = t.whole(r, "n_embd");
        s.heads = t.whole(r, "n_head");
        s.kv_heads = t.whole(r, "n_kv_head");
        s.head_dim = s.hidden / s.heads;
        s.intermediate = t.whole(r, "n_expanded_embd");
        s.gated = !t.has("use_gated_mlp") || truthy(t.text(r, "use_gated_mlp"));
        std::map<std::string, std::optional<double>> ms;
        for (const char* op : kOps) {
          const std::string c = std::string("time_stats.") + op + ".median";
          ms[op] = t.has(c) ? t.number(r, c) : std::nullopt;
        }
        added += add_layer_gemms(p, t.whole(r, "num_tokens"), t.whole(r, "num_tensor_parallel_workers"),
                                 s, ms, "h" + std::to_string(s.hidden));
      }
    } else if (attention) {
      kind = "attention samples";
      for (const char* c : {"n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size",
                            "kv_cache_size", "is_prefill"}) {
        if (!t.has(c)) throw Error(file + ": column " + std::string(c) + ": missing; a Vidur attention.csv has it");
      }
      for (std::size_t r = 0; r < t.size(); ++r) {
        const std::int64_t tp = t.whole(r, "num_tensor_parallel_workers");
        const std::int64_t heads = t.whole(r, "n_q_head");
        const std::int64_t hd = t.whole(r, "n_embd") / heads;
        const std::int64_t q = std::max<std::int64_t>(1, heads / tp);
        const std::int64_t kv = std::max<std::int64_t>(1, t.whole(r, "n_kv_head") / tp);
        const std::string backend = t.has("attention_backend") ? t.text(r, "attention_backend") : "";
        const double cache = t.number(r, "kv_cache_size").value_or(0);
        if (!(cache >= 0 && cache <= 1e12)) {
          throw Error(file + ":" + std::to_string(r + 2) +
                      ": column kv_cache_size: not a number of tokens in 0..1e12");
        }
        if (truthy(t.text(r, "is_prefill"))) {
          const auto ms = t.has("time_stats.attn_prefill.median") ? t.number(r, "time_stats.attn_prefill.median")
                                                                 : std::nullopt;
          if (!ms || !(*ms > 0)) continue;
          AttentionPrefillSample s;
          s.batch = t.whole(r, "batch_size");
          s.tokens = t.whole(r, "prefill_chunk_size");
          s.cached = static_cast<std::int64_t>(cache);
          s.q_heads = q;
          s.kv_heads = kv;
          s.head_dim = hd;
          s.kernel = "Vidur " + backend;
          s.seconds = {*ms / 1000.0};
          p.attention_prefill.push_back(std::move(s));
        } else {
          const auto ms = t.has("time_stats.attn_decode.median") ? t.number(r, "time_stats.attn_decode.median")
                                                                : std::nullopt;
          if (!ms || !(*ms > 0) || cache < 1) continue;
          AttentionDecodeSample s;
          s.batch = t.whole(r, "batch_size");
          s.context = static_cast<std::int64_t>(cache);
          s.q_heads = q;
          s.kv_heads = kv;
          s.head_dim = hd;
          s.block_size = t.has("block_size") ? t.whole(r, "block_size") : 0;
          s.kernel = "Vidur " + backend;
          s.seconds = {*ms / 1000.0};
          p.attention_decode.push_back(std::move(s));
        }
        ++added;
      }
    } else {
      kind = "all-reduce samples";
      for (std::size_t r = 0; r < t.size(); ++r) {
        const auto ms = t.number(r, "time_stats.all_reduce.median");
        const std::int64_t n = t.whole(r, "num_workers");
        if (!ms || !(*ms > 0) || n < 2) continue;
        AllReduceSample s;
        s.gpus = static_cast<int>(n);
        s.bytes = 2.0 * t.required(r, "size");  // Vidur allocates `size` fp16 elements
        s.seconds = {*ms / 1000.0};
        p.allreduce.push_back(std::move(s));
        ++added;
      }
    }
    if (added == 0) {
      rep.skipped.push_back(rel + ": no rows for SKU " + sku);
      continue;
    }
    rep.used.push_back(rel + ": " + std::to_string(added) + " " + kind);
    used_files.push_back(rel);
  }
  if (p.gemm.empty()) {
    std::string found;
    for (const auto& s : rep.skipped) found += "\n  " + s;
    throw Error(dir + ": no Vidur linear-operator (mlp.csv) rows for SKU '" + sku +
                "'; they give the GEMM samples the fit needs" + (found.empty() ? "" : "; skipped:" + found));
  }
  p.provenance.raw = {{"gpu_name", p.provenance.gpu_name},
                      {"source", "vidur"},
                      {"vidur_sku", sku},
                      {"directory", dir},
                      {"files", used_files},
                      {"date", p.provenance.date},
                      {"compute_capability", "unknown"},
                      {"note", "Vidur profiles: PyTorch reference layers in fp16, times are medians "
                               "of kernel durations (ms) per operator; no driver, clock or host recorded"}};
  return p;
}

}  // namespace capsim::calibration
