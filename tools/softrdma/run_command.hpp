// `softrdma run [--ip ADDR | --netdev IFNAME] [--] PROGRAM [ARGS...]`: runs an unmodified RDMA program on
// softrdma's libibverbs.so.1 by putting the folder that holds it first on LD_LIBRARY_PATH
// (no Debian RDMA binary has an RPATH, so that folder wins; verbs-abi.md §1), then exec'ing
// the program in place of this process.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::run {

inline constexpr const char* kShimFile = "libibverbs.so.1";
inline constexpr const char* kLibDirVariable = "SOFTRDMA_LIB_DIR";
inline constexpr const char* kRealDevicesVariable = shim::system::kPlacementVariable;

// Where softrdma's libibverbs.so.1 lives, searched in this order:
//   1. $SOFTRDMA_LIB_DIR, when set (and then only there);
//   2. the build tree: the path from this executable's folder to ${CMAKE_BINARY_DIR}/lib,
//      fixed at configure time (../../lib from build/tools/softrdma/);
//   3. the install tree: from bin/ to lib/softrdma/ (GNUInstallDirs, fixed at configure time).
// The executable's own location comes from /proc/self/exe, so any working directory and any
// symlink to the executable work. A folder counts only if its libibverbs.so.1 carries
// SOFTRDMA_SHIM_MARKER: rdma-core's own library has the same name and exports.
struct ShimLocation {
  std::optional<std::string> dir;  // the folder holding kShimFile
  std::vector<std::string> tried;  // every folder looked in, for the error message
};
ShimLocation find_shim_dir();

// What the program file is, as far as loading our library is concerned.
enum class ProgramKind { dynamic_elf, static_elf, foreign_elf, script, unknown };
ProgramKind probe_program(const std::string& path);

// PROGRAM resolved like execvp does (a name with a '/' is a path; otherwise each $PATH entry).
std::optional<std::string> resolve_program(const std::string& name);

// The address options `run` and `devices` share: --ip ADDR (IPv4 or IPv6) and --netdev IFNAME.
struct AddressFlags {
  const char* ip = nullptr;
  const char* netdev = nullptr;
};
// Reads "--ip ADDR", "--ip=ADDR" or the same of --netdev at argv[i] into `flags`, moving i to
// the option's last word. False when argv[i] is no address flag; `error` is set when it is one
// without its value.
bool read_address_flag(int argc, char** argv, int& i, AddressFlags& flags, std::string& error);
// Checks the address that the flags ask for or, with neither flag given, the environment
// (SOFTRDMA_IP, SOFTRDMA_NETDEV), so that a typo is one clear line rather than a program that
// finds no device. Given flags then replace both variables for the library, so an inherited
// SOFTRDMA_NETDEV does not clash with --ip. Returns the error line, or empty.
std::string apply_address_flags(const AddressFlags& flags);

// --daemon (the default socket) or --daemon=SOCKET, the option `run` and `devices` share: true
// when argv[i] is it, with `socket` set, or `error` when its value is empty.
bool read_daemon_flag(std::string_view arg, std::optional<std::string>& socket, std::string& error);

// --real-devices WHERE (first, after or hide), which `run` and `devices` share: true when
// argv[i] is it, moving i past its value, with `error` set when the value is none of the three.
bool read_real_devices_flag(int argc, char** argv, int& i, const char*& where, std::string& error);
// Sets SOFTRDMA_REAL_DEVICES to the flag's value, or to `after` unless the environment has one.
void apply_real_devices_flag(const char* where);

int run_main(int argc, char** argv);  // argv[0] is "run"

}  // namespace softrdma::run
