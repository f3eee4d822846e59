// SGLang's scheduler (sgl-project/sglang, python/sglang/srt/managers/scheduler.py
// Scheduler.get_next_batch_to_run, get_new_batch_prefill, update_running_batch;
// schedule_policy.py PrefillAdder; schedule_batch.py ScheduleBatch.retract_decode), at its
// defaults (FCFS, no mixed chunk):
// - Prefill first: a step that can admit anything is a prefill batch — the chunked request's next
//   chunk, then waiting requests FCFS within chunked_prefill_size tokens (max_num_batched_tokens
//   here) — and the running requests do not decode in it (enable_mixed_chunk is off).
// - Admission reserves future decode tokens: a waiting request is admitted only while its
//   uncached prompt plus min(max_new_tokens, clip) is below the pool's free and evictable tokens
//   less new_token_ratio x min(remaining max_new_tokens, clip) of every running request, and what
//   this batch admitted before it (PrefillAdder.add_one_req, rem_total_tokens). The first that does
//   not fit stops the batch.
// - Otherwise every running request decodes one token. When the pool cannot hold that step,
//   requests are retracted (freed, queued again at the back, recomputed later): the one with the
//   fewest output tokens first, then the longest prompt, until the step fits; the ratio is then
//   re-estimated from the survivors, and otherwise decays by one step.
// capsim's requests end at their output length, which serving benchmarks also send as
// max_tokens, so that length stands for max_new_tokens.
#include <algorithm>
#include <limits>

#include "sim/engine/policies.h"

