// The replica's side of the CPU KV tier (--kv-offloading-size), as vLLM's OffloadingConnector
// drives the LRU offloading manager (engine/cpu_kv_tier.h): stores of full blocks, the lookup
// beyond the GPU prefix hits, the asynchronous load a waiting request waits for, and its
// admission once the load is seen finished.
//
// Owns (in Replica, null/empty without a tier): the per-slot CpuSeq (stores in flight, blocks
// handed to the tier, the load under way), the loads in flight and the host-to-device link's
// next free time. Invariants: a slot with loading > 0 is in the waiting queue, holds exactly its
// GPU hits plus the loading blocks, and is in loads_in_flight_ until end_step sees its load done
// (ready_at) or it is aborted; loads run one after another on the link (h2d_free_).
#include "sim/engine/replica.h"

#include <algorithm>
#include <cassert>

namespace capsim {

// The connector's _get_reqs_to_store: each step, the request's full blocks from the next one not
// yet offloaded. A refused store (the tier full of blocks still being stored) is retried with the
// same blocks at the request's next step. The copy runs on its own CUDA stream after the step's
// compute (cpu_gpu.py transfer_async waits for the compute stream), deferred a step so it never
// delays one (offloading_connector.py _submit_deferred_stores): no cost in the step.
void Replica::cpu_store(Sequence& s, std::int64_t full) {
  CpuSeq& c = cpu_seq_[static_cast<std::size_t>(&s - seqs_.data())];
  if (full <= c.stored) return;
  if (cpu_->store(s.hashes.data() + c.stored, full - c.stored, c.pending)) c.stored = full;
}

// update_connector_output: the request's stores complete (its finished_sending, or build_connector_meta
// for a preempted request); the manager's last touch of its blocks made them the most recent.
void Replica::cpu_release(Sequence& s) {
  const auto slot = static_cast<std::size_t>(&s - seqs_.data());
  CpuSeq& c = cpu_seq_[slot];
  if (c.loading > 0) {  // aborted while loading: the load is dropped
    c.loading = 0;
    c.ready_at = -1;
    loads_in_flight_.erase(std::remove(loads_in_flight_.begin(), loads_in_flight_.end(),
                                       static_cast<std::int32_t>(slot)),
                           loads_in_flight_.end());
  }
  if (c.pending.empty()) return;
  cpu_->complete(c.pending);
  cpu_->touch(s.hashes.data(), std::min<std::int64_t>(c.stored, static_cast<std::int64_t>(s.hashes.size())));
}

std::int64_t Replica::cpu_lookup(Sequence& s, std::int64_t gpu_hits) {
  // get_num_new_matched_tokens: num_blocks = num_tokens // block_size, all touched; nothing
  // when less than a block lies beyond the GPU hits.
  const std::int64_t blocks = s.tokens() / block_size_;
  if (blocks - gpu_hits < 1) return 0;
  extend_hashes(s, blocks);
  cpu_->touch(s.hashes.data(), blocks);
  return cpu_->lookup(s.hashes.data() + gpu_hits, blocks - gpu_hits);
}

bool Replica::start_cpu_load(std::int32_t slot, std::int64_t gpu_hits, std::int64_t cpu_blocks) {
  Sequence& s = seq(slot);
  // allocate_slots with num_external_computed_tokens: the GPU hits are taken and fresh blocks
  // hold what is loaded (their hashes are cached only once it has arrived: delay_cache_blocks).
  const std::int64_t reclaimed = kv_.hits_in_free_queue(s.hashes.data(), gpu_hits);
  if (cpu_blocks > kv_.free_blocks() - reclaimed) return false;
  s.blocks.reserve(static_cast<std::size_t>((s.req.prompt_tokens + s.req.output_tokens + block_size_ - 1) / block_size_));
  kv_.take_hits(s.hashes.data(), gpu_hits, s.blocks);
  s.registered = gpu_hits;
  const bool ok = kv_.allocate(cpu_blocks, s.blocks);
  assert(ok);
  (void)ok;
  if (s.preemptions == 0 && s.first_scheduled < 0) {
    s.prefix_hit_tokens = (gpu_hits + cpu_blocks) * block_size_;
    stats_.prefix_hit_tokens += gpu_hits * block_size_;
    stats_.cpu_hit_tokens += cpu_blocks * block_size_;
    stats_.prefix_lookup_tokens += s.req.prompt_tokens;
  }
  // The worker starts the load with this step (start_load_kv), behind any load still running
  // (each transfer waits for the previous one), at the host-to-device rate of each GPU's link.
  CpuSeq& c = cpu_seq_[static_cast<std::size_t>(slot)];
  c.loading = cpu_blocks;
  c.load_start = std::max(sched_now_, h2d_free_);
  c.load_done = c.load_start + from_seconds(cpu_load_block_s_ * static_cast<double>(cpu_blocks));
  c.ready_at = -1;
  h2d_free_ = c.load_done;
  c.stored = gpu_hits + cpu_blocks;  // _next_stored_block_idx: the loaded blocks are there
  loads_in_flight_.push_back(slot);
  stats_.cpu_loads += 1;
  stats_.cpu_loaded_blocks += cpu_blocks;
  return true;
}

std::int64_t Replica::loaded_tokens(std::int32_t slot) const {
  const Sequence& s = seq(slot);
  return std::min<std::int64_t>(static_cast<std::int64_t>(s.blocks.size()) * block_size_, s.tokens() - 1);
}

bool Replica::admit_loaded(std::int32_t slot, std::int64_t chunk) {
  Sequence& s = seq(slot);
  const std::int64_t computed = loaded_tokens(slot);
  if (!grow(s, computed + chunk)) return false;
  CpuSeq& c = cpu_seq_[static_cast<std::size_t>(slot)];
  stats_.cpu_load_wait_s += to_seconds(sched_now_ - c.load_start);
  c.loading = 0;
  c.ready_at = -1;
  s.computed = computed;
  // _update_waiting_for_remote_kv: the loaded blocks are cached now (cache_blocks).
  register_full_blocks(s, computed);
  s.admitted = admissions_++;
  running_.push_back(slot);
  return true;
}

}  // namespace capsim
