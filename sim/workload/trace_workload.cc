// Trace replay: requests at the trace's arrival times (scaled), one read ahead, so a trace of
// millions of rows streams in bounded memory. Mooncake hash_ids name blocks of 512 tokens of
// identical content; they become content segments, so equal ids hit the prefix cache.
#include <sstream>

#include "sim/core/error.h"
#include "sim/workload/generators.h"

namespace capsim {
namespace {

class TraceWorkload : public Workload {
 public:
  explicit TraceWorkload(const TraceConfig& c)
      : c_(c), reader_(open_trace(c.path, c.format, c.time_scale)) {}

  void start(ArrivalSink& sink) override { emit(sink); }
  void on_arrival(const Request&, ArrivalSink& sink) override { emit(sink); }

  std::string describe() const override {
    std::ostringstream o;
    o << "trace " << c_.path;
    if (c_.time_scale != 1.0) o << " (time scaled x" << c_.time_scale << ")";
    return o.str();
  }

 private:
  void emit(ArrivalSink& sink) {
    if (c_.requests && emitted_ >= *c_.requests) return;
    TraceRecord rec;
    if (!reader_->next(rec)) return;
    Request r;
    r.id = emitted_++;
    r.arrival = from_seconds(rec.arrival_s);
    r.prompt_tokens = rec.input_tokens;
    r.output_tokens = rec.output_tokens;
    if (!rec.hash_ids.empty()) {
      std::int64_t left = rec.input_tokens;
      for (const std::uint64_t h : rec.hash_ids) {
        if (left <= 0) break;
        const std::int64_t n = std::min(left, c_.hash_block_tokens);
        r.segments.push_back({0x7000000000000000ULL ^ h, n});
        left -= n;
      }
      if (left > 0) r.segments.push_back({0x1000000000000000ULL + r.id * 2, left});
      r.segments.push_back({0x1000000000000000ULL + r.id * 2 + 1, r.output_tokens});
    }
    sink.arrive(std::move(r));
  }

  TraceConfig c_;
  std::unique_ptr<TraceReader> reader_;
  std::int64_t emitted_ = 0;
};

}  // namespace

std::unique_ptr<Workload> make_trace_workload(const TraceConfig& c) {
  return std::make_unique<TraceWorkload>(c);
}

}  // namespace capsim
