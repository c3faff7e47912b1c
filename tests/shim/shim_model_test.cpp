// The pure parts of the shim (address, identity, attributes) and the launcher's checks; the
// netdev rules against a made-up list of interfaces. Plus ibv_init_ah_from_wc's reading of the
// GRH area, which needs the library's device.
#include <endian.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <string>
#include <vector>

#include "tools/softrdma/run_command.hpp"
#include "verbs-shim/attributes.hpp"
#include "verbs-shim/identity.hpp"
#include "verbs-shim/verbs_api.hpp"

using namespace softrdma;
using namespace softrdma::shim;

namespace {

IpAddress ip(const char* text) {
  std::optional<IpAddress> a = parse_address(text);
  REQUIRE(a.has_value());
  return *a;
}

// ADDRESS/LENGTH as getifaddrs would list it (an IPv4 mask gets the 96 ones of the mapped form).
LocalInterface::Prefix prefix(const char* address, unsigned length) {
  LocalInterface::Prefix p{ip(address), {}};
  const unsigned bits = p.address.is_v4() ? 96 + length : length;
  for (unsigned i = 0; i < bits; ++i) p.mask.bytes[i / 8] |= static_cast<std::uint8_t>(0x80u >> (i % 8));
  return p;
}

// A machine's interfaces, for the netdev rules without touching the real ones.
const std::vector<LocalInterface>& fake_interfaces() {
  static const std::vector<LocalInterface> list = {
      {"lo", 1, {prefix("127.0.0.1", 8), prefix("::1", 128)}},
      {"eth0", 2, {prefix("10.0.0.5", 24), prefix("fe80::5", 64), prefix("2001:db8::5", 64)}},
      {"v6only", 3, {prefix("fe80::7", 64), prefix("fd53:7264:6d61::7", 64), prefix("2001:db8::7", 128)}},
      {"v4second", 4, {prefix("2001:db8:1::9", 64), prefix("10.1.1.9", 16)}},
      {"linklocal", 5, {prefix("fe80::3", 64)}},
      {"bare", 6, {}},
      {"lo6", 7, {prefix("::1", 128)}},
  };
  return list;
}

AddressRequest env(const char* ip_value, const char* netdev_value = nullptr) {
  return {{kAddressVariable, ip_value}, {kNetdevVariable, netdev_value}};
}

AddressChoice from_env(const char* ip_value, const char* netdev_value = nullptr) {
  return choose_address(env(ip_value, netdev_value), fake_interfaces());
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

}  // namespace

TEST_CASE("address parsing is strict, IPv4 and IPv6", "[shim-model]") {
  CHECK(parse_address("10.0.0.1") == IpAddress::v4(10, 0, 0, 1));
  CHECK(parse_address("255.255.255.255").has_value());
  CHECK(parse_address("fd53:7264:6d61::1") ==
        IpAddress{{0xfd, 0x53, 0x72, 0x64, 0x6d, 0x61, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}});
  CHECK(parse_address("::1").has_value());
  // An IPv4-mapped IPv6 address is the IPv4 address.
  CHECK(parse_address("::ffff:10.0.0.1") == IpAddress::v4(10, 0, 0, 1));
  CHECK(parse_address("::ffff:a00:1") == IpAddress::v4(10, 0, 0, 1));
  for (const char* bad : {"10.1", "256.0.0.1", "localhost", "", "10.0.0.1 ", " ::1", "fe80::1%lo", "fd00::/64",
                          "fd00::1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9:0:1:2:3:4:5:6:7:8:9:0:1:2:3:4:5:6:7:8:9"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_address(bad));
  }
  CHECK(to_string(IpAddress::v4(192, 168, 0, 7)) == "192.168.0.7");
  CHECK(to_string(ip("FD53:7264:6D61:0:0:0:0:1")) == "fd53:7264:6d61::1");
  CHECK(IpAddress::v4(1, 2, 3, 4).is_v4());
  CHECK_FALSE(ip("::1").is_v4());
  CHECK_FALSE(ip("::1.2.3.4").is_v4());  // the deprecated IPv4-compatible form is IPv6
}

TEST_CASE("which addresses a device can hold", "[shim-model]") {
  for (const char* good : {"10.0.0.1", "127.0.0.1", "::1", "fd53:7264:6d61::1", "2001:db8::1", "::ffff:10.0.0.1"}) {
    CAPTURE(good);
    CHECK(why_unusable(ip(good)).empty());
  }
  CHECK(why_unusable(ip("0.0.0.0")) == "is not a unicast IPv4 address");
  CHECK(why_unusable(ip("::ffff:0.0.0.0")) == "is not a unicast IPv4 address");
  CHECK(why_unusable(ip("224.0.0.1")) == "is not a unicast IPv4 address");
  CHECK(why_unusable(ip("255.255.255.255")) == "is not a unicast IPv4 address");
  CHECK(why_unusable(ip("::")) == "is not a unicast IPv6 address");
  CHECK(why_unusable(ip("ff02::1")) == "is not a unicast IPv6 address");
  CHECK(why_unusable(ip("fe80::1")).find("link-local") != std::string::npos);
  CHECK(why_unusable(ip("febf::1")).find("link-local") != std::string::npos);  // fe80::/10
  CHECK(why_unusable(ip("fec0::1")).empty());
}

TEST_CASE("SOFTRDMA_IP: unset, IPv4, IPv6, and each way to get it wrong", "[shim-model]") {
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    AddressChoice c = from_env(unset, unset);
    CHECK(c.ok());
    CHECK_FALSE(c.address);  // the first free 127.0.0.N
  }
  CHECK(from_env("10.9.8.7").address == IpAddress::v4(10, 9, 8, 7));
  CHECK(from_env("::ffff:10.9.8.7").address == IpAddress::v4(10, 9, 8, 7));
  CHECK(from_env("fd53:7264:6d61::1").address == ip("fd53:7264:6d61::1"));
  for (const char* bad : {"10.9.8", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::", "ff02::1", "fe80::1", "fe80::1%lo",
                          "localhost", "::ffff:224.0.0.1"}) {
    CAPTURE(bad);
    AddressChoice c = from_env(bad);
    CHECK_FALSE(c.address);
    CHECK(c.error.find("SOFTRDMA_IP='" + std::string(bad) + "' ") == 0);
    CHECK(one_line(c.error));
  }
  CHECK(from_env("10.9.8").error == "SOFTRDMA_IP='10.9.8' is not an IPv4 or IPv6 address");
  CHECK(from_env("ff02::1").error == "SOFTRDMA_IP='ff02::1' is not a unicast IPv6 address");
  // Flags are named as flags.
  AddressChoice flag = choose_address({{"--ip", "10.0"}, {"--netdev", nullptr}}, fake_interfaces());
  CHECK(flag.error == "--ip '10.0' is not an IPv4 or IPv6 address");
}

