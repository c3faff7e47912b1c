// `softrdma stats [--json] [--watch [SECONDS]] [--pid PID]`: the live counters of every running
// program that has a softrdma device, read from each process's stats endpoint in the runtime
// directory (emulator/host/stats_endpoint.hpp, runtime_dir.hpp). Endpoints whose process is
// gone are removed on the way.
#pragma once

namespace softrdma::stats {

int stats_main(int argc, char** argv);  // argv[0] is "stats"

}  // namespace softrdma::stats
