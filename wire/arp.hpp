// ARP for IPv4 over Ethernet (RFC 826): the only hardware/protocol pair RoCE hosts use.
#pragma once

#include <cstdint>
#include <span>

#include "wire/error.hpp"
#include "wire/ethernet.hpp"
#include "wire/field.hpp"
#include "wire/ipv4.hpp"

namespace wire {

struct Arp {
  static constexpr std::size_t length = 28;
  using hardware_type = Field<0, 2>;  // 1 = Ethernet
  using protocol_type = Field<2, 2>;  // 0x0800 = IPv4
  using hardware_length = Field<4, 1>;
  using protocol_length = Field<5, 1>;
  using operation = Field<6, 2>;  // 1 = request, 2 = reply
  static constexpr std::size_t sender_mac = 8, sender_ip = 14, target_mac = 18, target_ip = 24;
  static constexpr std::uint16_t request = 1, reply = 2;
};

struct ArpRepr {
  std::uint16_t operation = Arp::request;
  MacAddress sender_mac{};
  Ipv4Address sender_ip{};
  MacAddress target_mac{};
  Ipv4Address target_ip{};

  // Refuses anything but Ethernet/IPv4 ARP with 6- and 4-byte addresses.
  static Result<ArpRepr> parse(std::span<const std::uint8_t> b) {
    if (b.size() < Arp::length) return Error::truncated;
    const std::uint8_t* p = b.data();
    if (Arp::hardware_type::get(p) != 1 || Arp::protocol_type::get(p) != ethertype::ipv4 ||
        Arp::hardware_length::get(p) != 6 || Arp::protocol_length::get(p) != 4)
      return Error::bad_version;
    ArpRepr r;
    r.operation = Arp::operation::get(p);
    copy_from(p + Arp::sender_mac, r.sender_mac);
    copy_from(p + Arp::sender_ip, r.sender_ip);
    copy_from(p + Arp::target_mac, r.target_mac);
    copy_from(p + Arp::target_ip, r.target_ip);
    return r;
  }

  void emit(std::uint8_t* out) const {
    Arp::hardware_type::set(out, 1);
    Arp::protocol_type::set(out, ethertype::ipv4);
    Arp::hardware_length::set(out, 6);
    Arp::protocol_length::set(out, 4);
    Arp::operation::set(out, operation);
    copy_to(sender_mac, out + Arp::sender_mac);
    copy_to(sender_ip, out + Arp::sender_ip);
    copy_to(target_mac, out + Arp::target_mac);
    copy_to(target_ip, out + Arp::target_ip);
  }

  friend bool operator==(const ArpRepr&, const ArpRepr&) = default;

 private:
  template <typename A>
  static void copy_from(const std::uint8_t* p, A& a) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = p[i];
  }
  template <typename A>
  static void copy_to(const A& a, std::uint8_t* p) {
    for (std::size_t i = 0; i < a.size(); ++i) p[i] = a[i];
  }
};

}  // namespace wire
