// The layer, error type and error code a Terminate message carries (RFC 5040 s4.8; the values
// of RFC 5040 s7.4, RFC 5041 s7.2 and RFC 5044 s8 with RFC 6581 s10, as IANA's RDDP registry
// lists them), one constant per error the receiver of an FPDU can find.
#pragma once

#include <cstdint>

namespace wire::iwarp {

struct TerminateCause {
  std::uint8_t layer = 0;
  std::uint8_t error_type = 0;
  std::uint8_t error_code = 0;
  bool operator==(const TerminateCause&) const = default;
};

namespace terminate_layer {
inline constexpr std::uint8_t rdmap = 0;
inline constexpr std::uint8_t ddp = 1;
inline constexpr std::uint8_t llp = 2;  // MPA
}  // namespace terminate_layer

namespace terminate_cause {
// RDMAP, error type 1: remote protection errors.
inline constexpr TerminateCause rdmap_invalid_stag{terminate_layer::rdmap, 1, 0x00};
inline constexpr TerminateCause rdmap_base_or_bounds{terminate_layer::rdmap, 1, 0x01};
inline constexpr TerminateCause rdmap_access_rights{terminate_layer::rdmap, 1, 0x02};
inline constexpr TerminateCause rdmap_stag_not_associated{terminate_layer::rdmap, 1, 0x03};
inline constexpr TerminateCause rdmap_cannot_invalidate{terminate_layer::rdmap, 1, 0x09};
// RDMAP, error type 2: remote operation errors.
inline constexpr TerminateCause rdmap_invalid_version{terminate_layer::rdmap, 2, 0x05};
inline constexpr TerminateCause rdmap_unexpected_opcode{terminate_layer::rdmap, 2, 0x06};
inline constexpr TerminateCause rdmap_catastrophic_stream{terminate_layer::rdmap, 2, 0x07};
// DDP, error type 1: tagged buffer errors.
inline constexpr TerminateCause ddp_tagged_invalid_stag{terminate_layer::ddp, 1, 0x00};
inline constexpr TerminateCause ddp_tagged_base_or_bounds{terminate_layer::ddp, 1, 0x01};
inline constexpr TerminateCause ddp_tagged_stag_not_associated{terminate_layer::ddp, 1, 0x02};
inline constexpr TerminateCause ddp_tagged_invalid_version{terminate_layer::ddp, 1, 0x04};
// DDP, error type 2: untagged buffer errors.
inline constexpr TerminateCause ddp_untagged_invalid_qn{terminate_layer::ddp, 2, 0x01};
inline constexpr TerminateCause ddp_untagged_no_buffer{terminate_layer::ddp, 2, 0x02};
inline constexpr TerminateCause ddp_untagged_msn_range{terminate_layer::ddp, 2, 0x03};
inline constexpr TerminateCause ddp_untagged_invalid_mo{terminate_layer::ddp, 2, 0x04};
inline constexpr TerminateCause ddp_untagged_too_long{terminate_layer::ddp, 2, 0x05};
inline constexpr TerminateCause ddp_untagged_invalid_version{terminate_layer::ddp, 2, 0x06};
// LLP (MPA), error type 0.
inline constexpr TerminateCause mpa_crc_error{terminate_layer::llp, 0, 0x02};
inline constexpr TerminateCause mpa_fpdu_length_error{terminate_layer::llp, 0, 0x03};
inline constexpr TerminateCause mpa_invalid_request_reply{terminate_layer::llp, 0, 0x04};
inline constexpr TerminateCause mpa_insufficient_ird{terminate_layer::llp, 0, 0x06};
}  // namespace terminate_cause

}  // namespace wire::iwarp
