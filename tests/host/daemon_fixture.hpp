// A daemon in the test process: an EmbeddedHost over ProcessMemory and a DaemonServer on a
// socket in a temporary directory, for DaemonClients to speak the real protocol to.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "emulator/host/daemon_client.hpp"
#include "emulator/host/daemon_server.hpp"
#include "tests/host/host_fixture.hpp"

namespace test {

using host::DaemonClient;

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/softrdma-daemon-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    ::unlink((path + "/d.sock").c_str());
    ::rmdir(path.c_str());
  }
  std::string path;
};

// RESET -> INIT on port 1 with `access` (RESET goes only to INIT, IBTA vol. 1 s10.3.1).
inline void to_init(host::DeviceLink& link, std::uint32_t qpn, std::uint32_t access) {
  using namespace core::qp_attr;
  core::QpAttr a;
  a.qp_state = core::QpState::init;
  a.port_num = 1;
  a.qp_access_flags = access;
  REQUIRE(link.modify_qp(qpn, a, state | pkey_index | port | access_flags) == 0);
}

struct Daemon {
  explicit Daemon(const std::string& ip, std::chrono::milliseconds grace = std::chrono::milliseconds(2000)) {
    host::HostConfig config = config_at(ip);
    config.memory = &memory;
    host = start_host(config);
    socket = dir.path + "/d.sock";
    host::DaemonOptions options;
    options.socket_path = socket;
    options.shutdown_grace = grace;
    host::DaemonStart s = host::DaemonServer::start(*host, memory, options);
    INFO(s.error);
    REQUIRE(s.server);
    server = std::move(s.server);
  }
  ~Daemon() { server.reset(); }

  std::unique_ptr<DaemonClient> connect() {
    host::DaemonConnect c = DaemonClient::connect(socket);
    INFO(c.error);
    REQUIRE(c.client);
    return std::move(c.client);
  }
  std::size_t live_qps() {
    return host->call([](core::Device& d, core::Time) { return d.qp_stats().size(); });
  }

  TempDir dir;
  host::ProcessMemory memory;  // before the host, which reads through it
  std::unique_ptr<host::EmbeddedHost> host;
  std::string socket;
  std::unique_ptr<host::DaemonServer> server;
};

}  // namespace test
