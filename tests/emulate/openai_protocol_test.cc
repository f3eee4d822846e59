// `capsim emulate`'s request parsing, serving plan and response objects
// (sim/emulate/openai_protocol.h): token estimates worked by hand, vLLM's error statuses and
// messages, and the chunk shapes the OpenAI clients read.
#include "sim/emulate/openai_protocol.h"

#include <catch2/catch.hpp>

namespace {

using namespace capsim;
using namespace capsim::emulate;
using json = nlohmann::ordered_json;

const Distribution kFixed100 = Distribution::fixed(100, Distribution::Unit::kTokens);

ParsedRequest parsed(Endpoint e, const json& body) {
  ParseOutcome p = parse_request(e, body.dump());
  INFO(body.dump());
  REQUIRE(p.request);
  return *p.request;
}

}  // namespace

TEST_CASE("emulate protocol: text token estimate is ceil(code points / 4)", "[emulate]") {
  CHECK(estimate_text_tokens("") == 0);
  CHECK(estimate_text_tokens("a") == 1);
  CHECK(estimate_text_tokens("abcd") == 1);
  CHECK(estimate_text_tokens("abcde") == 2);
  CHECK(estimate_text_tokens(std::string(4000, 'x')) == 1000);
  // "héllo" is 6 bytes but 5 code points: ceil(5/4) = 2 (bytes would also give 2; 8 x "é" is
  // 16 bytes, 8 code points: 2 tokens, not 4).
  CHECK(estimate_text_tokens("h\xC3\xA9llo") == 2);
  std::string eight;
  for (int i = 0; i < 8; ++i) eight += "\xC3\xA9";
  CHECK(estimate_text_tokens(eight) == 2);
}

TEST_CASE("emulate protocol: chat prompt = per message ceil(chars/4) + 4, plus 3", "[emulate]") {
  // system "You are terse." (14 chars -> 4) + user 7,972 chars (-> 1,993): 4 + 4 + 1,993 + 4 + 3 = 2,008.
  const ParsedRequest r = parsed(Endpoint::kChat, {{"model", "m"},
                                                  {"messages", {{{"role", "system"}, {"content", "You are terse."}},
                                                                {{"role", "user"}, {"content", std::string(7972, 'a')}}}},
                                                  {"max_tokens", 64},
                                                  {"stream", true},
                                                  {"stream_options", {{"include_usage", true}}},
                                                  {"ignore_eos", true}});
  CHECK(r.prompt_tokens == 2008);
  CHECK(r.max_tokens == 64);
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.ignore_eos);
  // Content as a list of parts: only the text parts count ("abcdefgh" -> 2), + 4 + 3 = 9.
  const ParsedRequest parts = parsed(Endpoint::kChat,
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "abcd"}}, {{"type", "text"}, {"text", "efgh"}}}}}}}});
  CHECK(parts.prompt_tokens == 9);
  CHECK_FALSE(parts.max_tokens);
  // stream_options without include_usage: vLLM's default, true; no stream_options: false.
  CHECK(parsed(Endpoint::kChat, {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"stream", true},
                                 {"stream_options", json::object()}}).include_usage);
  CHECK_FALSE(parsed(Endpoint::kChat, {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"stream", true}}).include_usage);
  // max_completion_tokens wins over max_tokens in chat.
  CHECK(parsed(Endpoint::kChat, {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 5},
                                 {"max_completion_tokens", 7}}).max_tokens == 7);
}

TEST_CASE("emulate protocol: a completion without max_tokens is capped at 16, as vLLM's", "[emulate]") {
  // vLLM's CompletionRequest.max_tokens defaults to 16; chat has no such default (the cap is then
  // max_model_len - prompt), and an explicit null means no cap in both.
  CHECK(parsed(Endpoint::kCompletions, {{"prompt", "hi"}}).max_tokens == 16);
  CHECK_FALSE(parsed(Endpoint::kCompletions, {{"prompt", "hi"}, {"max_tokens", nullptr}}).max_tokens);
  CHECK(parsed(Endpoint::kCompletions, {{"prompt", "hi"}, {"max_tokens", 300}}).max_tokens == 300);
  CHECK_FALSE(parsed(Endpoint::kChat, {{"messages", {{{"role", "user"}, {"content", "x"}}}}}).max_tokens);
  // With ignore_eos the answer is those 16 tokens, ended by the cap.
  ParsedRequest r = parsed(Endpoint::kCompletions, {{"prompt", {1, 2, 3, 4}}, {"ignore_eos", true}});
  Rng rng(1);
  const PlanOutcome p = plan_request(r, "m", 4096, kFixed100, rng);
  REQUIRE(p.plan);
  CHECK(p.plan->output_tokens == 16);
  CHECK(p.plan->finish_reason == "length");
}

