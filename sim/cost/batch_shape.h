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
  // Sequences whose last token needs logits (decodes + prefills that finish their prompt).
  std::int64_t logit_sequences = 0;

  std::int64_t tokens() const { return prefill_tokens + decode_sequences; }
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
};

}  // namespace capsim
