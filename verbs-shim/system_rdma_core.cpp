#include "verbs-shim/system_rdma_core.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace softrdma::shim::system {

namespace {

// Where Debian and other distributions keep rdma-core's library. SOFTRDMA_MULTIARCH is the
// build's multiarch triplet (x86_64-linux-gnu).
constexpr const char* kLibraryPaths[] = {
    "/usr/lib/" SOFTRDMA_MULTIARCH "/libibverbs.so.1",
    "/lib/" SOFTRDMA_MULTIARCH "/libibverbs.so.1",
    "/usr/lib64/libibverbs.so.1",
    "/usr/lib/libibverbs.so.1",
};

// rdma-core lists a device only if the kernel made a uverbs character device for it.
constexpr const char* kUverbsClass = "/sys/class/infiniband_verbs";

struct Namespace {
  void* libibverbs = nullptr;
  std::string folder;              // rdma-core's, where its other libraries are too
  std::size_t kernel_devices = 0;  // uverbs devices, whether rdma-core lists them or not
  char*** environ_slot = nullptr;
  int* (*errno_location)() = nullptr;
  std::vector<ibv_device*> devices;
};

void say(const std::string& why) {
  std::fprintf(stderr, "softrdma: the machine's own RDMA devices are not listed: %s\n", why.c_str());
}

Placement read_placement() {
  const char* value = std::getenv(kPlacementVariable);
  if (const auto p = placement_named(value != nullptr ? value : "")) return *p;
  std::fprintf(stderr, "softrdma: %s='%s' is not first, after or hide; the machine's own RDMA devices are hidden\n",
               kPlacementVariable, value);
  return Placement::hidden;
}

std::size_t kernel_device_count() {
  DIR* dir = ::opendir(kUverbsClass);
  if (dir == nullptr) return 0;
  std::size_t n = 0;
  while (const dirent* entry = ::readdir(dir)) n += std::strncmp(entry->d_name, "uverbs", 6) == 0;
  ::closedir(dir);
  return n;
}

std::string real_path(const char* path) {
  char buf[PATH_MAX];
  return ::realpath(path, buf) != nullptr ? buf : "";
}

// This library's own file, which must never be loaded as rdma-core's.
std::string own_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&own_path), &info) == 0 || info.dli_fname == nullptr) return "";
  return real_path(info.dli_fname);
}

const char* find_library() {
  const std::string self = own_path();
  for (const char* path : kLibraryPaths) {
    const std::string file = real_path(path);
    if (!file.empty() && file != self) return path;
  }
  return nullptr;
}

void list_devices(Namespace& ns) {
  Call bracket;
  auto* get_list = reinterpret_cast<decltype(&::ibv_get_device_list)>(symbol("ibv_get_device_list"));
  int n = 0;
  // Kept for the life of the process: the devices must outlive every context opened on them.
  ibv_device** list = get_list != nullptr ? get_list(&n) : nullptr;
  for (int i = 0; list != nullptr && i < n; ++i) ns.devices.push_back(list[i]);
  if (ns.devices.empty()) {
    say("rdma-core lists none of the kernel's " + std::to_string(ns.kernel_devices) +
        " (no provider library for them?)");
  }
}

Namespace load() {
  Namespace ns;
  if (placement() == Placement::hidden) return ns;
  // No kernel RDMA device: nothing to list, and nothing loaded.
  ns.kernel_devices = kernel_device_count();
  if (ns.kernel_devices == 0) return ns;
  const char* path = find_library();
  if (path == nullptr) {
    say("rdma-core's libibverbs.so.1 is not installed");
    return ns;
  }
  ns.libibverbs = ::dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
  if (ns.libibverbs == nullptr) {
    say(std::string("cannot load ") + path + ": " + ::dlerror());
    return ns;
  }
  ns.folder = std::string(path, std::strrchr(path, '/'));
  ns.environ_slot = static_cast<char***>(::dlsym(ns.libibverbs, "environ"));
  ns.errno_location = reinterpret_cast<int* (*)()>(::dlsym(ns.libibverbs, "__errno_location"));
  return ns;
}

Namespace& the_namespace() {
  static Namespace ns = load();
  return ns;
}

const Namespace& listed() {
  static const bool done = [] {
    Namespace& ns = the_namespace();
    if (ns.libibverbs != nullptr) list_devices(ns);
    return true;
  }();
  (void)done;
  return the_namespace();
}

}  // namespace

Placement placement() {
  static const Placement p = read_placement();
  return p;
}

std::span<ibv_device* const> devices() { return listed().devices; }

bool owns(const ibv_device* device) {
  if (device == nullptr) return false;
  for (const ibv_device* d : listed().devices) {
    if (d == device) return true;
  }
  return false;
}

void* symbol(const char* name) {
  void* lib = the_namespace().libibverbs;
  return lib != nullptr ? ::dlsym(lib, name) : nullptr;
}

void* open_beside(const char* soname, const char** error) {
  Namespace& ns = the_namespace();
  Lmid_t lmid = 0;
  if (ns.libibverbs == nullptr || ::dlinfo(ns.libibverbs, RTLD_DI_LMID, &lmid) != 0) {
    *error = "rdma-core's libibverbs.so.1 is not loaded";
    return nullptr;
  }
  const std::string path = ns.folder + "/" + soname;
  Call bracket;
  void* other = ::dlmopen(lmid, path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (other == nullptr) *error = ::dlerror();
  return other;
}

void Call::enter() {
  if (char*** slot = the_namespace().environ_slot) *slot = environ;
}

void Call::leave() {
  if (auto* where = the_namespace().errno_location) errno = *where();
}

}  // namespace softrdma::shim::system

extern "C" SRDMA_EXPORT int softrdma_is_system_device(const ibv_device* device) {
  return softrdma::shim::system::owns(device) ? 1 : 0;
}

extern "C" SRDMA_EXPORT const SoftrdmaSystemNamespace* softrdma_system_namespace() {
  namespace system = softrdma::shim::system;
  static const SoftrdmaSystemNamespace calls = {system::open_beside, system::Call::enter, system::Call::leave,
                                                system::placement() == system::Placement::first};
  return system::devices().empty() ? nullptr : &calls;
}
