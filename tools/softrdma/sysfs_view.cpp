#include "tools/softrdma/sysfs_view.hpp"

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string_view>

#include "emulator/host/daemon_client.hpp"
#include "emulator/host/daemon_socket.hpp"
#include "tools/softrdma/sysfs_tree.hpp"
#include "verbs-shim/identity.hpp"
#include "verbs-shim/sysfs_view/view_path.h"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::run {

shim::SysfsFacts known_facts() {
  std::optional<shim::IpAddress> address;
  if (const char* daemon = std::getenv(host::kDaemonVariable); daemon != nullptr && *daemon != '\0') {
    const host::DaemonConnect connected = host::DaemonClient::connect(daemon);
    if (!connected.client) return {};  // the program will say why when it reaches the device
    address = shim::parse_address(connected.client->address());
    if (!address) return {};
  } else {
    address = shim::choose_address(shim::environment_request()).address;
  }
  const std::vector<shim::LocalInterface> interfaces = shim::local_interfaces();
  const shim::LocalInterface* iface = shim::interface_holding(address.value_or(shim::kDefaultAddress), interfaces);
  return {address, iface != nullptr ? iface->name : std::string()};
}

namespace {

// Whether the program will list srdmaiw0: SOFTRDMA_IWARP=1 asks for it, and in daemon mode the
// daemon must serve one (its socket beside srdma0's).
bool lists_iwarp() {
  const char* wanted = std::getenv("SOFTRDMA_IWARP");
  if (wanted == nullptr || std::string_view(wanted) != "1") return false;
  const char* daemon = std::getenv(host::kDaemonVariable);
  if (daemon == nullptr || *daemon == '\0') return true;
  return ::access((std::string(daemon) + host::daemon::kIwarpSocketSuffix).c_str(), F_OK) == 0;
}

}  // namespace

std::optional<RealFolders> real_folders() {
  // As libibverbs reads the variable: what it does not list (hidden, or a bad value), the view hides.
  const char* value = std::getenv(shim::system::kPlacementVariable);
  const auto placement = shim::system::placement_named(value != nullptr ? value : "");
  if (placement && *placement != shim::system::Placement::hidden) return RealFolders{};
  return std::nullopt;
}

std::string offer_sysfs_view(const std::string& lib_dir) {
  const std::string library = lib_dir + "/" + kSysfsLibrary;
  if (::access(library.c_str(), R_OK) != 0) return library + " is missing (build the softrdma_sysfs target)";
  // The loader splits LD_PRELOAD at spaces and colons.
  if (library.find_first_of(" :") != std::string::npos) return library + ": LD_PRELOAD cannot hold a space or a colon";
  const shim::SysfsFacts facts = known_facts();
  shim::SysfsFacts iwarp = facts;
  iwarp.transport = shim::Transport::iwarp;
  const SysfsTree tree =
      write_sysfs_tree(shim::sysfs_files(facts),
                       lists_iwarp() ? shim::sysfs_files(iwarp) : std::vector<shim::SysfsFile>{}, real_folders());
  if (!tree.error.empty()) return tree.error;
  // tree.lock stays open across exec: the program holds its tree (sysfs_tree_lock.hpp).
  // After the user's own, so that theirs (an ASan runtime, say) still comes first.
  const char* preload = std::getenv("LD_PRELOAD");
  const std::string list = (preload != nullptr && *preload != '\0' ? std::string(preload) + ":" : "") + library;
  ::setenv("LD_PRELOAD", list.c_str(), 1);
  ::setenv(SOFTRDMA_SYSFS_ROOT_VARIABLE, tree.root.c_str(), 1);
  return {};
}

}  // namespace softrdma::run