TEST_CASE("SOFTRDMA_NETDEV: the interface's first IPv4 address, else its first global IPv6 one", "[shim-model]") {
  CHECK(from_env(nullptr, "lo").address == IpAddress::v4(127, 0, 0, 1));
  CHECK(from_env(nullptr, "eth0").address == IpAddress::v4(10, 0, 0, 5));
  CHECK(from_env(nullptr, "v4second").address == IpAddress::v4(10, 1, 1, 9));  // IPv4 first, wherever listed
  CHECK(from_env(nullptr, "v6only").address == ip("fd53:7264:6d61::7"));       // not the link-local one
  CHECK(from_env("", "v6only").address == ip("fd53:7264:6d61::7"));            // an empty SOFTRDMA_IP is unset

  CHECK(from_env(nullptr, "eth9").error == "SOFTRDMA_NETDEV='eth9': no such network interface");
  for (const char* no_address : {"bare", "linklocal", "lo6"}) {
    CAPTURE(no_address);
    CHECK(from_env(nullptr, no_address).error ==
          "SOFTRDMA_NETDEV='" + std::string(no_address) + "': the interface has no IPv4 or global IPv6 address");
  }
  AddressChoice both = from_env("10.0.0.5", "eth0");
  CHECK_FALSE(both.address);
  CHECK(both.error.find("SOFTRDMA_IP and SOFTRDMA_NETDEV are both set") == 0);
  CHECK(one_line(both.error));
  AddressChoice flags = choose_address({{"--ip", "10.0.0.5"}, {"--netdev", "eth0"}}, fake_interfaces());
  CHECK(flags.error.find("--ip and --netdev are both set") == 0);
  CHECK(choose_address({{"--ip", nullptr}, {"--netdev", "eth9"}}, fake_interfaces()).error ==
        "--netdev 'eth9': no such network interface");
}

