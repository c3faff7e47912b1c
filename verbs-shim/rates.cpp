// Static-rate conversions. One table of IBTA link rates in Mbit/s; the "multiple of 2.5 Gb/s"
// view exists only for rates that are exact multiples (the 64b/66b-coded FDR/EDR/HDR... rates
// such as 25.78125 Gb/s are not, and convert to -1).
#include <array>
#include <utility>

#include "verbs-shim/verbs_api.hpp"

namespace {

constexpr int kBaseMbps = 2500;

constexpr std::array<std::pair<ibv_rate, int>, 23> kRates = {{
    {IBV_RATE_2_5_GBPS, 2500},   {IBV_RATE_5_GBPS, 5000},       {IBV_RATE_10_GBPS, 10000},
    {IBV_RATE_20_GBPS, 20000},   {IBV_RATE_30_GBPS, 30000},     {IBV_RATE_40_GBPS, 40000},
    {IBV_RATE_60_GBPS, 60000},   {IBV_RATE_80_GBPS, 80000},     {IBV_RATE_120_GBPS, 120000},
    {IBV_RATE_14_GBPS, 14062},   {IBV_RATE_56_GBPS, 56250},     {IBV_RATE_112_GBPS, 112500},
    {IBV_RATE_168_GBPS, 168750}, {IBV_RATE_25_GBPS, 25781},     {IBV_RATE_100_GBPS, 103125},
    {IBV_RATE_200_GBPS, 206250}, {IBV_RATE_300_GBPS, 309375},   {IBV_RATE_28_GBPS, 28125},
    {IBV_RATE_50_GBPS, 53125},   {IBV_RATE_400_GBPS, 425000},   {IBV_RATE_600_GBPS, 637500},
    {IBV_RATE_800_GBPS, 850000}, {IBV_RATE_1200_GBPS, 1275000},
}};

int mbps_of(ibv_rate rate) {
  for (const auto& [r, mbps] : kRates) {
    if (r == rate) return mbps;
  }
  return -1;
}

ibv_rate rate_of(int mbps) {
  for (const auto& [r, m] : kRates) {
    if (m == mbps) return r;
  }
  return IBV_RATE_MAX;
}

}  // namespace

SRDMA_EXPORT int ibv_rate_to_mbps(ibv_rate rate) { return mbps_of(rate); }

SRDMA_EXPORT ibv_rate mbps_to_ibv_rate(int mbps) { return mbps > 0 ? rate_of(mbps) : IBV_RATE_MAX; }

SRDMA_EXPORT int ibv_rate_to_mult(ibv_rate rate) {
  int mbps = mbps_of(rate);
  return mbps > 0 && mbps % kBaseMbps == 0 ? mbps / kBaseMbps : -1;
}

SRDMA_EXPORT ibv_rate mult_to_ibv_rate(int mult) { return mult > 0 ? rate_of(mult * kBaseMbps) : IBV_RATE_MAX; }
