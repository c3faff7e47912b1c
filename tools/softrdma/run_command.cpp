#include "tools/softrdma/run_command.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "emulator/host/daemon_socket.hpp"
#include "tools/softrdma/sysfs_view.hpp"
#include "verbs-shim/address.hpp"
#include "verbs-shim/identity.hpp"
#include "verbs-shim/shim_marker.hpp"

namespace softrdma::run {

namespace {

constexpr const char* kUsage =
    "usage: softrdma run [--ip ADDR | --netdev IFNAME] [--capture FILE] [--faults SPEC] [--stats FILE] [--no-gso] "
    "[--iwarp [--mpa-crc]] [--real-devices WHERE] [--] PROGRAM [ARGS...]\n"
    "       softrdma run --daemon[=SOCKET] [--real-devices WHERE] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM, an unmodified program linked against libibverbs or librdmacm (ibv_devinfo,\n"
    "ibv_rc_pingpong, ib_write_bw, rping, qperf, python3 with pyverbs, ...), on softrdma's software\n"
    "RDMA device srdma0. The folder holding softrdma's libibverbs.so.1 and librdmacm.so.1 is put\n"
    "first on LD_LIBRARY_PATH and PROGRAM replaces this process, so its exit status, signals and\n"
    "terminal are its own. libsoftrdma_sysfs.so, from the same folder, is appended to LD_PRELOAD:\n"
    "through it PROGRAM and its children see srdma0 under /sys/class/infiniband (port, GID type,\n"
    "network interface), written to the runtime directory for them.\n"
    "\n"
    "Options:\n"
    "  --ip ADDR        the IPv4 or IPv6 address srdma0 binds (UDP port 4791) and sends from\n"
    "                   (sets SOFTRDMA_IP; default: the first free 127.0.0.N). GID 0 is its\n"
    "                   RoCEv2 GID (::ffff:ADDR for IPv4, ADDR itself for IPv6) and the node GUID\n"
    "                   is derived from it.\n"
    "  --netdev IFNAME  use the first IPv4 address of interface IFNAME or, if it has none, its\n"
    "                   first global IPv6 address (sets SOFTRDMA_NETDEV). Not with --ip.\n"
    "  --capture FILE   write every packet srdma0 sends and receives to the pcap file FILE, with\n"
    "                   Ethernet/IP/UDP headers as the socket sends them (Wireshark and tshark\n"
    "                   decode it as RoCEv2 as it is; sets SOFTRDMA_CAPTURE). Complete when\n"
    "                   PROGRAM exits normally; frames a slow disk made it drop are named then.\n"
    "  --faults SPEC    seeded fault injection between srdma0 and the wire (sets SOFTRDMA_FAULTS),\n"
    "                   e.g. 'loss=1%,dup=0.5%,reorder=2%:depth=4,delay=200us:jitter=50us,\n"
    "                   corrupt=0.1%,seed=42'; 'tx.' or 'rx.' before a name limits it to one\n"
    "                   direction. The same seed and run make the same decisions.\n"
    "                   'opcode=send+ack' and 'qp=0x11' limit a direction's faults to those\n"
    "                   packets; scripted: 'drop=3+7' (the 3rd and 7th matching packet),\n"
    "                   'rnr=K' (RNR NAK the next K RC requests needing a receive),\n"
    "                   'linkdown=100ms:for=2s' (no 'for': down for good). README has the rest.\n"
    "  --stats FILE     when PROGRAM exits normally, write srdma0's counters to FILE as one JSON\n"
    "                   object, the one 'softrdma stats --json' shows while it runs (sets\n"
    "                   SOFTRDMA_STATS_FILE).\n"
    "  --no-gso         send every packet as a datagram of its own (sets SOFTRDMA_UDP_GSO=0), so\n"
    "                   that tcpdump on the interface sees one RoCE packet per frame. By default\n"
    "                   a message's packets leave as one UDP GSO datagram, which the kernel cuts\n"
    "                   into packets only where a device needs it (never on lo or a veth).\n"
    "  --iwarp          also run srdmaiw0, an iWARP device on srdma0's address (MPA/DDP/RDMAP over\n"
    "                   kernel TCP), and make rdma_cm connect through it (sets SOFTRDMA_IWARP=1).\n"
    "                   RC QPs only. --capture and --stats cover it too; --faults delays,\n"
    "                   corrupts and resets (drop=N) the FPDUs it sends. With --daemon: the\n"
    "                   daemon's srdmaiw0 (softrdmad --iwarp).\n"
    "  --mpa-crc        with --iwarp: ask every peer for MPA CRCs (sets SOFTRDMA_MPA_CRC=1), as\n"
    "                   Linux siw's mpa_crc_required; without it CRCs are used when the peer asks.\n"
    "                   Not with --daemon (softrdmad --mpa-crc).\n"
    "  --daemon[=SOCKET]  use the device of the softrdmad listening on SOCKET (sets\n"
    "                   SOFTRDMA_DAEMON; default: softrdmad.sock in the runtime directory) instead\n"
    "                   of running one in PROGRAM: processes on one daemon share its device and\n"
    "                   address. The address, capture, faults and GSO are the daemon's options.\n"
    "  --real-devices WHERE  where the machine's own RDMA devices (an RNIC, kernel rxe or siw),\n"
    "                   which rdma-core's libraries serve beside softrdma's, go in the device list:\n"
    "                   'after' softrdma's (the default here), 'first', or 'hide' them (sets\n"
    "                   SOFTRDMA_REAL_DEVICES; a program started without softrdma run gets 'first').\n"
    "  --help           this text\n"
    "\n"
    "Environment (the options replace both address variables):\n"
    "  SOFTRDMA_LIB_DIR  the folder holding softrdma's libibverbs.so.1 (default: found next to\n"
    "                    this executable, in the build tree or the install tree)\n"
    "  SOFTRDMA_IP       as --ip\n"
    "  SOFTRDMA_NETDEV   as --netdev (not together with SOFTRDMA_IP)\n"
    "  SOFTRDMA_CAPTURE  as --capture (empty: no capture)\n"
    "  SOFTRDMA_FAULTS   as --faults (empty: none)\n"
    "  SOFTRDMA_STATS_FILE  as --stats (empty: none)\n"
    "  SOFTRDMA_UDP_GSO  0 as --no-gso; 1 or unset: GSO\n"
    "  SOFTRDMA_IWARP    1 as --iwarp\n"
    "  SOFTRDMA_MPA_CRC  1 as --mpa-crc; 0 or unset: CRCs when the peer asks\n"
    "  SOFTRDMA_DAEMON   as --daemon=SOCKET (empty: the device runs in PROGRAM)\n"
    "  SOFTRDMA_REAL_DEVICES  as --real-devices (unset: after)\n"
    "  SOFTRDMA_DEBUG    when set, the library names each verb it does not support as it is called\n"
    "\n"
    "Exit status: PROGRAM's; 127 if it is not found, 126 if it cannot run on softrdma (statically\n"
    "linked, setuid, wrong architecture), 2 for a usage error or an unusable address, 1 if the\n"
    "library is missing.\n";

std::string executable_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<std::size_t>(n));
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

enum class Found { absent, foreign, ours };

// Whether DIR holds softrdma's library, rdma-core's (same soname and exports), or nothing.
Found look_in(const std::string& dir) {
  int fd = ::open((dir + "/" + kShimFile).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Found::absent;
  std::string bytes;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) bytes.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return bytes.find(SOFTRDMA_SHIM_MARKER) != std::string::npos ? Found::ours : Found::foreign;
}

// Records a folder looked in, for the error message; true when it is the one.
bool try_dir(ShimLocation& loc, const std::string& dir) {
  Found f = look_in(dir);
  loc.tried.push_back(f == Found::foreign ? dir + " (holds a libibverbs.so.1 that is not softrdma's)" : dir);
  if (f == Found::ours) loc.dir = dir;
  return f == Found::ours;
}

template <class Header>
bool read_at(int fd, off_t offset, Header& out) {
  return ::pread(fd, &out, sizeof out, offset) == static_cast<ssize_t>(sizeof out);
}

int fail(int status, const std::string& message) {
  std::fprintf(stderr, "softrdma run: %s\n", message.c_str());
  return status;
}

// Sets the variable to `value`, or removes it when the value is null.
void export_setting(const char* variable, const char* value) {
  if (value != nullptr) {
    ::setenv(variable, value, 1);
  } else {
    ::unsetenv(variable);
  }
}

}  // namespace