TEST_CASE("the interface holding an address: an exact match, else the first prefix", "[shim-model]") {
  const auto& all = fake_interfaces();
  auto name_of = [&](const char* address) {
    const LocalInterface* i = interface_holding(ip(address), all);
    return i != nullptr ? i->name : std::string("(none)");
  };
  CHECK(name_of("10.0.0.5") == "eth0");
  CHECK(name_of("10.0.0.77") == "eth0");      // in eth0's /24
  CHECK(name_of("127.11.12.13") == "lo");     // in lo's /8
  CHECK(name_of("2001:db8::99") == "eth0");   // in eth0's /64
  CHECK(name_of("2001:db8::7") == "v6only");  // exact, although eth0's /64 comes first
  CHECK(name_of("::1") == "lo");
  CHECK(name_of("192.168.1.1") == "(none)");
  CHECK(name_of("::ffff:1.2.3.4") == "(none)");  // an IPv4 address is in no IPv6 prefix
  CHECK(interface_holding(ip("fd53:7264:6d61::7"), all)->index == 3);
}

TEST_CASE("identity derived from an IPv4 address", "[shim-model]") {
  const IpAddress a = IpAddress::v4(10, 1, 2, 3);
  CHECK(roce_v2_gid(a) == Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3});
  CHECK(node_guid(a) == Guid{0x02, 0x00, 10, 0xff, 0xfe, 1, 2, 3});
  CHECK(node_guid(kDefaultAddress) == Guid{0x02, 0x00, 0x7f, 0xff, 0xfe, 0x00, 0x00, 0x01});
  DeviceIdentity id = make_identity(a, Interface{7, 1500});
  CHECK(id.gids[0] == roce_v2_gid(a));
  for (std::size_t i = 1; i < id.gids.size(); ++i) CHECK(id.gids[i] == Gid{});
  CHECK(id.ifindex == 7);
  CHECK(id.active_mtu_bytes == 1024);
  CHECK(make_identity(a, Interface{7, 4096 + 72}).active_mtu_bytes == 4096);
  CHECK(make_identity(a, std::nullopt).ifindex == 0);
}

TEST_CASE("identity derived from an IPv6 address", "[shim-model]") {
  const IpAddress a = ip("fd53:7264:6d61::1");
  CHECK(roce_v2_gid(a) == Gid{0xfd, 0x53, 0x72, 0x64, 0x6d, 0x61, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});  // the address
  // EUI-64 of the MAC of the low 48 bits, with the local bit set and the group bit clear.
  CHECK(node_guid(a) == Guid{0x02, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01});
  CHECK(node_guid(ip("fd53:7264:6d61::2")) == Guid{0x02, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x02});
  CHECK(node_guid(ip("2001:db8::3344:5566:7788")) == Guid{0x32, 0x44, 0x55, 0xff, 0xfe, 0x66, 0x77, 0x88});
  CHECK(node_guid(ip("2001:db8::1:2:3")) == Guid{0x02, 0x01, 0x00, 0xff, 0xfe, 0x02, 0x00, 0x03});
  DeviceIdentity id = make_identity(a, Interface{4, 1500});
  CHECK(id.address == a);
  CHECK(id.gids[0] == roce_v2_gid(a));
  for (std::size_t i = 1; i < id.gids.size(); ++i) CHECK(id.gids[i] == Gid{});  // exactly the bound address
  CHECK(id.ifindex == 4);
  CHECK(id.active_mtu_bytes == 1024);
  // 20 bytes more of IP header than IPv4: this MTU carries 4096-byte packets over IPv4 only.
  CHECK(make_identity(a, Interface{4, 4096 + 72}).active_mtu_bytes == 2048);
  CHECK(make_identity(a, std::nullopt).active_mtu_bytes == 1024);
}