namespace capsim {

double SglangPolicy::reserved_tokens(const Sequence& s, double ratio, double clip) {
  const double left = static_cast<double>(std::max<std::int64_t>(0, s.req.output_tokens - s.generated));
  return std::min(left, clip) * ratio;
}

bool SglangPolicy::admits(double free_tokens, double reserved, std::int64_t extend_tokens,
                          std::int64_t max_new_tokens, double clip) {
  const double total = static_cast<double>(extend_tokens) + std::min(static_cast<double>(max_new_tokens), clip);
  return total < free_tokens - reserved;
}

namespace {

// Still computing its prompt (or, after a retraction, its prompt and earlier output): SGLang's
// chunked request. A decode has exactly its last sampled token pending.
bool prefilling(const Sequence& s) { return s.pending() > 1 || (s.generated == 0 && s.pending() > 0); }

}  // namespace

void SglangPolicy::schedule(Replica& r, StepPlan& plan) {
  const EngineProfile& e = r.deployment().engine;
  const double init = std::min(1.0, e.init_new_token_ratio);
  // An idle engine starts over from the initial estimate (Scheduler.self_check_during_idle).
  if (ratio_ < 0 || r.running().empty()) ratio_ = init;
  if (schedule_prefill(r, plan)) return;
  schedule_decode(r, plan);
}

bool SglangPolicy::schedule_prefill(Replica& r, StepPlan& plan) {
  const SchedulerLimits& lim = r.limits();
  const double clip = r.deployment().engine.clip_max_new_tokens;
  auto& running = r.running();
  auto& waiting = r.waiting();
  const double block = static_cast<double>(lim.block_size);
  double reserved = 0;
  std::int32_t chunked = -1;
  for (const std::int32_t slot : running) {
    const Sequence& s = r.seq(slot);
    if (prefilling(s)) {
      chunked = slot;
    } else {
      reserved += reserved_tokens(s, ratio_, clip);
    }
  }
  // The pool as the batch starts: SGLang allocates the batch's tokens only once it is formed
  // (prepare_for_extend), and counts each admitted request in `reserved` meanwhile.
  const double free_tokens = static_cast<double>(r.kv().free_blocks()) * block;
  // Without chunked prefill SGLang bounds a prefill batch by max_prefill_tokens instead; one
  // prompt always runs.
  std::int64_t budget = lim.max_num_batched_tokens;
  bool any = false;
  if (chunked >= 0) {
    Sequence& s = r.seq(chunked);
    const double room = std::max(0.0, free_tokens - reserved);
    const std::int64_t n = std::min({s.pending(), budget, static_cast<std::int64_t>(room)});
    if (n <= 0 || !r.grow(s, s.computed + n)) return false;
    r.plan_item(plan, chunked, n);
    const bool last = n == s.pending();
    reserved += static_cast<double>(n) + (last ? std::min(static_cast<double>(s.req.output_tokens), clip) : 0.0);
    budget -= n;
    any = true;
    if (!last) return true;
  }
  while (!waiting.empty() && budget > 0 && static_cast<int>(running.size()) < lim.max_num_seqs) {
    const std::int32_t slot = waiting.front();
    if (!r.schedulable(r.seq(slot))) break;  // not yet seen by this step's scheduler
    Sequence& s = r.seq(slot);
    const std::int64_t hits = r.lookup_hits(s);
    const std::int64_t extend = s.tokens() - r.ready_tokens(s, hits);
    const std::int64_t max_new = std::max<std::int64_t>(0, s.req.output_tokens - s.generated);
    if (!admits(free_tokens, reserved, extend, max_new, clip)) break;
    if (!lim.enable_chunked_prefill && extend > budget && any) break;
    const std::int64_t n = lim.enable_chunked_prefill ? std::min(extend, budget) : extend;
    if (!r.admit(slot, hits, n)) break;
    waiting.pop_front();
    r.plan_item(plan, slot, n);
    any = true;
    // A request cut into chunks reserves its output only with its last chunk.
    reserved += static_cast<double>(n) + (n == extend ? std::min(static_cast<double>(max_new), clip) : 0.0);
    budget -= n;
    if (n < extend) break;  // the new chunked request; nothing is admitted behind it
  }
  return any;
}

void SglangPolicy::schedule_decode(Replica& r, StepPlan& plan) {
  const EngineProfile& e = r.deployment().engine;
  const double init = std::min(1.0, e.init_new_token_ratio);
  const double floor = std::min(1.0, init * e.min_new_token_ratio_factor);
  const double decay = (init - floor) / e.new_token_ratio_decay_steps;
  const std::int64_t block = r.limits().block_size;
  auto& running = r.running();
  std::vector<std::int32_t> decoding;
  for (const std::int32_t slot : running) {
    if (!prefilling(r.seq(slot))) decoding.push_back(slot);
  }
  if (decoding.empty()) return;
  const auto blocks_needed = [&] {
    std::int64_t need = 0;
    for (const std::int32_t slot : decoding) {
      const Sequence& s = r.seq(slot);
      need += std::max<std::int64_t>(0, (s.computed + 1 + block - 1) / block - static_cast<std::int64_t>(s.blocks.size()));
    }
    return need;
  };
  if (blocks_needed() > r.kv().free_blocks()) {
    // Kept first: most output, then shortest prompt; retracted from the back, one always kept.
    std::stable_sort(decoding.begin(), decoding.end(), [&](std::int32_t a, std::int32_t b) {
      const Sequence& x = r.seq(a);
      const Sequence& y = r.seq(b);
      if (x.generated != y.generated) return x.generated > y.generated;
      return x.req.prompt_tokens < y.req.prompt_tokens;
    });
    auto& waiting = r.waiting();
    while (decoding.size() > 1 && blocks_needed() > r.kv().free_blocks()) {
      const std::int32_t victim = decoding.back();
      decoding.pop_back();
      running.erase(std::find(running.begin(), running.end(), victim));
      r.preempt(victim);  // frees its blocks and queues it at the front ...
      waiting.pop_front();
      waiting.push_back(victim);  // ... where SGLang appends a retracted request at the back
      ++plan.preempted;
    }
    double decoded = 0, max_new = 0;
    for (const std::int32_t slot : decoding) {
      decoded += static_cast<double>(r.seq(slot).generated);
      max_new += static_cast<double>(r.seq(slot).req.output_tokens);
    }
    ratio_ = std::min(1.0, (decoded + e.retract_decode_steps * static_cast<double>(decoding.size())) / (max_new + 1));
  } else {
    ratio_ = std::max(ratio_ - decay, floor);
  }
  // Running order, as the batch holds them.
  for (const std::int32_t slot : running) {
    Sequence& s = r.seq(slot);
    if (prefilling(s)) continue;
    if (!r.grow(s, s.computed + 1)) continue;  // the last request alone past the pool: it waits
    r.plan_item(plan, slot, 1);
  }
}

}  // namespace capsim