bool read_address_flag(int argc, char** argv, int& i, AddressFlags& flags, std::string& error) {
  struct Flag {
    std::string_view name;
    const char* AddressFlags::*field;
    const char* example;
  };
  static constexpr Flag kFlags[] = {{"--ip", &AddressFlags::ip, "an address (e.g. --ip 10.0.0.1 or --ip fd00::1)"},
                                    {"--netdev", &AddressFlags::netdev, "an interface name (e.g. --netdev eth0)"}};
  const std::string_view arg = argv[i];
  for (const Flag& f : kFlags) {
    const char* value = nullptr;
    if (arg == f.name) {
      value = i + 1 < argc ? argv[++i] : nullptr;
    } else if (arg.starts_with(f.name) && arg.size() > f.name.size() && arg[f.name.size()] == '=') {
      value = argv[i] + f.name.size() + 1;
    } else {
      continue;
    }
    if (value == nullptr || *value == '\0') error = std::string(f.name) + " needs " + f.example;
    flags.*f.field = value;
    return true;
  }
  return false;
}

std::string apply_address_flags(const AddressFlags& flags) {
  const bool given = flags.ip != nullptr || flags.netdev != nullptr;
  const shim::AddressRequest request =
      given ? shim::AddressRequest{{"--ip", flags.ip}, {"--netdev", flags.netdev}} : shim::environment_request();
  const shim::AddressChoice choice = shim::choose_address(request);
  if (!choice.ok()) return choice.error;
  if (given) {
    export_setting(shim::kAddressVariable, flags.ip);
    export_setting(shim::kNetdevVariable, flags.netdev);
  }
  return {};
}

