// softrdmad: one softrdma device (two with --iwarp) shared by many processes, like a NIC
// (docs/architecture.md).
// It runs the engine (emulator/host/embedded_host.hpp) on the udp backend or on a DPDK port
// (emulator/net/dpdk_backend.hpp) and serves verbs clients on
// a Unix socket (emulator/host/daemon_server.hpp); programs reach it with
// `softrdma run --daemon` or SOFTRDMA_DAEMON=SOCKET.
#include <grp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "emulator/host/crc_setting.hpp"
#include "emulator/host/daemon_server.hpp"
#include "emulator/host/daemon_socket.hpp"
#include "emulator/host/embedded_host.hpp"
#include "emulator/host/iwarp_host.hpp"
#include "emulator/host/process_memory.hpp"
#include "emulator/host/runtime_dir.hpp"
#include "emulator/host/stats_endpoint.hpp"
#include "emulator/host/stats_report.hpp"
#include "emulator/net/dpdk_backend.hpp"
#include "emulator/net/fault_plan.hpp"
#include "emulator/net/udp_gid.hpp"

namespace {

constexpr const char* kUsage =
    "usage: softrdmad [--ip ADDR] [--socket PATH] [--group NAME|GID] [--capture FILE] [--faults SPEC]\n"
    "                 [--no-gso] [--iwarp [--mpa-crc]] [--shutdown-grace MS] [--config FILE]\n"
    "                 [--backend udp|dpdk] [--eal 'EAL ARGS'] [--dpdk-port N] [--dpdk-mac MAC]\n"
    "                 [--dpdk-queues N] [--gateway ADDR] [--poll-interval US]\n"
    "\n"
    "Runs the softrdma device srdma0 for every process that attaches to it (softrdma run --daemon,\n"
    "or SOFTRDMA_DAEMON=PATH): one engine and one UDP socket on port 4791, shared as processes share\n"
    "a NIC. Runs in the foreground and logs to stderr; SIGTERM or SIGINT moves every client QP to the\n"
    "error state (their work requests complete flushed), tells clients the device is gone\n"
    "(IBV_EVENT_DEVICE_FATAL), gives them the grace period to read their completions, and exits 0.\n"
    "\n"
    "Options:\n"
    "  --ip ADDR            the IPv4 or IPv6 address the device binds (default: the first free\n"
    "                       127.0.0.N)\n"
    "  --socket PATH        where clients attach (default: softrdmad.sock in the runtime directory,\n"
    "                       $SOFTRDMA_RUNTIME_DIR, $XDG_RUNTIME_DIR/softrdma or /tmp/softrdma-$UID)\n"
    "  --group NAME|GID     members of group NAME may attach too (socket mode 0660; default: only\n"
    "                       this user, 0600). The socket's directory must let them reach it. A\n"
    "                       number that names no group is taken as a numeric group ID, as chown\n"
    "                       does. Members running as another user need the daemon to have\n"
    "                       CAP_SYS_PTRACE to reach their memory (else ibv_reg_mr: EACCES).\n"
    "  --capture FILE       write every packet the device sends and receives to a pcap file\n"
    "  --faults SPEC        seeded fault injection, as softrdma run --faults\n"
    "  --no-gso             one UDP datagram per packet\n"
    "  --iwarp              also serve srdmaiw0, an iWARP device on srdma0's address (MPA/DDP/RDMAP\n"
    "                       over kernel TCP), on the socket PATH.iwarp; clients list it with\n"
    "                       softrdma run --daemon --iwarp. RC QPs, connected by rdma_cm. --capture\n"
    "                       and 'softrdma stats' cover it too; --faults delays, corrupts and resets\n"
    "                       (drop=N) the FPDUs it sends. Not with --backend dpdk\n"
    "  --mpa-crc            with --iwarp: ask every peer for MPA CRCs, as Linux siw's\n"
    "                       mpa_crc_required; without it CRCs are used when the peer asks\n"
    "  --backend udp|dpdk   udp (default): kernel UDP sockets, unprivileged. dpdk: the device owns\n"
    "                       a DPDK port and resolves neighbours for --ip itself (required; IPv4 with\n"
    "                       ARP, IPv6 with neighbour discovery), which no kernel interface should hold\n"
    "  --eal 'EAL ARGS'     dpdk: EAL's arguments, space-separated, e.g. '-l 0 --no-huge -m 128\n"
    "                       --no-pci --no-shconf --no-telemetry --vdev=net_af_packet0,iface=veth0'\n"
    "  --dpdk-port N        dpdk: the ethdev port to use (default 0)\n"
    "  --dpdk-mac MAC       dpdk: use this unicast MAC (aa:bb:cc:dd:ee:ff) instead of the port's own;\n"
    "                       a PMD that cannot take it (net_pcap) is made promiscuous instead\n"
    "  --dpdk-queues N      dpdk: poll N receive queues (default 1), as many as the port has;\n"
    "                       RSS spreads QPs over them where the PMD hashes (net_af_packet: qpairs=N)\n"
    "  --gateway ADDR       dpdk: the router for addresses outside --ip's prefix (--ip ADDR/PREFIX);\n"
    "                       without a prefix every peer is on the link\n"
    "  --poll-interval US   dpdk: how often an idle device looks at the port (default 50)\n"
    "  --shutdown-grace MS  how long clients get after SIGTERM before they are cut off (default 2000)\n"
    "  --config FILE        read options from FILE first: one 'name = value' per line (names as the\n"
    "                       options without '--', 'no-gso = true'), '#' starts a comment;\n"
    "                       command-line options override it\n"
    "  --help               this text\n"
    "  --version            print the version\n"
    "\n"
    "Clients get from the daemon what embedded mode gives them, on the daemon's address; a client\n"
    "can use only the objects it created, and what it leaves when it exits or dies is freed.\n"
    "\n"
    "Exit status: 0 after SIGTERM/SIGINT, 2 for a usage error, 1 when the device cannot start.\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "softrdmad: %s (see softrdmad --help)\n", message.c_str());
  return 2;
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return std::string(s.substr(first, last - first + 1));
}

