// Shared by the HTTP fuzz targets: the input bytes through Beast's request parser with a
// server's limits, as its session reads them. No request when Beast refuses the bytes (the
// servers answer 400 and close).
#pragma once

#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace capsim::fuzz {

inline std::optional<boost::beast::http::request<boost::beast::http::string_body>> parse_http_request(
    const std::uint8_t* data, std::size_t size, std::size_t body_limit) {
  namespace http = boost::beast::http;
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(body_limit);
  parser.eager(true);
  boost::beast::error_code ec;
  std::size_t used = 0;
  while (used < size && !parser.is_done()) {
    const std::size_t n = parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (ec || n == 0) break;
    used += n;
  }
  // End of input: a body delimited by the connection closing ends here (Beast requires bytes first).
  if (!ec && !parser.is_done() && parser.got_some()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return std::nullopt;
  return parser.release();
}

}  // namespace capsim::fuzz
