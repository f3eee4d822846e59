// The last step of a lingering close, shared by serve's and emulate's sessions: after an answer
// that ends the connection (often a refusal of a request whose body is still arriving), the
// session shuts its sending side and then reads and drops whatever the client still sends until
// the client closes or the stream's timer (set by the caller) expires. Closing at once instead
// would make the kernel answer the unread bytes with a reset, and the client would read that
// reset instead of the answer.
#pragma once

#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <cstddef>
#include <memory>

namespace capsim::http {

// Reads into `buffer` and drops it until an error (the client's close, a reset, or the timer's
// expiry), then closes the socket. `owner` (the session holding `stream` and `buffer`) is kept
// alive until then. REQUIRES: no other read pending on `stream`.
template <class Owner>
void drain_then_close(std::shared_ptr<Owner> owner, boost::beast::tcp_stream& stream,
                      boost::beast::flat_buffer& buffer) {
  buffer.clear();
  stream.async_read_some(buffer.prepare(16 * 1024),
                         [owner = std::move(owner), &stream, &buffer](boost::beast::error_code ec, std::size_t) {
                           if (!ec) return drain_then_close(owner, stream, buffer);
                           boost::beast::error_code ignored;
                           stream.socket().close(ignored);
                         });
}

}  // namespace capsim::http
