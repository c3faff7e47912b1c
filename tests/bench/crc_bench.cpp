// crc_bench: CRC32c, CRC-32 and the full RoCE ICRC (masked IPv4/UDP/BTH headers, then the
// packet) throughput against memcpy of the same bytes, all measured in one run. A report: always exits 0. Build in
// Release to measure. SOFTRDMA_CRC=avx2, =sse or =portable (the tables) in the environment caps what crc32()/crc32c()
// use, to measure the lower tiers (emulator/host/crc_setting.hpp).
//
// Each payload size walks a ring of buffers totalling 256 KiB, so the working set stays in
// L2 and memcpy is not bound by RAM. Every round measures every kernel at every size, so
// drifts in clock speed or a busy neighbour hit all of them alike; ratios are taken within
// a round, and the median over rounds is reported.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "emulator/host/crc_setting.hpp"
#include "wire/crc32.hpp"
#include "wire/icrc.hpp"

namespace {

constexpr std::size_t kRingBytes = 256 << 10;
constexpr std::size_t kSampleBytes = 32 << 20;  // per kernel, size and round; portable: 1/8
constexpr int kRounds = 15;
constexpr std::size_t kSizes[] = {64, 1024, 4096, 65536};

enum Kernel { kMemcpy, kCrc32c, kCrc32, kIcrc, kCrc32cPortable, kCrc32Portable, kKernels };
constexpr const char* kNames[kKernels] = {"memcpy", "crc32c", "crc32", "icrc", "crc32c slice8", "crc32 slice8"};

// The IPv4 and UDP headers the ICRC masks and covers. For the ICRC each buffer is the
// payload of a packet whose 12-byte BTH sits just before it (the ring has headroom for it),
// so "4 KiB" is a 4 KiB-payload packet, as memcpy moves 4 KiB.
constexpr std::size_t kHeadroom = 64;
constexpr std::size_t kBth = 12;
constexpr std::uint8_t kIpv4[20] = {0x45, 0x02, 0x10, 0x2c, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 2};
constexpr std::uint8_t kUdp[8] = {0xc0, 0x00, 0x12, 0xb7, 0x10, 0x18, 0, 0};

// Makes the compiler assume the bytes at p are read, so the copy into them must happen.
void escape(const void* p) { __asm__ volatile("" : : "r"(p) : "memory"); }

std::uint32_t g_sink;  // every CRC is folded in here, so none can be skipped

struct Bench {
  std::vector<std::uint8_t> ring = std::vector<std::uint8_t>(kHeadroom + kRingBytes);
  std::vector<std::uint8_t> dst = std::vector<std::uint8_t>(kRingBytes / 4);

  // GB/s of `op` applied to `size`-byte buffers taken in turn from the ring.
  template <class Op>
  double run(std::size_t size, std::size_t bytes, Op op) {
    const std::size_t buffers = kRingBytes / size, calls = bytes / size;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0, b = 0; i < calls; ++i) {
      op(std::span<const std::uint8_t>(ring.data() + kHeadroom + b * size, size));
      if (++b == buffers) b = 0;
    }
    const std::chrono::duration<double, std::nano> ns = std::chrono::steady_clock::now() - start;
    return static_cast<double>(calls * size) / ns.count();
  }

  double measure(Kernel k, std::size_t size) {
    std::uint32_t acc = 0;
    double gbps = 0;
    switch (k) {
      case kMemcpy:
        gbps = run(size, kSampleBytes, [&](auto s) {
          std::memcpy(dst.data(), s.data(), s.size());
          escape(dst.data());
        });
        break;
      case kCrc32c:
        gbps = run(size, kSampleBytes, [&](auto s) { acc += wire::crc32c(s); });
        break;
      case kCrc32:
        gbps = run(size, kSampleBytes, [&](auto s) { acc += wire::crc32(s); });
        break;
      case kIcrc:
        gbps = run(size, kSampleBytes, [&](auto s) {
          acc += wire::compute_icrc(wire::NetworkHeader::ipv4, kIpv4, kUdp, {s.data() - kBth, s.size() + kBth});
        });
        break;
      case kCrc32cPortable:
        gbps = run(size, kSampleBytes / 8, [&](auto s) { acc += wire::crc32c_portable(s); });
        break;
      case kCrc32Portable:
        gbps = run(size, kSampleBytes / 8, [&](auto s) { acc += wire::crc32_portable(s); });
        break;
      case kKernels:
        break;
    }
    g_sink += acc;
    return gbps;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const char* size_name(std::size_t size) {
  switch (size) {
    case 64:
      return "64 B";
    case 1024:
      return "1 KiB";
    case 4096:
      return "4 KiB";
    default:
      return "64 KiB";
  }
}

}  // namespace

int main() {
  softrdma::host::apply_crc_variable();
  Bench bench;
  for (std::size_t i = 0; i < bench.ring.size(); ++i) bench.ring[i] = static_cast<std::uint8_t>(i * 131 + 7);

  constexpr std::size_t kN = std::size(kSizes);
  std::vector<double> samples[kN][kKernels];
  for (int round = -1; round < kRounds; ++round) {  // round -1 warms up and is discarded
    for (std::size_t s = 0; s < kN; ++s) {
      for (int k = 0; k < kKernels; ++k) {
        const double gbps = bench.measure(static_cast<Kernel>(k), kSizes[s]);
        if (round >= 0) samples[s][k].push_back(gbps);
      }
    }
  }

  std::printf("crc_bench: crc32 = %.*s, crc32c = %.*s; median of %d rounds, GB/s (ratio to memcpy in the same round)\n",
              static_cast<int>(wire::crc32_implementation().size()), wire::crc32_implementation().data(),
              static_cast<int>(wire::crc32c_implementation().size()), wire::crc32c_implementation().data(), kRounds);
  std::printf("%8s", "payload");
  for (const char* name : kNames) std::printf("  %15s", name);
  std::printf("\n");
  double ratio_4k[kKernels] = {};
  for (std::size_t s = 0; s < kN; ++s) {
    std::printf("%8s  %15.2f", size_name(kSizes[s]), median(samples[s][kMemcpy]));
    for (int k = kMemcpy + 1; k < kKernels; ++k) {
      // The ratio is taken within each round, then the median: a slow round slows both.
      std::vector<double> ratios;
      for (int r = 0; r < kRounds; ++r) ratios.push_back(samples[s][k][r] / samples[s][kMemcpy][r]);
      const double ratio = median(ratios);
      std::printf("  %8.2f (%4.2f)", median(samples[s][k]), ratio);
      if (kSizes[s] == 4096) ratio_4k[k] = ratio;
    }
    std::printf("\n");
  }
  std::printf("target: crc32c >= 0.50 x memcpy at 4 KiB: %s (%.2f)\n", ratio_4k[kCrc32c] >= 0.50 ? "PASS" : "FAIL",
              ratio_4k[kCrc32c]);
  std::printf("target: icrc >= 0.35 x memcpy at 4 KiB: %s (%.2f)\n", ratio_4k[kIcrc] >= 0.35 ? "PASS" : "FAIL",
              ratio_4k[kIcrc]);
  std::printf("(checksum of all results: %08x)\n", g_sink);
  return 0;
}
