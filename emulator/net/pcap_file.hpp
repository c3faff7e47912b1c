// Reading and writing capture files through libpcap: pcap and pcapng in, pcap out (libpcap
// cannot write pcapng). Packets are handed out as byte spans valid until the next read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

struct pcap;
struct pcap_dumper;

namespace softrdma::net {

// Link types (tcpdump.org/linktypes.html) the decoders understand.
inline constexpr int kLinkEthernet = 1;
inline constexpr int kLinkErf = 197;

struct CapturedPacket {
  std::uint64_t time_ns = 0;           // since the Unix epoch
  std::uint32_t original_length = 0;   // on the wire; more than data.size() when snaplen cut it
  std::span<const std::uint8_t> data;  // what the file holds
  bool truncated() const { return original_length > data.size(); }
};

class PcapReader {
 public:
  // Opens FILE; on failure returns nullopt and sets `error` to libpcap's message.
  static std::optional<PcapReader> open(const std::string& path, std::string& error);
  PcapReader(PcapReader&&) noexcept = default;
  PcapReader& operator=(PcapReader&&) noexcept = default;
  ~PcapReader();

  int link_type() const;
  // The next packet, or nullopt at the end of the file (or on a read error: see error()).
  std::optional<CapturedPacket> next();
  const std::string& error() const { return error_; }

 private:
  struct Close {
    void operator()(pcap* p) const;
  };
  explicit PcapReader(pcap* p) : handle_(p) {}
  std::unique_ptr<pcap, Close> handle_;
  std::string error_;
};

// A record's header as PcapWriter's files hold it (libpcap's on-disk layout: four 32-bit
// fields in this machine's byte order, the file header's magic says which; nanoseconds, as
// PcapWriter opens its files with nanosecond precision).
struct PcapRecordHeader {
  std::uint32_t seconds = 0;
  std::uint32_t nanoseconds = 0;
  std::uint32_t captured_length = 0;
  std::uint32_t original_length = 0;
  static PcapRecordHeader make(std::uint64_t time_ns, std::uint32_t length) {
    return {static_cast<std::uint32_t>(time_ns / 1'000'000'000u), static_cast<std::uint32_t>(time_ns % 1'000'000'000u),
            length, length};
  }
};
static_assert(sizeof(PcapRecordHeader) == 16);

class PcapWriter {
 public:
  // `buffer_bytes`: the size of the file's stdio buffer (0: stdio's default, a few KiB). A
  // writer that flushes per burst wants one that holds a burst, so a burst is one write().
  static std::optional<PcapWriter> create(const std::string& path, int link_type, std::string& error,
                                          std::size_t buffer_bytes = 0);
  PcapWriter(PcapWriter&&) noexcept = default;
  PcapWriter& operator=(PcapWriter&&) noexcept = default;
  ~PcapWriter();

  void write(std::uint64_t time_ns, std::span<const std::uint8_t> frame);
  // Writes the buffered frames out; false on a write error (errno says which).
  bool flush();
  // The file's descriptor, for a writer that builds whole records itself
  // (PcapRecordHeader) and hands many to the kernel at once: flush() first, and after that
  // write() no more through this object.
  int fd() const;

 private:
  struct CloseDead {
    void operator()(pcap* p) const;
  };
  struct CloseDumper {
    void operator()(pcap_dumper* d) const;
  };
  PcapWriter(pcap* p, pcap_dumper* d) : dead_(p), dumper_(d) {}
  std::unique_ptr<pcap, CloseDead> dead_;
  std::unique_ptr<pcap_dumper, CloseDumper> dumper_;
};

}  // namespace softrdma::net
