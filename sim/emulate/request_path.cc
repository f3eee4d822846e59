#include "sim/emulate/request_path.h"

namespace capsim::emulate {
namespace {

namespace bhttp = boost::beast::http;

const char* type_of(int status) {
  switch (status) {
    case 401: return "AuthenticationError";
    case 403: return "PermissionDeniedError";
    case 413: return "RequestTooLargeError";
    case 415: return "UnsupportedMediaTypeError";
    case 431: return "RequestHeaderFieldsTooLargeError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

}  // namespace

Reply error_reply(const ApiError& e) { return Reply{e.status, "application/json", http::safe_dump(error_body(e))}; }

Front emulate_front(const HttpRequest& req, const http::GuardPolicy& policy) noexcept {
  Front out;
  try {
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = req.method() == bhttp::verb::get, post = req.method() == bhttp::verb::post;
    http::Needs needs = http::Needs::kNothing;
    bool known = true, method_ok = true;
    if (path == "/health") {
      out.route = Route::kHealth;
      method_ok = get;
    } else if (path == "/metrics") {
      out.route = Route::kMetrics;
      method_ok = get;
    } else if (path == "/v1/models") {
      out.route = Route::kModels;
      method_ok = get;
      needs = http::Needs::kToken;
    } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
      out.route = path == "/v1/completions" ? Route::kCompletions : Route::kChat;
      method_ok = post;
      needs = http::Needs::kJsonBodyAndToken;
    } else {
      known = false;
    }
    if (auto refusal = http::guard_request(http::headers_of(req), policy, known && method_ok ? needs : http::Needs::kNothing)) {
      out.refusal = error_reply(ApiError{refusal->status, type_of(refusal->status), refusal->message, std::nullopt});
    } else if (!known) {
      out.refusal = Reply{404, "application/json", R"({"detail":"Not Found"})"};  // FastAPI's words, as vLLM's
    } else if (!method_ok) {
      out.refusal = Reply{405, "application/json", R"({"detail":"Method Not Allowed"})"};
    }
  } catch (...) {  // the guard and route throw nothing of the client's; a fault of ours is a 500
    out.refusal = Reply{500, "application/json",
                        R"({"error":{"message":"internal error","type":"InternalServerError","param":null,"code":500}})"};
  }
  return out;
}

}  // namespace capsim::emulate
