#include "sim/emulate/openai_protocol.h"

#include <algorithm>
#include <cmath>

#include "sim/core/input_limits.h"

namespace capsim::emulate {
namespace {

using json = nlohmann::ordered_json;

ApiError bad_request(const std::string& message, std::optional<std::string> param = std::nullopt) {
  return ApiError{400, "BadRequestError", message, std::move(param)};
}

// A non-negative integer field; an ApiError naming it otherwise.
std::optional<ApiError> read_count(const json& body, const char* field, std::optional<std::int64_t>& out) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    return bad_request(std::string(field) + ": must be an integer, got " + it->dump(), field);
  }
  const std::int64_t v = it->get<std::int64_t>();
  if (v < 0) return bad_request(std::string(field) + ": must be >= 0, got " + std::to_string(v), field);
  out = v;
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& body, const char* field, bool& out) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad_request(std::string(field) + ": must be true or false, got " + it->dump(), field);
  out = it->get<bool>();
  return std::nullopt;
}

// The text of a chat message's content: a string, or the "text" parts of a list of parts.
std::optional<std::string> content_text(const json& content) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return std::nullopt;
  std::string text;
  for (const json& part : content) {
    if (!part.is_object()) return std::nullopt;
    const auto t = part.find("text");
    if (t != part.end() && t->is_string()) text += t->get<std::string>();
  }
  return text;
}

// Chat: per message ceil(chars/4) + 4 (role markers), plus 3 for the reply header.
constexpr std::int64_t kChatTokensPerMessage = 4;
constexpr std::int64_t kChatReplyTokens = 3;

// Text cut every 64 code points (16 estimated tokens; 64 is a multiple of 4, so the pieces'
// estimates add up to the whole text's).
void append_text_segments(const std::string& text, std::vector<ContentSegment>& out) {
  constexpr std::int64_t kPiece = 64;
  std::size_t start = 0;
  std::int64_t points = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const bool boundary = i == text.size() || (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    if (boundary && (points == kPiece || (i == text.size() && points > 0))) {
      const std::string piece = text.substr(start, i - start);
      out.push_back({content_id(piece), (points + 3) / 4});
      start = i;
      points = 0;
    }
    if (i < text.size() && boundary) ++points;
  }
}

std::optional<ApiError> chat_prompt_tokens(const json& body, std::int64_t& out, std::vector<ContentSegment>& segments) {
  const auto it = body.find("messages");
  if (it == body.end()) return bad_request("messages: field required", "messages");
  if (!it->is_array() || it->empty()) return bad_request("messages: must be a non-empty list of messages", "messages");
  std::int64_t n = kChatReplyTokens;
  for (const json& m : *it) {
    if (!m.is_object() || !m.contains("role")) {
      return bad_request("messages: each message must be an object with a 'role'", "messages");
    }
    const auto c = m.find("content");
    std::optional<std::string> text = c == m.end() ? std::string() : content_text(*c);
    if (!text) return bad_request("messages: content must be a string or a list of text parts", "messages");
    n += kChatTokensPerMessage + estimate_text_tokens(*text);
    const std::string role = m["role"].is_string() ? m["role"].get<std::string>() : m["role"].dump();
    segments.push_back({content_id(role + '\0' + *text), kChatTokensPerMessage + estimate_text_tokens(*text)});
  }
  segments.push_back({content_id("capsim emulate: the chat template's reply header"), kChatReplyTokens});
  out = n;
  return std::nullopt;
}

// Completions: a string, a list of token ids, or a list holding one of those.
std::optional<ApiError> completion_prompt_tokens(const json& body, std::int64_t& out,
                                                std::vector<ContentSegment>& segments) {
  const auto it = body.find("prompt");
  if (it == body.end()) return bad_request("prompt: field required", "prompt");
  const json* p = &*it;
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() > 1) {
      return bad_request("prompt: capsim emulate serves one prompt per request, got a batch of " +
                             std::to_string(p->size()), "prompt");
    }
    p = &p->front();
  }
  if (p->is_string()) {
    out = estimate_text_tokens(p->get<std::string>());
    append_text_segments(p->get<std::string>(), segments);
  } else if (p->is_array()) {
    std::string ids;
    std::int64_t in_piece = 0;
    for (const json& t : *p) {
      if (!t.is_number_integer() && !t.is_number_unsigned()) {
        return bad_request("prompt: a list prompt must hold token ids (integers)", "prompt");
      }
      ids += t.dump() + ',';
      if (++in_piece == 16) {
        segments.push_back({content_id("ids:" + ids), in_piece});
        ids.clear();
        in_piece = 0;
      }
    }
    if (in_piece > 0) segments.push_back({content_id("ids:" + ids), in_piece});
    out = static_cast<std::int64_t>(p->size());
  } else {
    return bad_request("prompt: must be a string, a list of token ids, or a list of one of those", "prompt");
  }
  if (out == 0) return bad_request("prompt: the prompt is empty", "prompt");
  return std::nullopt;
}