using Settings = std::map<std::string, std::string>;

// name = value lines; false with `error` on a line that is not one.
bool read_config(const std::string& path, Settings& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read config file " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string content = trim(std::string_view(line).substr(0, line.find('#')));
    if (content.empty()) continue;
    const auto eq = content.find('=');
    if (eq == std::string::npos) {
      error = path + ":" + std::to_string(number) + ": expected 'name = value'";
      return false;
    }
    out[trim(std::string_view(content).substr(0, eq))] = trim(std::string_view(content).substr(eq + 1));
  }
  return true;
}

constexpr std::string_view kValued[] = {
    "ip",  "socket",    "group",    "capture",     "faults",        "config",         "backend",
    "eal", "dpdk-port", "dpdk-mac", "dpdk-queues", "poll-interval", "shutdown-grace", "gateway"};

// What only the dpdk backend takes.
constexpr std::string_view kDpdkOnly[] = {"eal", "dpdk-port", "dpdk-mac", "dpdk-queues", "poll-interval", "gateway"};

bool takes_value(std::string_view name) {
  for (std::string_view v : kValued) {
    if (v == name) return true;
  }
  return false;
}

// The options that are flags: true or false in a config file, true on the command line.
constexpr std::string_view kFlags[] = {"no-gso", "iwarp", "mpa-crc"};
// An option softrdmad has: one of kValued or kFlags.
bool known_option(std::string_view name) {
  return takes_value(name) || std::find(std::begin(kFlags), std::end(kFlags), name) != std::end(kFlags);
}
// A flag's value, or none when the setting is neither true nor false.
std::optional<bool> flag_value(const Settings& settings, const std::string& name) {
  if (!settings.count(name)) return false;
  const std::string& v = settings.at(name);
  if (v != "true" && v != "false") return std::nullopt;
  return v == "true";
}

// A whole decimal number, or none.
std::optional<unsigned> parse_unsigned(const std::string& v) {
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size()) return std::nullopt;
  return n;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

using namespace softrdma;

// Each step of reading the options gives the exit status when the run ends there (--help, or a
// usage error), none when softrdmad goes on.
using Exit = std::optional<int>;

// The command line's options, by name without "--", in `flags`.
Exit read_command_line(int argc, char** argv, Settings& flags) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--version") {
      std::puts("softrdmad " SOFTRDMA_VERSION);
      return 0;
    }
    if (!a.starts_with("--")) return usage_error("unexpected argument '" + std::string(a) + "'");
    std::string name(a.substr(2));
    std::string value = "true";
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (takes_value(name)) {
      if (i + 1 >= argc) return usage_error("--" + name + " needs a value");
      value = argv[++i];
    }
    if (!known_option(name)) return usage_error("unknown option '--" + name + "'");
    flags[name] = value;
  }
  return std::nullopt;
}

