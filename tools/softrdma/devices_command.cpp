#include "tools/softrdma/devices_command.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "emulator/host/daemon_socket.hpp"
#include "tools/softrdma/run_command.hpp"
#include "verbs-shim/address.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace softrdma::devices {

namespace {

constexpr const char* kUsage =
    "usage: softrdma devices [--ip ADDR | --netdev IFNAME | --daemon[=SOCKET]] [--real-devices WHERE]\n"
    "\n"
    "Lists the RDMA devices a program run with 'softrdma run' sees, in its order: softrdma's, with\n"
    "name, node GUID, port state, link layer, MTU, GID 0 and the IPv4 or IPv6 address and UDP port\n"
    "the device uses, and the machine's own (an RNIC, kernel rxe or siw), which rdma-core's\n"
    "libraries serve through softrdma's, marked 'the machine's'.\n"
    "With --daemon, the device of the softrdmad listening on SOCKET (default: softrdmad.sock in the\n"
    "runtime directory), as 'softrdma run --daemon' programs see it.\n"
    "\n"
    "Options (as 'softrdma run'; default $SOFTRDMA_IP or $SOFTRDMA_NETDEV, else the first free\n"
    "127.0.0.N):\n"
    "  --ip ADDR        the IPv4 or IPv6 address to report for\n"
    "  --netdev IFNAME  the first IPv4 address of interface IFNAME or, if it has none, its first\n"
    "                   global IPv6 address\n"
    "  --daemon[=SOCKET]  the daemon's device ($SOFTRDMA_DAEMON does the same)\n"
    "  --real-devices WHERE  the machine's devices 'after' softrdma's (default), 'first', or 'hide'\n"
    "  --help           this text\n";

int fail(int status, const std::string& message) {
  std::fprintf(stderr, "softrdma devices: %s\n", message.c_str());
  return status;
}

// The shim's functions, looked up at the exact versions a program linked against rdma-core 44
// binds to. dlvsym keeps this process from ever resolving them against another libibverbs.
struct Verbs {
  decltype(&::ibv_get_device_list) get_device_list;
  decltype(&::ibv_free_device_list) free_device_list;
  decltype(&::ibv_get_device_name) get_device_name;
  decltype(&::ibv_open_device) open_device;
  decltype(&::ibv_close_device) close_device;
  decltype(&::ibv_query_device) query_device;
  decltype(&::ibv_query_port) query_port;
  decltype(&::ibv_query_gid) query_gid;
  decltype(&::ibv_query_gid_type) query_gid_type;
  decltype(&::ibv_port_state_str) port_state_str;
  decltype(&::softrdma_is_system_device) is_system_device;
};

template <class F>
bool bind(void* lib, F& out, const char* name, const char* version) {
  out = reinterpret_cast<F>(::dlvsym(lib, name, version));
  return out != nullptr;
}

bool bind_all(void* lib, Verbs& v) {
  return bind(lib, v.get_device_list, "ibv_get_device_list", "IBVERBS_1.1") &&
         bind(lib, v.free_device_list, "ibv_free_device_list", "IBVERBS_1.1") &&
         bind(lib, v.get_device_name, "ibv_get_device_name", "IBVERBS_1.1") &&
         bind(lib, v.open_device, "ibv_open_device", "IBVERBS_1.1") &&
         bind(lib, v.close_device, "ibv_close_device", "IBVERBS_1.1") &&
         bind(lib, v.query_device, "ibv_query_device", "IBVERBS_1.1") &&
         bind(lib, v.query_port, "ibv_query_port", "IBVERBS_1.1") &&
         bind(lib, v.query_gid, "ibv_query_gid", "IBVERBS_1.1") &&
         bind(lib, v.query_gid_type, "ibv_query_gid_type", "IBVERBS_PRIVATE_34") &&
         bind(lib, v.port_state_str, "ibv_port_state_str", "IBVERBS_1.1") &&
         bind(lib, v.is_system_device, "softrdma_is_system_device", "SOFTRDMA_PRIVATE_1");
}

std::string guid_text(__be64 guid) {
  unsigned char b[8];
  std::memcpy(b, &guid, sizeof b);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
  return buf;
}

int mtu_bytes(ibv_mtu mtu) { return 128 << static_cast<int>(mtu); }

void describe_binding(const ibv_gid& gid) {
  shim::IpAddress bound;
  std::memcpy(bound.bytes.data(), gid.raw, sizeof gid.raw);
  std::printf("  bound address:  %s, UDP port %u (RoCEv2)\n", shim::to_string(bound).c_str(), shim::kRoceV2Port);
}

// Prints one device; false when a query fails.
bool describe(const Verbs& v, ibv_device* dev) {
  const char* name = v.get_device_name(dev);
  ibv_context* ctx = v.open_device(dev);
  if (ctx == nullptr) {
    std::fprintf(stderr, "softrdma devices: cannot open %s: %s\n", name, std::strerror(errno));
    return false;
  }
  bool ok = true;
  ibv_device_attr dattr{};
  ibv_port_attr pattr{};  // the exported query_port fills the first 48 bytes (compat layout)
  ibv_gid gid{};
  ibv_gid_type_sysfs gid_type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
  if (v.query_device(ctx, &dattr) != 0 || v.query_port(ctx, 1, reinterpret_cast<_compat_ibv_port_attr*>(&pattr)) != 0 ||
      v.query_gid(ctx, 1, 0, &gid) != 0 || v.query_gid_type(ctx, 1, 0, &gid_type) != 0) {
    std::fprintf(stderr, "softrdma devices: querying %s failed: %s\n", name, std::strerror(errno));
    ok = false;
  } else {
    char gid_text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, gid.raw, gid_text, sizeof gid_text);
    const bool machines = v.is_system_device(dev) != 0;
    std::printf("%s%s\n", name, machines ? " (the machine's, through rdma-core)" : " (softrdma's)");
    std::printf("  node GUID:      %s\n", guid_text(dattr.node_guid).c_str());
    std::printf("  fw_ver:         %s\n", dattr.fw_ver);
    std::printf("  port 1:         %s, link_layer %s, active_mtu %d (max %d)\n", v.port_state_str(pattr.state),
                pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand", mtu_bytes(pattr.active_mtu),
                mtu_bytes(pattr.max_mtu));
    std::printf("  GID[0]:         %s, %s\n", gid_text, gid_type == IBV_GID_TYPE_SYSFS_ROCE_V2 ? "RoCE v2" : "RoCE v1");
    // GID 0 of softrdma's devices is the RoCEv2 GID of the bound address: ::ffff:a.b.c.d or the
    // IPv6 address itself.
    if (!machines) describe_binding(gid);
  }
  v.close_device(ctx);
  return ok;
}

}  // namespace