constexpr const char* kWords[] = {"capsim", "emulates", "the", "timing", "of", "a",
                                  "simulated", "server", "and", "this", "is", "filler"};

json usage(std::int64_t prompt, std::int64_t completion) {
  return json{{"prompt_tokens", prompt}, {"total_tokens", prompt + completion}, {"completion_tokens", completion}};
}

}  // namespace

json error_body(const ApiError& e) {
  json info;
  info["message"] = e.message;
  info["type"] = e.type;
  info["param"] = e.param ? json(*e.param) : json(nullptr);
  info["code"] = e.status;
  return json{{"error", info}};
}

std::uint64_t content_id(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h == 0 ? 1 : h;
}

std::int64_t estimate_text_tokens(const std::string& text) {
  std::int64_t points = 0;
  for (const char ch : text) {
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++points;  // not a continuation byte
  }
  return (points + 3) / 4;
}

ParseOutcome parse_request(Endpoint endpoint, const std::string& text) {
  ParseOutcome out;
  // Depth first, in one linear scan: a body nested millions deep (inside a field nobody reads)
  // would otherwise cost seconds and gigabytes to parse and free.
  if (const JsonDepth d = json_depth(text); d.line_over != 0) {
    out.error = bad_request("the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels (line " +
                            std::to_string(d.line_over) + ")");
    return out;
  }
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    out.error = bad_request("the request body is not a JSON object");
    return out;
  }
  ParsedRequest r;
  r.endpoint = endpoint;
  if (const auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) {
      out.error = bad_request("model: must be a string", "model");
      return out;
    }
    r.model = m->get<std::string>();
  }
  std::optional<ApiError> e = endpoint == Endpoint::kChat
                                   ? chat_prompt_tokens(body, r.prompt_tokens, r.prompt_segments)
                                   : completion_prompt_tokens(body, r.prompt_tokens, r.prompt_segments);
  std::optional<std::int64_t> max_tokens, max_completion, min_tokens, n, best_of;
  if (!e) e = read_count(body, "max_tokens", max_tokens);
  if (!e) e = read_count(body, "max_completion_tokens", max_completion);
  if (!e) e = read_count(body, "min_tokens", min_tokens);
  if (!e) e = read_count(body, "n", n);
  if (!e) e = read_count(body, "best_of", best_of);
  if (!e) e = read_bool(body, "ignore_eos", r.ignore_eos);
  if (!e) e = read_bool(body, "stream", r.stream);
  if (!e && n && *n != 1) e = bad_request("n: capsim emulate generates one sequence per request (n = 1)", "n");
  if (!e && best_of && *best_of > 1) e = bad_request("best_of: capsim emulate does not do beam search", "best_of");
  if (!e) {
    if (const auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
      if (!so->is_object()) {
        e = bad_request("stream_options: must be an object", "stream_options");
      } else {
        r.include_usage = true;  // vLLM's StreamOptions.include_usage defaults to true
        e = read_bool(*so, "include_usage", r.include_usage);
      }
    }
  }
  if (e) {
    out.error = std::move(e);
    return out;
  }
  // A completion left without max_tokens gets 16, the field's default in vLLM's CompletionRequest
  // (and OpenAI's legacy completions API); an explicit null means the rest of the context there,
  // as an absent cap does for chat.
  if (endpoint == Endpoint::kCompletions && body.find("max_tokens") == body.end()) max_tokens = 16;
  // Chat takes max_completion_tokens (OpenAI's newer name) and max_tokens; vLLM prefers the first.
  r.max_tokens = max_completion && endpoint == Endpoint::kChat ? max_completion : max_tokens;
  r.min_tokens = min_tokens.value_or(0);
  out.request = r;
  return out;
}