// The --config file's settings, if one is given, with the command line's `flags` over them.
Exit read_settings(const Settings& flags, Settings& settings) {
  if (flags.count("config")) {
    const std::string& path = flags.at("config");
    std::string error;
    if (!read_config(path, settings, error)) return usage_error(error);
    for (const auto& [name, value] : settings) {
      if (name == "config" || !known_option(name)) {
        return usage_error("unknown setting '" + name + "' in " + path);
      }
    }
  }
  for (const auto& [name, value] : flags) settings[name] = value;
  return std::nullopt;
}

// The device's address, capture, faults and GSO.
Exit configure_device(const Settings& settings, host::HostConfig& config) {
  if (settings.count("ip")) config.ip = settings.at("ip");
  if (settings.count("capture")) config.capture_path = settings.at("capture");
  if (settings.count("faults")) {
    net::FaultParse parsed = net::parse_faults(settings.at("faults"));
    if (!parsed.plan) return usage_error("--faults '" + settings.at("faults") + "': " + parsed.error);
    config.faults = parsed.plan;
  }
  const std::optional<bool> no_gso = flag_value(settings, "no-gso");
  if (!no_gso) return usage_error("no-gso is true or false");
  config.udp_gso = !*no_gso;
  return std::nullopt;
}

// The iWARP device, with --iwarp: its MPA CRC choice and the FPDU faults of the plan.
Exit configure_iwarp(const Settings& settings, const host::HostConfig& roce,
                     std::optional<host::IwarpHostConfig>& out) {
  const std::optional<bool> iwarp = flag_value(settings, "iwarp"), mpa_crc = flag_value(settings, "mpa-crc");
  if (!iwarp || !mpa_crc) return usage_error("iwarp and mpa-crc are true or false");
  if (*mpa_crc && !*iwarp) return usage_error("--mpa-crc is an option of the iWARP device: add --iwarp");
  if (!*iwarp) return std::nullopt;
  if (roce.open_backend) return usage_error("--iwarp runs on kernel TCP: not with --backend dpdk");
  host::IwarpHostConfig config;
  config.mpa_crc = *mpa_crc;
  config.faults = roce.faults;
  if (config.faults) {
    if (const std::string ignored = host::IwarpFaults::ignored(*config.faults); !ignored.empty())
      std::fprintf(stderr, "softrdmad: srdmaiw0 ignores --faults' %s\n", ignored.c_str());
  }
  out = std::move(config);
  return std::nullopt;
}

// Where clients attach, who may, and how long they get at shutdown.
Exit configure_serving(const Settings& settings, host::DaemonOptions& options) {
  if (settings.count("socket")) {
    options.socket_path = settings.at("socket");
  } else {
    const host::RuntimeDir dir = host::create_runtime_dir();
    if (!dir.error.empty()) return usage_error(dir.error + " (or give --socket)");
    options.socket_path = host::default_daemon_socket();
  }
  if (settings.count("group")) {
    // A name first, then a number (as chown does): a group that exists only as a gid, e.g. one
    // handed out by a container runtime, can still be given.
    const std::string& name = settings.at("group");
    if (const group* g = ::getgrnam(name.c_str())) {
      options.group = g->gr_gid;
    } else if (const std::optional<unsigned> gid = parse_unsigned(name); gid && *gid != static_cast<gid_t>(-1)) {
      options.group = static_cast<gid_t>(*gid);  // -1 would mean "leave the group" to chown
    } else {
      return usage_error("no group named '" + name + "'");
    }
  }
  if (settings.count("shutdown-grace")) {
    const std::optional<unsigned> ms = parse_unsigned(settings.at("shutdown-grace"));
    if (!ms) return usage_error("--shutdown-grace takes milliseconds");
    options.shutdown_grace = std::chrono::milliseconds(*ms);
  }
  return std::nullopt;
}