ShimLocation find_shim_dir() {
  ShimLocation loc;
  if (const char* env = std::getenv(kLibDirVariable); env != nullptr && *env != '\0') {
    try_dir(loc, env);
    return loc;
  }
  const std::string exe_dir = executable_dir();
  for (const char* relative : {SOFTRDMA_BUILD_SHIM_RELDIR, SOFTRDMA_INSTALL_SHIM_RELDIR}) {
    std::string dir = exe_dir + "/" + relative;
    if (char* real = ::realpath(dir.c_str(), nullptr)) {  // show and export a clean path
      dir = real;
      std::free(real);
    }
    if (try_dir(loc, dir)) break;
  }
  return loc;
}

ProgramKind probe_program(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ProgramKind::unknown;
  ProgramKind kind = ProgramKind::unknown;
  unsigned char ident[EI_NIDENT] = {};
  Elf64_Ehdr eh;
  if (read_at(fd, 0, ident) && ident[0] == '#' && ident[1] == '!') {
    kind = ProgramKind::script;  // its interpreter is what loads libibverbs
  } else if (std::memcmp(ident, ELFMAG, SELFMAG) != 0) {
    kind = ProgramKind::unknown;  // let exec report what it is
  } else if (ident[EI_CLASS] != ELFCLASS64 || !read_at(fd, 0, eh) || eh.e_machine != EM_X86_64) {
    kind = ProgramKind::foreign_elf;
  } else {
    // The dynamic loader, and with it LD_LIBRARY_PATH, exists only for a program that names
    // an interpreter (PT_INTERP). A static or static-pie binary has libibverbs inside it.
    kind = ProgramKind::static_elf;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      if (!read_at(fd, static_cast<off_t>(eh.e_phoff + i * sizeof ph), ph)) break;
      if (ph.p_type == PT_INTERP) {
        kind = ProgramKind::dynamic_elf;
        break;
      }
    }
  }
  ::close(fd);
  return kind;
}

std::optional<std::string> resolve_program(const std::string& name) {
  auto runnable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  };
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) return runnable(name) ? std::optional(name) : std::nullopt;
  const char* path_env = std::getenv("PATH");
  std::string_view path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = path.find(':');
    std::string dir(path.substr(0, colon));
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(candidate) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return std::nullopt;
    path.remove_prefix(colon + 1);
  }
}

bool read_daemon_flag(std::string_view arg, std::optional<std::string>& socket, std::string& error) {
  if (arg != "--daemon" && !arg.starts_with("--daemon=")) return false;
  socket = arg == "--daemon" ? host::default_daemon_socket() : std::string(arg.substr(std::strlen("--daemon=")));
  if (socket->empty()) error = "--daemon= needs a socket path (or use --daemon alone for the default)";
  return true;
}

bool read_real_devices_flag(int argc, char** argv, int& i, const char*& where, std::string& error) {
  const std::string_view a = argv[i];
  if (a != "--real-devices" && !a.starts_with("--real-devices=")) return false;
  where = a == "--real-devices" ? (i + 1 < argc ? argv[++i] : "") : argv[i] + std::strlen("--real-devices=");
  const std::string_view w = where;
  if (w.empty() || !shim::system::placement_named(w)) {
    error = "--real-devices takes first, after or hide, not '" + std::string(w) + "'";
  }
  return true;
}

void apply_real_devices_flag(const char* where) {
  // Programs run on softrdma take its device first; the library alone puts the machine's first.
  ::setenv(kRealDevicesVariable, where != nullptr ? where : "after", where != nullptr);
}