TEST_CASE("emulate protocol: completion prompts as text or token ids", "[emulate]") {
  CHECK(parsed(Endpoint::kCompletions, {{"prompt", "abcdefghi"}}).prompt_tokens == 3);
  CHECK(parsed(Endpoint::kCompletions, {{"prompt", {1, 2, 3, 4, 5}}}).prompt_tokens == 5);
  CHECK(parsed(Endpoint::kCompletions, {{"prompt", {{1, 2, 3}}}}).prompt_tokens == 3);
  CHECK(parsed(Endpoint::kCompletions, {{"prompt", {"abcd"}}}).prompt_tokens == 1);
  ParseOutcome batch = parse_request(Endpoint::kCompletions, json{{"prompt", {"a", "b"}}}.dump());
  REQUIRE(batch.error);
  CHECK(batch.error->status == 400);
  CHECK(batch.error->param == "prompt");
}

TEST_CASE("emulate protocol: malformed requests are 400 BadRequestError naming the field", "[emulate]") {
  const auto err = [](Endpoint e, const std::string& body) {
    ParseOutcome p = parse_request(e, body);
    REQUIRE(p.error);
    CHECK(p.error->status == 400);
    CHECK(p.error->type == "BadRequestError");
    return *p.error;
  };
  CHECK(err(Endpoint::kChat, "{not json").message == "the request body is not a JSON object");
  CHECK(err(Endpoint::kChat, "{}").param == "messages");
  CHECK(err(Endpoint::kChat, R"({"messages": []})").param == "messages");
  CHECK(err(Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": "ten"})").param == "max_tokens");
  CHECK(err(Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": -1})").param == "max_tokens");
  CHECK(err(Endpoint::kCompletions, R"({"prompt": "x", "n": 2})").param == "n");
  CHECK(err(Endpoint::kCompletions, R"({"prompt": "x", "stream": "yes"})").param == "stream");
  const json body = error_body(err(Endpoint::kCompletions, R"({"prompt": 7})"));
  CHECK(body["error"]["code"] == 400);
  CHECK(body["error"]["type"] == "BadRequestError");
  CHECK(body["error"]["param"] == "prompt");
}

TEST_CASE("emulate protocol: vLLM's context-length errors and the output length", "[emulate]") {
  Rng rng(1);
  ParsedRequest r;
  r.prompt_tokens = 1000;
  // max_model_len 4096: 3,096 tokens of room.
  r.max_tokens = 3097;
  PlanOutcome p = plan_request(r, "m", 4096, kFixed100, rng);
  REQUIRE(p.error);
  CHECK(p.error->status == 400);
  CHECK(p.error->message ==
        "'max_tokens' or 'max_completion_tokens' is too large: 3097. This model's maximum context length is "
        "4096 tokens and your request has 1000 input tokens (3097 > 4096 - 1000).");
  r.max_tokens = 3096;  // exactly fits; ignore_eos: all of it, stopped by length
  r.ignore_eos = true;
  p = plan_request(r, "m", 4096, kFixed100, rng);
  REQUIRE(p.plan);
  CHECK(p.plan->output_tokens == 3096);
  CHECK(p.plan->finish_reason == "length");
  // Without ignore_eos the answer is the scenario's length (100) when under the cap ...
  r.ignore_eos = false;
  p = plan_request(r, "m", 4096, kFixed100, rng);
  CHECK(p.plan->output_tokens == 100);
  CHECK(p.plan->finish_reason == "stop");
  // ... cut at max_tokens (length), raised to min_tokens.
  r.max_tokens = 40;
  CHECK(plan_request(r, "m", 4096, kFixed100, rng).plan->output_tokens == 40);
  CHECK(plan_request(r, "m", 4096, kFixed100, rng).plan->finish_reason == "length");
  r.max_tokens.reset();
  r.min_tokens = 150;
  CHECK(plan_request(r, "m", 4096, kFixed100, rng).plan->output_tokens == 150);
  // No max_tokens, ignore_eos: vLLM's default cap, max_model_len - prompt = 3,096.
  r.min_tokens = 0;
  r.ignore_eos = true;
  CHECK(plan_request(r, "m", 4096, kFixed100, rng).plan->output_tokens == 3096);
  // A prompt that fills the context.
  r.prompt_tokens = 4096;
  p = plan_request(r, "m", 4096, kFixed100, rng);
  REQUIRE(p.error);
  CHECK(p.error->message ==
        "This model's maximum context length is 4096 tokens. However, your request has 4096 input tokens. "
        "Please reduce the length of the input messages.");
  // Another model's name: 404 NotFoundError.
  r.prompt_tokens = 10;
  r.model = "gpt-4";
  p = plan_request(r, "m", 4096, kFixed100, rng);
  REQUIRE(p.error);
  CHECK(p.error->status == 404);
  CHECK(p.error->type == "NotFoundError");
  CHECK(p.error->message == "The model `gpt-4` does not exist.");
}