TEST_CASE("the active MTU is the largest IB MTU whose packets fit the IP MTU", "[shim-model]") {
  CHECK(ib_mtu_bytes_for(1500, /*ipv4=*/true) == 1024);
  CHECK(ib_mtu_bytes_for(9000, true) == 4096);
  CHECK(ib_mtu_bytes_for(65536, true) == 4096);  // loopback
  CHECK(ib_mtu_bytes_for(4096 + 72, true) == 4096);
  CHECK(ib_mtu_bytes_for(4096 + 71, true) == 2048);
  CHECK(ib_mtu_bytes_for(600, true) == 512);
  CHECK(ib_mtu_bytes_for(100, true) == 256);
  CHECK(ib_mtu_bytes_for(0, true) == 1024);  // unknown interface
  // IPv6: a 40-byte header instead of 20.
  CHECK(ib_mtu_bytes_for(1500, /*ipv4=*/false) == 1024);
  CHECK(ib_mtu_bytes_for(65536, false) == 4096);
  CHECK(ib_mtu_bytes_for(4096 + 92, false) == 4096);
  CHECK(ib_mtu_bytes_for(4096 + 91, false) == 2048);
  CHECK(ib_mtu_bytes_for(1024 + 92, false) == 1024);
  CHECK(ib_mtu_bytes_for(1024 + 91, false) == 512);
  CHECK(ib_mtu_bytes_for(0, false) == 1024);
}

TEST_CASE("loopback addresses belong to lo", "[shim-model]") {
  auto lo = find_interface(IpAddress::v4(127, 0, 0, 1));
  if (!lo) {
    WARN("no interface holds 127.0.0.1 (a fresh network namespace?): nothing to check");
    return;
  }
  CHECK(lo->index > 0);
  CHECK(lo->mtu >= 1500);
  auto other = find_interface(IpAddress::v4(127, 0, 0, 9));  // in lo's /8, not listed on it
  REQUIRE(other.has_value());
  CHECK(other->index == lo->index);
  if (auto lo6 = find_interface(ip("::1"))) CHECK(lo6->index == lo->index);  // unless IPv6 is disabled
}

TEST_CASE("the machine's interfaces: lo with its addresses", "[shim-model]") {
  const std::vector<LocalInterface> all = local_interfaces();
  auto lo = std::find_if(all.begin(), all.end(), [](const LocalInterface& i) { return i.name == "lo"; });
  REQUIRE(lo != all.end());
  CHECK(lo->index > 0);
  if (lo->prefixes.empty()) return;  // lo down in a fresh namespace
  CHECK(interface_address(*lo) == kDefaultAddress);
  CHECK(choose_address(env(nullptr, "lo")).address == kDefaultAddress);
  CHECK(choose_address(env(nullptr, "softrdma-no-such-if")).error.find("no such network interface") !=
        std::string::npos);
}

