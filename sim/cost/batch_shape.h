// What one engine step computes, summarised for the cost model (docs/cost-model.md#batchshape).
#pragma once

#include <cstdint>

namespace capsim {

struct BatchShape {
  // Prefill chunks: new prompt tokens computed this step.
  std::int64_t prefill_tokens = 0;
  std::int64_t prefill_sequences = 0;
  // Sum over chunks of chunk x (cached_context + (chunk + 1) / 2): the causal query-key pairs
  // (per head, per layer) the chunks' attention computes.
  double prefill_attention_pairs = 0;
  // Sum over chunks of (cached_context + chunk): KV tokens the prefill attention reads.
  double prefill_kv_tokens = 0;
  // Decode: one new token per sequence, attending over its whole context (incl. the new one).
  std::int64_t decode_sequences = 0;
  double decode_context_tokens = 0;  // sum of the decode sequences' context lengths
  // Rows that need logits: sequences that sample (decodes + prefills that finish their prompt)
  // plus, under speculative decoding, every draft token a decode verifies.
  std::int64_t logit_sequences = 0;
  // Speculative decoding (llm/speculative.h): draft tokens verified with the decodes (each
  // decode runs 1 + its drafts as query tokens), and the extra query-key pairs they attend
  // (a draft at offset j of a decode with context c attends c + j keys). 0 without speculation.
  std::int64_t spec_tokens = 0;
  double spec_attention_pairs = 0;
  // Multi-LoRA (llm/lora.h): tokens of sequences that run an adapter, the distinct adapters of
  // the step, and the adapters copied host-to-device before it. 0 without LoRA.
  std::int64_t lora_tokens = 0;
  std::int64_t lora_adapters = 0;
  std::int64_t lora_loads = 0;

  std::int64_t tokens() const { return prefill_tokens + decode_sequences + spec_tokens; }
  std::int64_t sequences() const { return prefill_sequences + decode_sequences; }
  bool empty() const { return tokens() == 0; }

  // Adds a prefill chunk of `chunk` new tokens after `cached` already computed ones.
  void add_prefill_chunk(std::int64_t cached, std::int64_t chunk, bool last_chunk) {
    prefill_tokens += chunk;
    prefill_sequences += 1;
    prefill_attention_pairs += static_cast<double>(chunk) *
                               (static_cast<double>(cached) + (static_cast<double>(chunk) + 1) / 2);
    prefill_kv_tokens += static_cast<double>(cached + chunk);
    if (last_chunk) logit_sequences += 1;
  }
  // Adds a decode of one token for a sequence whose context (incl. the new token) is `context`.
  void add_decode(std::int64_t context) {
    decode_sequences += 1;
    decode_context_tokens += static_cast<double>(context);
    logit_sequences += 1;
  }
  // A decode that also verifies `drafts` speculative tokens: its k+1 query tokens attend
  // context, context + 1, ..., context + drafts keys.
  void add_speculative_decode(std::int64_t context, std::int64_t drafts) {
    add_decode(context);
    spec_tokens += drafts;
    logit_sequences += drafts;
    const double k = static_cast<double>(drafts);
    spec_attention_pairs += k * static_cast<double>(context) + k * (k + 1) / 2;
  }
};

}  // namespace capsim
