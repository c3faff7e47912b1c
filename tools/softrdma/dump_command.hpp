// `softrdma dump [--check] [--json] [--follow QPN [--peer QPN]] FILE`: one line per packet of a pcap/pcapng file.
#pragma once

namespace softrdma::dump {

int dump_main(int argc, char** argv);  // argv[0] is "dump"

}  // namespace softrdma::dump
