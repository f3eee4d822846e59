// The OpenAI-compatible API as vLLM's OpenAI server speaks it (vllm/entrypoints/openai/: the
// request fields, response and chunk objects, and error bodies), for `capsim emulate`: parsing a
// request body into what the simulation needs (prompt length, output length, streaming) and
// writing the JSON a vLLM client expects back. No I/O here: the HTTP server (server.cc) calls it.
//
// Token counts of text are estimated, since capsim has no tokenizer: ceil(characters / 4) per
// text (OpenAI's rule of thumb for English), plus, for chat, 4 tokens per message (the chat
// template's role markers) and 3 for the assistant's reply header. A prompt given as token ids
// counts exactly. docs/emulate.md states the estimate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/core/rng.h"
#include "sim/workload/distributions.h"
#include "sim/workload/request.h"

namespace capsim::emulate {

// JSON objects keep their fields in the order written, as vLLM (pydantic) writes them.
using Json = nlohmann::ordered_json;

enum class Endpoint { kCompletions, kChat };

// An error as vLLM returns it: HTTP status and the body {"error": {message, type, param, code}}
// (vllm/entrypoints/openai/engine/protocol.py ErrorResponse / ErrorInfo).
struct ApiError {
  int status = 400;
  std::string type = "BadRequestError";
  std::string message;
  std::optional<std::string> param;
};
Json error_body(const ApiError& e);

// What one request asks of the simulated server.
struct ParsedRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;               // as sent ("" when absent: the served model)
  std::int64_t prompt_tokens = 0;  // estimated (text) or exact (token ids)
  std::optional<std::int64_t> max_tokens;  // max_tokens, else max_completion_tokens (chat)
  std::int64_t min_tokens = 0;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage (true when stream_options is given without it)
  // The prompt's content (sim/workload/request.h), summing to prompt_tokens, so that the
  // simulation's prefix cache sees a repeated prompt, or a chat history sent again with a new
  // question, as vLLM's does: a chat message is one segment (its role and text, with its
  // template tokens), then the reply header; a text prompt is cut every 64 code points (16
  // estimated tokens), a token-id prompt every 16 ids, so that a prompt that extends another
  // shares its leading blocks. Content ids are FNV-1a hashes of the bytes (the same on any
  // machine); equal content, equal id.
  std::vector<ContentSegment> prompt_segments;
};

// FNV-1a, 64 bits: a content id for prompt_segments (never 0).
std::uint64_t content_id(std::string_view bytes);

// ceil(UTF-8 code points / 4), at least 1 for non-empty text; 0 for "".
std::int64_t estimate_text_tokens(const std::string& text);

// Parses a JSON body; an ApiError (400) names the field when it is malformed or unsupported
// (n > 1, best_of > 1, a batch of several prompts).
struct ParseOutcome {
  std::optional<ParsedRequest> request;
  std::optional<ApiError> error;
};
ParseOutcome parse_request(Endpoint endpoint, const std::string& body);

// How a request is served on a server whose max_model_len is `max_model_len`: the number of
// tokens it will generate and why it stops, or the error vLLM returns for it (a wrong model
// name: 404; too long for max_model_len or max_tokens < 1: 400).
//   cap    = max_tokens, or max_model_len - prompt when absent (vLLM's default);
//   output = cap with ignore_eos; otherwise the model's own answer length, drawn from
//            `natural_length` (the scenario's --output-tokens) and clamped to [min_tokens, cap].
//   finish_reason = "length" when the output reached the cap, else "stop".
struct ServePlan {
  std::int64_t output_tokens = 0;
  std::string finish_reason;
};
struct PlanOutcome {
  std::optional<ServePlan> plan;
  std::optional<ApiError> error;
};
PlanOutcome plan_request(const ParsedRequest& r, const std::string& served_model,
                         std::int64_t max_model_len, const Distribution& natural_length, Rng& rng);

// The filler text of output token `index` (0-based): one word per token.
std::string filler_token(std::int64_t index);

// ---- Response objects (field names and order as vLLM's protocol.py) ----
struct ResponseIds {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  std::int64_t created = 0;  // Unix seconds
  std::string model;
};
// One streamed token: a chat.completion.chunk with delta.content, or a text_completion choice.
// `finish_reason` set on the last token's chunk.
Json token_chunk(Endpoint e, const ResponseIds& ids, const std::string& text,
                           const std::optional<std::string>& finish_reason);
// Chat streams open with a chunk carrying delta {"role": "assistant", "content": ""}.
Json role_chunk(const ResponseIds& ids);
// The last chunk when stream_options.include_usage: empty choices and the usage object.
Json usage_chunk(Endpoint e, const ResponseIds& ids, std::int64_t prompt, std::int64_t completion);
// The whole response of a non-streaming request.
Json full_response(Endpoint e, const ResponseIds& ids, const std::string& text,
                             const std::string& finish_reason, std::int64_t prompt, std::int64_t completion);
// GET /v1/models.
Json model_list(const std::string& served_model, std::int64_t max_model_len, std::int64_t created);

}  // namespace capsim::emulate
