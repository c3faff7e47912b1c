// The pure parts of the shim (address, identity, attributes) and the launcher's checks.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "tools/softrdma/run_command.hpp"
#include "verbs-shim/attributes.hpp"
#include "verbs-shim/identity.hpp"

using namespace softrdma;
using namespace softrdma::shim;

TEST_CASE("IPv4 parsing is strict", "[shim-model]") {
  CHECK(parse_ipv4("10.0.0.1") == Ipv4{{10, 0, 0, 1}});
  CHECK(parse_ipv4("255.255.255.255").has_value());
  CHECK_FALSE(parse_ipv4("10.1"));
  CHECK_FALSE(parse_ipv4("256.0.0.1"));
  CHECK_FALSE(parse_ipv4("localhost"));
  CHECK_FALSE(parse_ipv4(""));
  CHECK_FALSE(parse_ipv4("10.0.0.1 "));
  CHECK(to_string(Ipv4{{192, 168, 0, 7}}) == "192.168.0.7");
}

TEST_CASE("SOFTRDMA_IP: default, valid, and each way to get it wrong", "[shim-model]") {
  CHECK(choose_address(nullptr).address == kDefaultAddress);
  CHECK(choose_address("").address == kDefaultAddress);
  CHECK(choose_address("10.9.8.7").address == Ipv4{{10, 9, 8, 7}});
  for (const char* bad : {"10.9.8", "fe80::1", "0.0.0.0", "224.0.0.1", "255.255.255.255"}) {
    AddressChoice c = choose_address(bad);
    CHECK_FALSE(c.address);
    CHECK(c.error.find("SOFTRDMA_IP='") == 0);
    CHECK(c.error.find('\n') == std::string::npos);  // one line
  }
}

TEST_CASE("identity derived from the address", "[shim-model]") {
  const Ipv4 a{{10, 1, 2, 3}};
  CHECK(roce_v2_gid(a) == Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3});
  CHECK(node_guid(a) == Guid{0x02, 0x00, 10, 0xff, 0xfe, 1, 2, 3});
  DeviceIdentity id = make_identity(a, Interface{7, 1500});
  CHECK(id.gids[0] == roce_v2_gid(a));
  for (std::size_t i = 1; i < id.gids.size(); ++i) CHECK(id.gids[i] == Gid{});
  CHECK(id.ifindex == 7);
  CHECK(id.active_mtu_bytes == 1024);
  CHECK(make_identity(a, std::nullopt).ifindex == 0);
}

TEST_CASE("the active MTU is the largest IB MTU whose packets fit the IP MTU", "[shim-model]") {
  CHECK(ib_mtu_bytes_for(1500) == 1024);
  CHECK(ib_mtu_bytes_for(9000) == 4096);
  CHECK(ib_mtu_bytes_for(65536) == 4096);  // loopback
  CHECK(ib_mtu_bytes_for(4096 + 72) == 4096);
  CHECK(ib_mtu_bytes_for(4096 + 71) == 2048);
  CHECK(ib_mtu_bytes_for(600) == 512);
  CHECK(ib_mtu_bytes_for(100) == 256);
  CHECK(ib_mtu_bytes_for(0) == 1024);  // unknown interface
}

TEST_CASE("loopback addresses belong to lo", "[shim-model]") {
  auto lo = find_interface(Ipv4{{127, 0, 0, 1}});
  if (!lo) {
    WARN("no interface holds 127.0.0.1 (a fresh network namespace?): nothing to check");
    return;
  }
  CHECK(lo->index > 0);
  CHECK(lo->mtu >= 1500);
  auto other = find_interface(Ipv4{{127, 0, 0, 9}});  // in lo's /8, not listed on it
  REQUIRE(other.has_value());
  CHECK(other->index == lo->index);
}

TEST_CASE("attributes: a RoCEv2 port and engine-sized limits", "[shim-model]") {
  DeviceIdentity id = make_identity(Ipv4{{10, 0, 0, 2}}, Interface{3, 9000});
  ibv_port_attr p = port_attr(id);
  CHECK(p.state == IBV_PORT_ACTIVE);
  CHECK(p.active_mtu == IBV_MTU_4096);
  CHECK(p.link_layer == IBV_LINK_LAYER_ETHERNET);
  ibv_device_attr d = device_attr(id);
  CHECK(d.vendor_id == kVendorId);
  CHECK((d.vendor_id & 0x020000) != 0);  // the locally-administered bit: no vendor's OUI
  ibv_device_attr_ex x = device_attr_ex(id);
  CHECK(x.phys_port_cnt_ex == d.phys_port_cnt);
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