// The dpdk backend's port, from --ip and the dpdk-only options.
Exit configure_dpdk(const Settings& settings, host::HostConfig& config) {
  net::DpdkConfig dpdk;
  if (!settings.count("ip")) return usage_error("--backend dpdk needs --ip (the device's IPv4 or IPv6 address)");
  dpdk.ip = settings.at("ip");
  if (const auto slash = dpdk.ip.find('/'); slash != std::string::npos) {
    dpdk.prefix_len = parse_unsigned(dpdk.ip.substr(slash + 1));
    if (!dpdk.prefix_len) return usage_error("--ip '" + dpdk.ip + "': the prefix after '/' is a number of bits");
    dpdk.ip.resize(slash);
  }
  if (settings.count("gateway")) {
    if (!dpdk.prefix_len) return usage_error("--gateway needs --ip ADDRESS/PREFIX (which addresses are on the link)");
    dpdk.gateway = settings.at("gateway");
  }
  if (!net::parse_gid(dpdk.ip)) return usage_error("--ip '" + dpdk.ip + "' is not an IPv4 or IPv6 address");
  dpdk.eal_args = split_words(settings.count("eal") ? settings.at("eal") : "");
  if (settings.count("dpdk-port")) {
    const std::optional<unsigned> port = parse_unsigned(settings.at("dpdk-port"));
    if (!port || *port > UINT16_MAX) return usage_error("--dpdk-port takes a port number");
    dpdk.port = static_cast<std::uint16_t>(*port);
  }
  if (settings.count("dpdk-mac")) {
    dpdk.mac = wire::parse_mac(settings.at("dpdk-mac"));
    if (!dpdk.mac || ((*dpdk.mac)[0] & 1) != 0)  // the I/G bit: a group address names no one port
      return usage_error("--dpdk-mac takes a unicast MAC like 02:00:00:00:00:01");
  }
  if (settings.count("dpdk-queues")) {
    const std::optional<unsigned> n = parse_unsigned(settings.at("dpdk-queues"));
    if (!n || *n == 0 || *n > 1024)  // ethdev's RTE_MAX_QUEUES_PER_PORT
      return usage_error("--dpdk-queues takes 1 to 1024");
    dpdk.queues = static_cast<std::uint16_t>(*n);
  }
  if (settings.count("poll-interval")) {
    const std::optional<unsigned> us = parse_unsigned(settings.at("poll-interval"));
    if (!us || *us == 0) return usage_error("--poll-interval takes microseconds (at least 1)");
    dpdk.poll_interval_ns = std::uint64_t{*us} * 1000;
  }
  config.open_backend = [dpdk] { return net::DpdkBackend::open(dpdk); };
  return std::nullopt;
}

// The backend the device runs on: udp, or a DPDK port; the dpdk-only options only with dpdk.
Exit configure_backend(const Settings& settings, const std::string& backend, host::HostConfig& config) {
  if (backend == "dpdk") return configure_dpdk(settings, config);
  if (backend != "udp") return usage_error("--backend is udp or dpdk");
  if (std::any_of(std::begin(kDpdkOnly), std::end(kDpdkOnly),
                  [&](std::string_view option) { return settings.count(std::string(option)) != 0; })) {
    return usage_error("--eal, --gateway and the --dpdk-* and --poll-interval options need --backend dpdk");
  }
  if (config.ip && config.ip->find('/') != std::string::npos) {
    return usage_error("--ip takes a prefix with --backend dpdk only (for udp the kernel routes)");
  }
  return std::nullopt;
}

// SIGTERM and SIGINT, blocked in the calling thread for wait_for_stop's sigwait: blocked before
// any thread starts, so every thread inherits the mask and none takes them instead.
sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// The iWARP device beside srdma0, with --iwarp: its host, the memory its engine reaches its
// clients' through (a ProcessMemory of its own: each is guarded by its host's lock) and its server.
struct IwarpDevice {
  host::ProcessMemory memory;
  std::unique_ptr<host::IwarpHost> host;
  std::unique_ptr<host::DaemonServer> server;
};

// `softrdma stats` reads every device's endpoint in the runtime directory: the daemon's device
// is one more, with every client's QPs, and its iWARP device's. None (and a line in the log)
// when it cannot open one.
std::unique_ptr<host::StatsEndpoint> open_stats(host::EmbeddedHost& device, host::ProcessMemory& memory,
                                                IwarpDevice* iwarp) {
  std::unique_ptr<host::StatsEndpoint> stats;
  const host::RuntimeDir dir = host::create_runtime_dir();
  std::string error = dir.error;
  if (error.empty()) {
    stats = host::StatsEndpoint::open(
        dir.path,
        [h = &device, &memory, iwarp] {
          host::StatsReport report = host::report_of(*h, "softrdmad", "srdma0");
          // Under the engine's lock, which guards ProcessMemory's counters.
          report.dma = h->call([&memory](core::Device&, core::Time) { return memory.counters(); });
          if (iwarp != nullptr) report.iwarp = host::iwarp_report_of(*iwarp->host, "srdmaiw0");
          return host::to_json(report);
        },
        error);
  }
  if (!stats) std::fprintf(stderr, "softrdmad: 'softrdma stats' cannot see this device: %s\n", error.c_str());
  return stats;
}