PlanOutcome plan_request(const ParsedRequest& r, const std::string& served_model, std::int64_t max_model_len,
                         const Distribution& natural_length, Rng& rng) {
  PlanOutcome out;
  if (!r.model.empty() && r.model != served_model) {
    out.error = ApiError{404, "NotFoundError", "The model `" + r.model + "` does not exist.", "model"};
    return out;
  }
  // vLLM's context-length checks (the messages captured from its server; see docs/emulate.md).
  const std::string L = std::to_string(max_model_len), P = std::to_string(r.prompt_tokens);
  if (r.prompt_tokens >= max_model_len) {
    out.error = bad_request("This model's maximum context length is " + L + " tokens. However, your request has " +
                            P + " input tokens. Please reduce the length of the input messages.");
    return out;
  }
  if (r.max_tokens && *r.max_tokens > max_model_len - r.prompt_tokens) {
    const std::string M = std::to_string(*r.max_tokens);
    out.error = bad_request("'max_tokens' or 'max_completion_tokens' is too large: " + M +
                            ". This model's maximum context length is " + L + " tokens and your request has " +
                            P + " input tokens (" + M + " > " + L + " - " + P + ").");
    return out;
  }
  if (r.max_tokens && *r.max_tokens < 1) {
    out.error = bad_request("max_tokens must be at least 1, got " + std::to_string(*r.max_tokens) + ".", "max_tokens");
    return out;
  }
  const std::int64_t cap = r.max_tokens ? *r.max_tokens : max_model_len - r.prompt_tokens;
  if (r.min_tokens > cap) {
    out.error = bad_request("min_tokens must be less than or equal to max_tokens=" + std::to_string(cap) +
                            ", got " + std::to_string(r.min_tokens) + ".", "min_tokens");
    return out;
  }
  ServePlan p;
  if (r.ignore_eos) {
    p.output_tokens = cap;
  } else {
    const auto natural = static_cast<std::int64_t>(std::llround(natural_length.sample(rng)));
    p.output_tokens = std::clamp<std::int64_t>(natural, std::max<std::int64_t>(1, r.min_tokens), cap);
  }
  p.finish_reason = p.output_tokens >= cap ? "length" : "stop";
  out.plan = p;
  return out;
}

std::string filler_token(std::int64_t index) {
  constexpr std::int64_t n = sizeof(kWords) / sizeof(kWords[0]);
  const std::string word = kWords[index % n];
  return index == 0 ? word : " " + word;
}

json token_chunk(Endpoint e, const ResponseIds& ids, const std::string& text,
                 const std::optional<std::string>& finish_reason) {
  json choice;
  choice["index"] = 0;
  if (e == Endpoint::kChat) {
    choice["delta"] = json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason ? json(*finish_reason) : json(nullptr);
  if (e == Endpoint::kCompletions) choice["stop_reason"] = nullptr;
  return json{{"id", ids.id},
              {"object", e == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
              {"created", ids.created},
              {"model", ids.model},
              {"choices", json::array({choice})}};
}

json role_chunk(const ResponseIds& ids) {
  json choice{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
              {"finish_reason", nullptr}};
  return json{{"id", ids.id}, {"object", "chat.completion.chunk"}, {"created", ids.created},
              {"model", ids.model}, {"choices", json::array({choice})}};
}

json usage_chunk(Endpoint e, const ResponseIds& ids, std::int64_t prompt, std::int64_t completion) {
  return json{{"id", ids.id},
              {"object", e == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
              {"created", ids.created},
              {"model", ids.model},
              {"choices", json::array()},
              {"usage", usage(prompt, completion)}};
}

json full_response(Endpoint e, const ResponseIds& ids, const std::string& text, const std::string& finish_reason,
                   std::int64_t prompt, std::int64_t completion) {
  json choice;
  choice["index"] = 0;
  if (e == Endpoint::kChat) {
    choice["message"] = json{{"role", "assistant"}, {"content", text}, {"tool_calls", json::array()}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  choice["stop_reason"] = nullptr;
  json u = usage(prompt, completion);
  u["prompt_tokens_details"] = nullptr;
  return json{{"id", ids.id},
              {"object", e == Endpoint::kChat ? "chat.completion" : "text_completion"},
              {"created", ids.created},
              {"model", ids.model},
              {"choices", json::array({choice})},
              {"usage", u}};
}

json model_list(const std::string& served_model, std::int64_t max_model_len, std::int64_t created) {
  json card{{"id", served_model},     {"object", "model"},  {"created", created},
            {"owned_by", "vllm"},     {"root", served_model}, {"parent", nullptr},
            {"max_model_len", max_model_len}, {"permission", json::array()}};
  return json{{"object", "list"}, {"data", json::array({card})}};
}

}  // namespace capsim::emulate
