// The TCP header builder (wire/tcp.hpp): fields as set, and a checksum a receiver accepts.
#include "wire/tcp.hpp"

#include <catch2/catch.hpp>
#include <vector>

#include "wire/inet_checksum.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"

namespace {

using Bytes = std::vector<std::uint8_t>;

// A receiver's check (RFC 9293 s3.1): the sum over the pseudo-header and the whole segment
// folds to zero.
bool checksum_ok(std::span<const std::uint8_t> src, std::span<const std::uint8_t> dst,
                 std::span<const std::uint8_t> segment) {
  const auto length = static_cast<std::uint32_t>(segment.size());
  return wire::inet_fold(wire::inet_sum(segment, wire::pseudo_header_sum(src, dst, wire::ip_proto::tcp, length))) == 0;
}

}  // namespace

TEST_CASE("the receiver's checksum check accepts a SYN Linux sent", "[wire][tcp]") {
  // 10.10.10.26:38036 > 10.10.10.27:18515 SYN with MSS, SACK_PERM, timestamps and window
  // scale, from a capture of a real NIC (checksum 0x4227, verified by tshark).
  const Bytes segment{0x94, 0x94, 0x48, 0x53, 0xd8, 0x36, 0x2d, 0xe3, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02,
                      0xfa, 0xf0, 0x42, 0x27, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a,
                      0x6d, 0x4f, 0x92, 0x4e, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07};
  const wire::Ipv4Address src{10, 10, 10, 26}, dst{10, 10, 10, 27};
  CHECK(checksum_ok(src, dst, segment));
  Bytes flipped = segment;
  flipped[5] ^= 1;
  CHECK_FALSE(checksum_ok(src, dst, flipped));
}

TEST_CASE("TcpRepr writes the fields it holds and a checksum that verifies", "[wire][tcp]") {
  const wire::Ipv4Address src4{10, 0, 0, 1}, dst4{10, 0, 0, 2};
  wire::Ipv6Address src6{}, dst6{};
  src6[0] = dst6[0] = 0xfd;
  src6[15] = 1;
  dst6[15] = 2;
  const bool v6 = GENERATE(false, true);
  const std::span<const std::uint8_t> src = v6 ? std::span<const std::uint8_t>(src6) : src4;
  const std::span<const std::uint8_t> dst = v6 ? std::span<const std::uint8_t>(dst6) : dst4;
  const Bytes payload = GENERATE(Bytes{}, Bytes{1, 2, 3}, Bytes(1460, 0xA5));
  const bool syn = GENERATE(false, true);
  INFO("IPv6 " << v6 << ", payload " << payload.size() << ", SYN " << syn);

  wire::TcpRepr t;
  t.src_port = 40001;
  t.dst_port = 5001;
  t.seq = 0xFFFFFFF0;
  t.ack = 0x12345678;
  t.flags = syn ? wire::Tcp::syn | wire::Tcp::ack_flag : wire::Tcp::psh | wire::Tcp::ack_flag;
  t.window = 0x1234;
  t.mss = syn ? 1460 : 0;
  Bytes segment(t.header_length() + payload.size(), 0xEE);  // no byte left as it was
  std::copy(payload.begin(), payload.end(), segment.begin() + static_cast<std::ptrdiff_t>(t.header_length()));
  t.emit(segment.data(), src, dst, payload);

  const auto view = wire::TcpView::check(segment);
  REQUIRE(view);
  CHECK(view->src_port() == 40001);
  CHECK(view->dst_port() == 5001);
  CHECK(view->seq() == 0xFFFFFFF0);
  CHECK(view->ack() == 0x12345678);
  CHECK(view->flags() == t.flags);
  CHECK(view->header_length() == (syn ? 24u : 20u));
  CHECK(wire::Tcp::window::get(segment.data()) == 0x1234);
  CHECK(segment[12] == (syn ? 0x60 : 0x50));  // data offset; reserved bits zero
  CHECK(wire::Tcp::urgent::get(segment.data()) == 0);
  if (syn) CHECK(Bytes(segment.begin() + 20, segment.begin() + 24) == Bytes{0x02, 0x04, 0x05, 0xb4});
  CHECK(view->payload().size() == payload.size());
  CHECK(checksum_ok(src, dst, segment));
}
