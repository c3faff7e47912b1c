// The process's device counters as `softrdma stats` and SOFTRDMA_STATS_FILE show them
// (emulator/host/stats_report.hpp has the JSON object).
//
// SOFTRDMA_STATS_FILE=FILE: when the process exits normally (exit() or a return from main),
// FILE is written atomically with the device's counters. Not written when the device never
// started, on _exit() or a fatal signal, nor by a forked child (it is the parent's device).
//
// While the process runs, `softrdma stats` reads the same report from its stats endpoint.
#pragma once

#include "emulator/host/embedded_host.hpp"
#include "emulator/host/stats_report.hpp"

namespace softrdma::shim {

inline constexpr const char* kStatsFileVariable = "SOFTRDMA_STATS_FILE";

// This process's report: pid, program name, srdma0, the bound address, the host's counters and
// its live QPs; and srdmaiw0's, once it has started.
host::StatsReport process_report(host::EmbeddedHost& host);

// The iWARP device the report adds, once it has started (softrdma run --iwarp).
void report_iwarp_host(host::IwarpHost* host);

// Reads SOFTRDMA_STATS_FILE (a relative name is taken from the current folder now, so a later
// chdir does not move it) and registers the exit handler. Called before the host starts:
// atexit handlers run in reverse order of registration, so this one runs after the capture
// stage's (emulator/net/capture_stage.cpp), and the capture counters it writes are final.
void arm_exit_snapshot();

// The host the exit snapshot reads, once it has started.
void set_exit_snapshot_host(host::EmbeddedHost* host);

// Serves `softrdma stats` for the life of the process: <runtime dir>/<pid>.sock
// (emulator/host/stats_endpoint.hpp), removed at exit. A directory that cannot be used costs
// the live view only: one line on stderr, and the device runs on.
void serve_stats(host::EmbeddedHost& host);

}  // namespace softrdma::shim