// Waits for SIGTERM or SIGINT, then flushes the clients' work, tells them the devices are gone
// and stops them (the daemon's --help describes it).
void wait_for_stop(const sigset_t& stop_signals, host::DaemonServer& server, host::EmbeddedHost& device,
                   IwarpDevice* iwarp) {
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  const std::size_t clients = server.client_count() + (iwarp != nullptr ? iwarp->server->client_count() : 0);
  std::fprintf(stderr, "softrdmad: %s: shutting down (%zu clients)\n", strsignal(signal_number), clients);
  if (iwarp != nullptr) iwarp->server->shutdown();
  server.shutdown();
  device.stop();
}

// srdmaiw0 on srdma0's address, served on the socket beside srdma0's; false (and a line in the
// log) when it cannot start.
bool start_iwarp(host::IwarpHostConfig config, const host::EmbeddedHost& roce, const host::DaemonOptions& options,
                 IwarpDevice& out) {
  config.ip = roce.address();
  config.memory = &out.memory;
  config.shared_capture = roce.capture();  // --capture: one file for both devices
  host::IwarpHostStart started = host::IwarpHost::start(std::move(config));
  if (!started.host) {
    std::fprintf(stderr, "softrdmad: cannot start srdmaiw0: %s\n", started.error.c_str());
    return false;
  }
  out.host = std::move(started.host);
  host::DaemonOptions iwarp_options = options;
  iwarp_options.socket_path += host::daemon::kIwarpSocketSuffix;
  host::DaemonStart served = host::DaemonServer::start(*out.host, out.memory, iwarp_options);
  if (!served.server) {
    std::fprintf(stderr, "softrdmad: %s\n", served.error.c_str());
    return false;
  }
  out.server = std::move(served.server);
  return true;
}

// Starts the devices and serves their clients until a stop signal; the exit status.
int run(const host::HostConfig& config, host::ProcessMemory& memory, const host::DaemonOptions& options,
        const std::string& backend, const std::optional<host::IwarpHostConfig>& iwarp_config) {
  const sigset_t stop_signals = block_stop_signals();
  host::HostStart started = host::EmbeddedHost::start(config);
  if (!started.host) {
    std::fprintf(stderr, "softrdmad: cannot start the device: %s\n", started.error.c_str());
    return 1;
  }
  // srdmaiw0's socket first: a client that finds srdma0's finds both.
  IwarpDevice iwarp;
  if (iwarp_config && !start_iwarp(*iwarp_config, *started.host, options, iwarp)) return 1;
  host::DaemonStart served = host::DaemonServer::start(*started.host, memory, options);
  if (!served.server) {
    std::fprintf(stderr, "softrdmad: %s\n", served.error.c_str());
    return 1;
  }
  IwarpDevice* const serving_iwarp = iwarp.server ? &iwarp : nullptr;
  const std::unique_ptr<host::StatsEndpoint> stats = open_stats(*started.host, memory, serving_iwarp);
  std::fprintf(stderr, "softrdmad: srdma0 on %s (%s backend)%s, serving %s (pid %d)\n", started.host->address().c_str(),
               backend.c_str(), serving_iwarp ? " and srdmaiw0 (iWARP)" : "", options.socket_path.c_str(),
               static_cast<int>(::getpid()));
  wait_for_stop(stop_signals, *served.server, *started.host, serving_iwarp);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace softrdma;
  host::apply_crc_variable();  // SOFTRDMA_CRC: the CRC tier (emulator/host/crc_setting.hpp)
  Settings flags;
  if (const Exit exit = read_command_line(argc, argv, flags)) return *exit;
  Settings settings;
  if (const Exit exit = read_settings(flags, settings)) return *exit;

  host::ProcessMemory memory;
  host::HostConfig config;
  config.memory = &memory;
  if (const Exit exit = configure_device(settings, config)) return *exit;
  host::DaemonOptions options;
  if (const Exit exit = configure_serving(settings, options)) return *exit;
  const std::string backend = settings.count("backend") ? settings.at("backend") : "udp";
  if (const Exit exit = configure_backend(settings, backend, config)) return *exit;
  std::optional<host::IwarpHostConfig> iwarp;
  if (const Exit exit = configure_iwarp(settings, config, iwarp)) return *exit;
  return run(config, memory, options, backend, iwarp);
}