// ibv_init_ah_from_wc reads the 40-byte GRH area as the engine fills it: the IPv4 header in
// its last 20 bytes behind 20 zeros, or the IPv6 header.
TEST_CASE("ibv_init_ah_from_wc tells an IPv6 GRH from the IPv4 layout", "[shim-model]") {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(list != nullptr);
  REQUIRE(n == 1);
  ibv_context* ctx = ibv_open_device(list[0]);
  REQUIRE(ctx != nullptr);
  ibv_gid own;
  REQUIRE(ibv_query_gid(ctx, 1, 0, &own) == 0);
  ibv_wc wc{};
  wc.wc_flags = IBV_WC_GRH;
  ibv_ah_attr ah{};

  // IPv6, from a source whose 13th byte (byte 20 of the area) has 4 in its high nibble,
  // where the IPv4 layout keeps its version.
  ibv_grh grh{};
  grh.version_tclass_flow = htobe32((6u << 28) | (0x2eu << 20) | 0x12345);
  const IpAddress source = ip("2001:db8::4567:1");
  std::memcpy(grh.sgid.raw, source.bytes.data(), 16);
  grh.dgid = own;  // as if the device's address were IPv6: the table lookup is the same
  REQUIRE(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah) == 0);
  CHECK(std::memcmp(ah.grh.dgid.raw, source.bytes.data(), 16) == 0);
  CHECK(ah.grh.sgid_index == 0);
  CHECK(ah.grh.flow_label == 0x12345);
  CHECK(ah.grh.traffic_class == 0x2e);
  CHECK(ah.is_global == 1);

  // IPv4: 20 zero bytes, then the header (version 4, IHL 5), source 10.1.2.3, destination ours.
  std::array<std::uint8_t, 40> area{};
  area[20] = 0x45;
  area[21] = 0x08;
  const std::array<std::uint8_t, 4> src4{10, 1, 2, 3};
  std::memcpy(area.data() + 32, src4.data(), 4);
  std::memcpy(area.data() + 36, own.raw + 12, 4);
  std::memcpy(&grh, area.data(), sizeof grh);
  REQUIRE(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah) == 0);
  CHECK(std::memcmp(ah.grh.dgid.raw, IpAddress::v4(10, 1, 2, 3).bytes.data(), 16) == 0);
  CHECK(ah.grh.traffic_class == 0x08);

  // Neither header.
  std::memset(&grh, 0, sizeof grh);
  errno = 0;
  CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah) == -1);
  CHECK(errno == EPROTONOSUPPORT);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
}

TEST_CASE("softrdma run/devices: --ip and --netdev", "[shim-model]") {
  std::list<std::vector<std::string>> storage;  // the words the flags point into
  auto read = [&](std::vector<std::string> words, run::AddressFlags& flags, std::string& error) {
    std::vector<char*> argv;
    for (std::string& w : storage.emplace_back(std::move(words))) argv.push_back(w.data());
    int i = 0;
    const bool taken = run::read_address_flag(static_cast<int>(argv.size()), argv.data(), i, flags, error);
    return taken ? i : -1;  // the index of the option's last word
  };
  run::AddressFlags flags;
  std::string error;
  CHECK(read({"--ip", "fd00::1", "prog"}, flags, error) == 1);
  CHECK(std::string(flags.ip) == "fd00::1");
  CHECK(read({"--netdev=eth0"}, flags, error) == 0);
  CHECK(std::string(flags.netdev) == "eth0");
  CHECK(error.empty());
  CHECK(read({"--ipx", "1"}, flags, error) == -1);
  CHECK(read({"prog"}, flags, error) == -1);
  CHECK(read({"--netdev"}, flags, error) == 0);
  CHECK(error == "--netdev needs an interface name (e.g. --netdev eth0)");
  error.clear();
  CHECK(read({"--ip="}, flags, error) == 0);
  CHECK(error.find("--ip needs an address") == 0);

  // Given flags replace the inherited variables; without flags the variables are checked.
  ::setenv(kAddressVariable, "10.0.0.1", 1);
  ::setenv(kNetdevVariable, "lo", 1);
  CHECK(run::apply_address_flags({}).find("SOFTRDMA_IP and SOFTRDMA_NETDEV are both set") == 0);
  CHECK(run::apply_address_flags({"fd00::1", nullptr}).empty());
  CHECK(std::string(std::getenv(kAddressVariable)) == "fd00::1");
  CHECK(std::getenv(kNetdevVariable) == nullptr);
  CHECK(run::apply_address_flags({"fe80::1", nullptr}).find("--ip 'fe80::1' is a link-local") == 0);
  ::unsetenv(kAddressVariable);
}

