// Replays every file of a fuzz corpus folder through LLVMFuzzerTestOneInput, for builds
// without libFuzzer (gcc, sanitizer and coverage builds). Exits non-zero only if the
// folder is missing: a crash ends the process, which ctest reports.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  if (!std::filesystem::is_directory(dir)) {
    std::fprintf(stderr, "%s: no corpus folder %s\n", argv[0], dir.c_str());
    return 2;
  }
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    ++n;
  }
  std::printf("replayed %zu inputs from %s\n", n, dir.c_str());
  return n > 0 ? 0 : 2;
}