int devices_main(int argc, char** argv) {
  run::AddressFlags flags;
  std::optional<std::string> daemon;
  const char* real_devices = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string error;
    if (!run::read_daemon_flag(a, daemon, error) && !run::read_address_flag(argc, argv, i, flags, error) &&
        !run::read_real_devices_flag(argc, argv, i, real_devices, error)) {
      return fail(2, "unexpected argument '" + std::string(a) + "' (see softrdma devices --help)");
    }
    if (!error.empty()) return fail(2, error);
  }
  if (daemon && (flags.ip || flags.netdev)) return fail(2, "--daemon takes no address: the device has the daemon's");
  // The library reads its configuration from the environment, as under `softrdma run`.
  if (daemon) ::setenv(host::kDaemonVariable, daemon->c_str(), 1);
  run::apply_real_devices_flag(real_devices);
  if (std::string error = run::apply_address_flags(flags); !error.empty()) return fail(2, error);

  run::ShimLocation loc = run::find_shim_dir();
  if (!loc.dir) {
    return fail(1, std::string("softrdma's ") + run::kShimFile +
                       " was not found; build the softrdma_verbs target or set " + run::kLibDirVariable);
  }
  const std::string path = *loc.dir + "/" + run::kShimFile;
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return fail(1, std::string("cannot load ") + path + ": " + ::dlerror());
  Verbs v{};
  if (!bind_all(lib, v)) return fail(1, path + " lacks the rdma-core 44 verbs (not softrdma's library?)");

  int n = 0;
  ibv_device** list = v.get_device_list(&n);
  if (list == nullptr) return fail(1, std::string("no device list: ") + std::strerror(errno));
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = describe(v, list[i]) && ok;
  if (n == 0) std::puts("no RDMA devices");
  v.free_device_list(list);
  std::printf("library: %s\n", path.c_str());
  // The library stays loaded: this process ends here, and unloading buys nothing.
  return ok ? 0 : 1;
}

}  // namespace softrdma::devices
