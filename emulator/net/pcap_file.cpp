#include "emulator/net/pcap_file.hpp"

#include <pcap/pcap.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace softrdma::net {

void PcapReader::Close::operator()(pcap* p) const { pcap_close(p); }
PcapReader::~PcapReader() = default;

std::optional<PcapReader> PcapReader::open(const std::string& path, std::string& error) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  // Nanosecond precision: pcapng and nanosecond pcap keep it, microsecond pcap is scaled.
  pcap* p = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (p == nullptr) {
    error = errbuf;
    return std::nullopt;
  }
  return PcapReader(p);
}

int PcapReader::link_type() const { return pcap_datalink(handle_.get()); }

std::optional<CapturedPacket> PcapReader::next() {
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(handle_.get(), &header, &data);
  if (rc != 1) {
    if (rc == PCAP_ERROR) error_ = pcap_geterr(handle_.get());
    return std::nullopt;
  }
  CapturedPacket pkt;
  pkt.time_ns =
      static_cast<std::uint64_t>(header->ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(header->ts.tv_usec);
  pkt.original_length = header->len;
  pkt.data = {data, header->caplen};
  return pkt;
}

void PcapWriter::CloseDead::operator()(pcap* p) const { pcap_close(p); }
void PcapWriter::CloseDumper::operator()(pcap_dumper* d) const { pcap_dump_close(d); }
PcapWriter::~PcapWriter() = default;

std::optional<PcapWriter> PcapWriter::create(const std::string& path, int link_type, std::string& error,
                                             std::size_t buffer_bytes) {
  pcap* dead = pcap_open_dead_with_tstamp_precision(link_type, 262144, PCAP_TSTAMP_PRECISION_NANO);
  if (dead == nullptr) {
    error = "libpcap could not open a handle for writing";
    return std::nullopt;
  }
  pcap_dumper* d = nullptr;
  if (buffer_bytes == 0) {
    d = pcap_dump_open(dead, path.c_str());
  } else {
    // Our own FILE, so that its buffer is sized before libpcap writes the file header.
    std::FILE* f = std::fopen(path.c_str(), "wbe");
    if (f == nullptr) {
      error = std::strerror(errno);
      pcap_close(dead);
      return std::nullopt;
    }
    std::setvbuf(f, nullptr, _IOFBF, buffer_bytes);
    d = pcap_dump_fopen(dead, f);
    if (d == nullptr) std::fclose(f);
  }
  if (d == nullptr) {
    error = pcap_geterr(dead);
    pcap_close(dead);
    return std::nullopt;
  }
  return PcapWriter(dead, d);
}

void PcapWriter::write(std::uint64_t time_ns, std::span<const std::uint8_t> frame) {
  pcap_pkthdr h{};
  h.ts.tv_sec = static_cast<time_t>(time_ns / 1'000'000'000u);
  h.ts.tv_usec = static_cast<suseconds_t>(time_ns % 1'000'000'000u);  // nanoseconds: see create()
  h.caplen = static_cast<bpf_u_int32>(frame.size());
  h.len = h.caplen;
  pcap_dump(reinterpret_cast<u_char*>(dumper_.get()), &h, frame.data());
}

bool PcapWriter::flush() { return pcap_dump_flush(dumper_.get()) == 0; }

int PcapWriter::fd() const { return fileno(pcap_dump_file(dumper_.get())); }

}  // namespace softrdma::net