TEST_CASE("emulate protocol: chunks and responses have the OpenAI shapes", "[emulate]") {
  const ResponseIds ids{"chatcmpl-1", 1700000000, "m"};
  const json c = token_chunk(Endpoint::kChat, ids, " the", std::nullopt);
  CHECK(c["object"] == "chat.completion.chunk");
  CHECK(c["choices"][0]["delta"]["content"] == " the");
  CHECK(c["choices"][0]["finish_reason"].is_null());
  CHECK(token_chunk(Endpoint::kChat, ids, "x", std::string("length"))["choices"][0]["finish_reason"] == "length");
  CHECK(role_chunk(ids)["choices"][0]["delta"]["role"] == "assistant");
  const json u = usage_chunk(Endpoint::kChat, ids, 2000, 64);
  CHECK(u["choices"].empty());
  CHECK(u["usage"]["prompt_tokens"] == 2000);
  CHECK(u["usage"]["completion_tokens"] == 64);
  CHECK(u["usage"]["total_tokens"] == 2064);
  const json t = token_chunk(Endpoint::kCompletions, {"cmpl-1", 1, "m"}, "a", std::nullopt);
  CHECK(t["object"] == "text_completion");
  CHECK(t["choices"][0]["text"] == "a");
  const json full = full_response(Endpoint::kChat, ids, "capsim emulates", "stop", 12, 2);
  CHECK(full["object"] == "chat.completion");
  CHECK(full["choices"][0]["message"]["content"] == "capsim emulates");
  CHECK(full["usage"]["total_tokens"] == 14);
  // One word per token: 3 tokens of filler are "capsim emulates the".
  CHECK(filler_token(0) + filler_token(1) + filler_token(2) == "capsim emulates the");
  const json models = model_list("m", 4096, 5);
  CHECK(models["data"][0]["id"] == "m");
  CHECK(models["data"][0]["max_model_len"] == 4096);
}

TEST_CASE("emulate protocol: a prompt's content segments add up to its tokens and repeat as its content does",
          "[emulate]") {
  const auto total = [](const std::vector<ContentSegment>& s) {
    std::int64_t n = 0;
    for (const auto& x : s) n += x.tokens;
    return n;
  };
  // Chat: one segment a message (ceil(chars/4) + 4), then the reply header (3).
  const json turn1 = {{"messages", {{{"role", "system"}, {"content", std::string(400, 's')}},
                                    {{"role", "user"}, {"content", "How many GPUs?"}}}}};
  const ParsedRequest a = parsed(Endpoint::kChat, turn1);
  REQUIRE(a.prompt_segments.size() == 3);
  CHECK(a.prompt_segments[0].tokens == 104);  // 400 / 4 + 4
  CHECK(a.prompt_segments[1].tokens == 8);    // ceil(14 / 4) + 4
  CHECK(a.prompt_segments[2].tokens == 3);
  CHECK(total(a.prompt_segments) == a.prompt_tokens);
  // The next turn resends the history: its first two segments are the same content.
  json turn2 = turn1;
  turn2["messages"].push_back({{"role", "assistant"}, {"content", "capsim emulates the"}});
  turn2["messages"].push_back({{"role", "user"}, {"content", "And for 500 users?"}});
  const ParsedRequest b = parsed(Endpoint::kChat, turn2);
  REQUIRE(b.prompt_segments.size() == 5);
  CHECK(b.prompt_segments[0].content == a.prompt_segments[0].content);
  CHECK(b.prompt_segments[1].content == a.prompt_segments[1].content);
  CHECK(b.prompt_segments[2].content != a.prompt_segments[2].content);  // the assistant's turn, not the header
  CHECK(total(b.prompt_segments) == b.prompt_tokens);
  // The same text in another role is other content.
  const json as_user = {{"messages", {{{"role", "user"}, {"content", std::string(400, 's')}}}}};
  CHECK(parsed(Endpoint::kChat, as_user).prompt_segments[0].content != a.prompt_segments[0].content);

  // Text: pieces of 64 code points (16 tokens): 150 chars = 64 + 64 + 22 -> 16 + 16 + 6 = 38 tokens.
  const std::string text(150, 'q');
  const ParsedRequest t = parsed(Endpoint::kCompletions, json{{"prompt", text}});
  REQUIRE(t.prompt_segments.size() == 3);
  CHECK(t.prompt_segments[2].tokens == 6);
  CHECK(total(t.prompt_segments) == t.prompt_tokens);
  CHECK(t.prompt_tokens == 38);
  // A prompt that extends it shares its two whole pieces; a multi-byte character counts once.
  const ParsedRequest u = parsed(Endpoint::kCompletions, json{{"prompt", text + "\xc3\xa9tendu"}});
  CHECK(u.prompt_segments[0].content == t.prompt_segments[0].content);
  CHECK(u.prompt_segments[1].content == t.prompt_segments[1].content);
  CHECK(total(u.prompt_segments) == u.prompt_tokens);
  CHECK(u.prompt_tokens == 39);  // 156 code points: the two-byte é counts once

  // Token ids: pieces of 16 ids; 40 ids -> 16 + 16 + 8.
  std::vector<int> ids(40);
  for (int i = 0; i < 40; ++i) ids[i] = 1000 + i;
  const ParsedRequest k = parsed(Endpoint::kCompletions, json{{"prompt", ids}});
  REQUIRE(k.prompt_segments.size() == 3);
  CHECK(k.prompt_segments[2].tokens == 8);
  CHECK(total(k.prompt_segments) == 40);
  CHECK(content_id("") != 0);
  CHECK(content_id("a") == 0xaf63dc4c8601ec8cULL);  // FNV-1a 64 of "a" (the published test vector)
}
