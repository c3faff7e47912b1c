// softrdma: the command-line tool. Each subcommand lives in its own file.
#include <cstdio>
#include <cstring>

#include "emulator/host/crc_setting.hpp"
#include "tools/softrdma/devices_command.hpp"
#include "tools/softrdma/dump_command.hpp"
#include "tools/softrdma/run_command.hpp"
#include "tools/softrdma/stats_command.hpp"
#include "tools/softrdma/synth_command.hpp"

namespace {

constexpr const char* kUsage =
    "usage: softrdma COMMAND [ARGS]\n"
    "\n"
    "softrdma is a userspace software RDMA device (RoCEv2 over UDP, iWARP over TCP).\n"
    "\n"
    "Commands:\n"
    "  run [--ip ADDR | --netdev IFNAME] [--capture FILE] [--faults SPEC] [--stats FILE] [--no-gso]\n"
    "      [--iwarp [--mpa-crc]] -- PROGRAM [ARGS]\n"
    "  run --daemon[=SOCKET] -- PROGRAM [ARGS]\n"
    "                 run an unmodified RDMA program (ibv_devinfo, perftest, pyverbs...) on softrdma\n"
    "  devices [--ip ADDR | --netdev IFNAME | --daemon[=SOCKET]]\n"
    "                 show softrdma's RDMA devices as programs see them, and their addresses\n"
    "  stats [--json] [--watch [SECONDS]] [--pid PID]\n"
    "                 live counters of every running program's device and of its QPs\n"
    "  dump [--check] [--json] [--follow QPN [--peer QPN]] FILE\n"
    "                 decode a pcap/pcapng capture of RoCE or iWARP traffic; --follow: one QP's\n"
    "                 conversation with PSN gaps, retransmissions and NAKs flagged\n"
    "  synth FILE     write a capture of every RoCE opcode built by softrdma's own builders\n"
    "  help           this text\n"
    "  version        print the version\n"
    "\n"
    "Run 'softrdma COMMAND --help' for a command's options.\n";

}  // namespace

int main(int argc, char** argv) {
  softrdma::host::apply_crc_variable();  // SOFTRDMA_CRC: the CRC tier of dump and synth (emulator/host/crc_setting.hpp)
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char* cmd = argv[1];
  if (!std::strcmp(cmd, "version") || !std::strcmp(cmd, "--version")) {
    std::puts("softrdma " SOFTRDMA_VERSION);
    return 0;
  }
  if (!std::strcmp(cmd, "run")) return softrdma::run::run_main(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "devices")) return softrdma::devices::devices_main(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "stats")) return softrdma::stats::stats_main(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "dump")) return softrdma::dump::dump_main(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "synth")) return softrdma::synth::synth_main(argc - 1, argv + 1);
  std::fprintf(stderr, "softrdma: unknown command '%s'\n%s", cmd, kUsage);
  return 2;
}