TEST_CASE("attributes: a RoCEv2 port and engine-sized limits", "[shim-model]") {
  DeviceIdentity id = make_identity(IpAddress::v4(10, 0, 0, 2), Interface{3, 9000});
  ibv_port_attr p = port_attr(id);
  CHECK(p.state == IBV_PORT_ACTIVE);
  CHECK(p.active_mtu == IBV_MTU_4096);
  CHECK(p.link_layer == IBV_LINK_LAYER_ETHERNET);
  const core::TmCaps tm{64, 1023, 1024, 32};
  ibv_device_attr d = device_attr(id, {core::MulticastLimits{}, true, tm});
  CHECK(d.vendor_id == kVendorId);
  CHECK((d.vendor_id & 0x020000) != 0);  // the locally-administered bit: no vendor's OUI
  CHECK(d.max_mcast_grp == 64);
  CHECK(d.max_mcast_qp_attach == 64);
  CHECK(d.max_total_mcast_qp_attach == 64 * 64);
  CHECK((d.device_cap_flags & IBV_DEVICE_XRC) != 0);
  ibv_device_attr_ex with_tm = device_attr_ex(id, {core::MulticastLimits{}, true, tm});
  CHECK(with_tm.tm_caps.flags == IBV_TM_CAP_RC);
  CHECK(with_tm.tm_caps.max_num_tags == 1023);
  CHECK(with_tm.tm_caps.max_rndv_hdr_size == 64);
  ibv_device_attr_ex x = device_attr_ex(id, {{0, 0, 0}, false, {}});  // a link without multicast, XRC or TM
  CHECK((x.orig_attr.device_cap_flags & IBV_DEVICE_XRC) == 0);
  CHECK(x.tm_caps.flags == 0);
  CHECK(x.tm_caps.max_num_tags == 0);
  CHECK(x.xrc_odp_caps == 0);
  CHECK(x.phys_port_cnt_ex == d.phys_port_cnt);
  CHECK(x.orig_attr.max_mcast_grp == 0);
  CHECK(x.orig_attr.max_total_mcast_qp_attach == 0);
  CHECK(mtu_enum(2048) == IBV_MTU_2048);
}

TEST_CASE("softrdma run: program kinds", "[shim-model]") {
  CHECK(run::probe_program("/bin/sh") == run::ProgramKind::dynamic_elf);
  if (access("/sbin/ldconfig", R_OK) == 0) {  // Debian's ldconfig is static-pie
    CHECK(run::probe_program("/sbin/ldconfig") == run::ProgramKind::static_elf);
  }
  char path[] = "/tmp/shim_probe_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "#!/bin/sh\necho hi\n", 18) == 18);
  close(fd);
  CHECK(run::probe_program(path) == run::ProgramKind::script);
  FILE* f = std::fopen(path, "w");
  std::fputs("just text\n", f);
  std::fclose(f);
  CHECK(run::probe_program(path) == run::ProgramKind::unknown);
  std::remove(path);
  CHECK(run::probe_program("/nonexistent/program") == run::ProgramKind::unknown);
}

TEST_CASE("softrdma run: PROGRAM is found like execvp finds it", "[shim-model]") {
  auto sh = run::resolve_program("sh");
  REQUIRE(sh.has_value());
  CHECK(sh->find("/sh") != std::string::npos);
  CHECK(run::resolve_program("/bin/sh") == std::optional<std::string>("/bin/sh"));
  CHECK_FALSE(run::resolve_program("softrdma-no-such-program"));
  CHECK_FALSE(run::resolve_program("/tmp"));  // a folder is not a program
  CHECK_FALSE(run::resolve_program(""));
}