int run_main(int argc, char** argv) {
  AddressFlags flags;
  const char* capture = nullptr;
  const char* faults = nullptr;
  const char* stats = nullptr;
  bool no_gso = false;
  bool iwarp = false;
  bool mpa_crc = false;
  const char* real_devices = nullptr;
  std::optional<std::string> daemon;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string error;
    if (read_address_flag(argc, argv, i, flags, error)) {
      if (!error.empty()) return fail(2, error);
    } else if (a == "--capture" || a.starts_with("--capture=")) {
      capture = a == "--capture" ? (i + 1 < argc ? argv[++i] : nullptr) : argv[i] + std::strlen("--capture=");
      if (capture == nullptr || *capture == '\0')
        return fail(2, "--capture needs a file name (e.g. --capture out.pcap)");
    } else if (a == "--faults" || a.starts_with("--faults=")) {
      faults = a == "--faults" ? (i + 1 < argc ? argv[++i] : nullptr) : argv[i] + std::strlen("--faults=");
      if (faults == nullptr || *faults == '\0') return fail(2, "--faults needs a plan (e.g. --faults loss=1%,seed=7)");
    } else if (a == "--stats" || a.starts_with("--stats=")) {
      stats = a == "--stats" ? (i + 1 < argc ? argv[++i] : nullptr) : argv[i] + std::strlen("--stats=");
      if (stats == nullptr || *stats == '\0') return fail(2, "--stats needs a file name (e.g. --stats counters.json)");
    } else if (a == "--no-gso") {
      no_gso = true;
    } else if (a == "--iwarp") {
      iwarp = true;
    } else if (a == "--mpa-crc") {
      mpa_crc = true;
    } else if (read_real_devices_flag(argc, argv, i, real_devices, error)) {
      if (!error.empty()) return fail(2, error);
    } else if (read_daemon_flag(a, daemon, error)) {
      if (!error.empty()) return fail(2, error);
    } else if (a.starts_with("-")) {
      return fail(2, "unknown option '" + std::string(a) + "' (put -- before PROGRAM if the option is PROGRAM's)");
    } else {
      break;  // PROGRAM
    }
  }
  if (i >= argc) {
    return fail(2, "missing PROGRAM (usage: softrdma run [--ip ADDR | --netdev IFNAME] [--capture FILE] [--faults "
                   "SPEC] [--stats FILE] [--no-gso] [--iwarp [--mpa-crc]] [--] PROGRAM [ARGS...])");
  }
  if (daemon && (flags.ip || flags.netdev || capture != nullptr || faults != nullptr || no_gso || stats != nullptr)) {
    return fail(2, "--daemon takes no device options: the address, capture, faults, GSO and stats are softrdmad's");
  }
  if (daemon && mpa_crc) return fail(2, "--mpa-crc is softrdmad's option (softrdmad --iwarp --mpa-crc) with --daemon");
  if (mpa_crc && !iwarp) return fail(2, "--mpa-crc is an option of the iWARP device: add --iwarp");
  if (daemon) export_setting(host::kDaemonVariable, daemon->c_str());
  if (std::string error = apply_address_flags(flags); !error.empty()) return fail(2, error);
  if (capture != nullptr) export_setting("SOFTRDMA_CAPTURE", capture);
  if (faults != nullptr) export_setting("SOFTRDMA_FAULTS", faults);
  if (stats != nullptr) export_setting("SOFTRDMA_STATS_FILE", stats);
  if (no_gso) export_setting("SOFTRDMA_UDP_GSO", "0");
  if (iwarp) export_setting("SOFTRDMA_IWARP", "1");
  if (mpa_crc) export_setting("SOFTRDMA_MPA_CRC", "1");
  apply_real_devices_flag(real_devices);

  ShimLocation loc = find_shim_dir();
  if (!loc.dir) {
    std::string where;
    for (const auto& d : loc.tried) where += (where.empty() ? "" : ", ") + d;
    return fail(1, std::string("softrdma's ") + kShimFile + " was not found (looked in " + where +
                       "); build the softrdma_verbs target or set " + kLibDirVariable);
  }

  const std::string name = argv[i];
  std::optional<std::string> program = resolve_program(name);
  if (!program) return fail(127, name + ": command not found");
  struct stat st;
  if (::stat(program->c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0) {
    return fail(126, name + " is setuid/setgid: the dynamic loader ignores LD_LIBRARY_PATH for it");
  }
  switch (probe_program(*program)) {
    case ProgramKind::static_elf:
      return fail(126, name + " is not dynamically linked (no ELF interpreter): softrdma replaces "
                              "libibverbs.so.1 at load time and cannot reach a statically linked program");
    case ProgramKind::foreign_elf:
      return fail(126, name + " is not an x86-64 program; softrdma's " + kShimFile + " is x86-64");
    default:
      break;
  }

  const char* old = std::getenv("LD_LIBRARY_PATH");
  std::string lib_path = *loc.dir + (old != nullptr && *old != '\0' ? ":" + std::string(old) : "");
  ::setenv("LD_LIBRARY_PATH", lib_path.c_str(), 1);
  if (std::string why = offer_sysfs_view(*loc.dir); !why.empty()) {
    std::fprintf(stderr, "softrdma run: no sysfs view of %s: %s\n", shim::kDeviceName, why.c_str());
  }

  ::execv(program->c_str(), argv + i);
  int err = errno;
  return fail(err == ENOENT ? 127 : 126, name + ": " + std::strerror(err));
}

}  // namespace softrdma::run
