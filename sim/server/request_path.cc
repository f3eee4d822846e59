#include "sim/server/request_path.h"

#include "sim/core/error.h"

namespace capsim::server {
namespace {

// Liveness and the page's static files are open to anyone who reaches the server; the API needs
// the token when one is set.
http::Needs needs_of(Endpoint e) {
  switch (e) {
    case Endpoint::kHealth:
    case Endpoint::kPage: return http::Needs::kNothing;
    case Endpoint::kCards:
    case Endpoint::kModels:
    case Endpoint::kEngines:
    case Endpoint::kServing:
    case Endpoint::kLinks:
    case Endpoint::kOpenApi: return http::Needs::kToken;
    default: return http::Needs::kJsonBodyAndToken;
  }
}

}  // namespace

Answer error_answer(int status, const std::string& message) {
  return Answer{status, "application/json", error_json(status, message)};
}

Front front_of(const HttpRequest& req, const http::GuardPolicy& policy, const GetAnswers& get) noexcept {
  Front out;
  try {
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const std::string_view method(req.method_string().data(), req.method_string().size());
    Endpoint e{};
    try {
      e = route(method, path);
    } catch (const HttpError& x) {
      // Unknown paths are answered 404 only to requests the guard lets through, so that a page
      // elsewhere learns nothing of the server, not even which paths it has.
      if (auto refusal = http::guard_request(http::headers_of(req), policy, http::Needs::kNothing)) {
        out.answer = error_answer(refusal->status, refusal->message);
      } else {
        out.answer = error_answer(x.status(), x.what());
      }
      return out;
    }
    if (auto refusal = http::guard_request(http::headers_of(req), policy, needs_of(e))) {
      out.answer = error_answer(refusal->status, refusal->message);
      return out;
    }
    out.endpoint = e;
    if (e != Endpoint::kPage && !runs_on_pool(e)) out.answer = Answer{200, "application/json", get(e)};
  } catch (const std::exception& x) {
    out.answer = error_answer(500, std::string("internal error: ") + x.what());
  } catch (...) {
    out.answer = error_answer(500, "internal error");
  }
  return out;
}

Prepared prepare_or_refuse(Endpoint e, std::string_view body, const Limits& limits) noexcept {
  Prepared out;
  try {
    out.job = prepare(e, body, limits);
  } catch (const HttpError& x) {
    out.refusal = error_answer(x.status(), x.what());
  } catch (const Error& x) {
    out.refusal = error_answer(400, x.what());
  } catch (const std::exception& x) {
    // Validation that failed inside a library (a JSON type error, a range check) is the
    // client's input still: 400 with the library's words.
    out.refusal = error_answer(400, x.what());
  } catch (...) {
    out.refusal = error_answer(500, "internal error while reading the request");
  }
  return out;
}

}  // namespace capsim::server
