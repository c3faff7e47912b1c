#include "emulator/core/qp_transition.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

using namespace softrdma::core;

namespace {

using S = QpState;
constexpr QpState kStates[] = {S::reset, S::init, S::rtr, S::rts, S::sqd, S::sqe, S::err};
constexpr QpType kTypes[] = {QpType::rc, QpType::uc, QpType::ud};

std::string name(QpType t) { return t == QpType::rc ? "RC" : t == QpType::uc ? "UC" : "UD"; }
std::string name(QpState s) {
  static const char* const names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return names[static_cast<int>(s)];
}

// Limits unlike the defaults, and unlike each other where two checks could be swapped.
DeviceLimits test_limits() {
  DeviceLimits d;
  d.max_qp_rd_atom = 4;
  d.max_qp_init_rd_atom = 8;
  d.pkey_table_len = 4;
  d.gid_table_len = 8;
  d.phys_port_cnt = 2;
  return d;
}

// Attributes whose every value is legal, for a modify from `from` to `to`.
QpAttr valid_attr(QpState from, QpState to) {
  QpAttr a;
  a.qp_state = to;
  a.cur_qp_state = from;
  a.path_mtu = Mtu::mtu1024;
  a.qkey = 0x11111111;
  a.rq_psn = 0x123456;
  a.sq_psn = 0x654321;
  a.dest_qp_num = 0x12;
  a.qp_access_flags = access::local_write | access::remote_write | access::remote_read;
  a.ah_attr.port_num = 1;
  a.ah_attr.sgid_index = 1;
  a.pkey_index = 0;
  a.en_sqd_async_notify = 1;
  a.max_rd_atomic = 1;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.port_num = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  return a;
}

// Linux's qp_state_table (drivers/infiniband/core/verbs.c) for RC, UC and UD, written out bit
// by bit and independently of the implementation's grouped table: the transitions that take
// attributes.
struct Row {
  QpType type;
  QpState from, to;
  std::uint32_t required, optional;
};
using namespace qp_attr;
const std::vector<Row> kRowsWithAttributes = {
    {QpType::rc, S::reset, S::init, pkey_index | port | access_flags, 0},
    {QpType::uc, S::reset, S::init, pkey_index | port | access_flags, 0},
    {QpType::ud, S::reset, S::init, pkey_index | port | qkey, 0},
    {QpType::rc, S::init, S::init, 0, pkey_index | port | access_flags},
    {QpType::uc, S::init, S::init, 0, pkey_index | port | access_flags},
    {QpType::ud, S::init, S::init, 0, pkey_index | port | qkey},
    {QpType::rc, S::init, S::rtr, av | path_mtu | dest_qpn | rq_psn | max_dest_rd_atomic | min_rnr_timer,
     alt_path | access_flags | pkey_index},
    {QpType::uc, S::init, S::rtr, av | path_mtu | dest_qpn | rq_psn, alt_path | access_flags | pkey_index},
    {QpType::ud, S::init, S::rtr, 0, pkey_index | qkey},
    {QpType::rc, S::rtr, S::rts, sq_psn | timeout | retry_cnt | rnr_retry | max_qp_rd_atomic,
     cur_state | alt_path | access_flags | min_rnr_timer | path_mig_state},
    {QpType::uc, S::rtr, S::rts, sq_psn, cur_state | alt_path | access_flags | path_mig_state},
    {QpType::ud, S::rtr, S::rts, sq_psn, cur_state | qkey},
    {QpType::rc, S::rts, S::rts, 0, cur_state | access_flags | alt_path | path_mig_state | min_rnr_timer},
    {QpType::uc, S::rts, S::rts, 0, cur_state | access_flags | alt_path | path_mig_state},
    {QpType::ud, S::rts, S::rts, 0, cur_state | qkey},
    {QpType::rc, S::rts, S::sqd, 0, en_sqd_async_notify},
    {QpType::uc, S::rts, S::sqd, 0, en_sqd_async_notify},
    {QpType::ud, S::rts, S::sqd, 0, en_sqd_async_notify},
    {QpType::rc, S::sqd, S::rts, 0, cur_state | alt_path | access_flags | min_rnr_timer | path_mig_state},
    {QpType::uc, S::sqd, S::rts, 0, cur_state | alt_path | access_flags | path_mig_state},
    {QpType::ud, S::sqd, S::rts, 0, cur_state | qkey},
    {QpType::rc, S::sqd, S::sqd, 0,
     port | av | timeout | retry_cnt | rnr_retry | max_qp_rd_atomic | max_dest_rd_atomic | alt_path | access_flags |
         pkey_index | min_rnr_timer | path_mig_state},
    {QpType::uc, S::sqd, S::sqd, 0, av | alt_path | access_flags | pkey_index | path_mig_state},
    {QpType::ud, S::sqd, S::sqd, 0, pkey_index | qkey},
    {QpType::uc, S::sqe, S::rts, 0, cur_state | access_flags},
    {QpType::ud, S::sqe, S::rts, 0, cur_state | qkey},
};

// All legal transitions: the rows above, RESET from every state, ERR from every state but
// RESET (Linux's table has no RESET->ERR), and nothing from SQE for RC, which never enters it.
std::vector<Row> legal_rows() {
  std::vector<Row> rows = kRowsWithAttributes;
  for (QpType t : kTypes)
    for (QpState from : kStates) {
      if (t == QpType::rc && from == S::sqe) continue;
      rows.push_back({t, from, S::reset, 0, 0});
      if (from != S::reset) rows.push_back({t, from, S::err, 0, 0});
    }
  return rows;
}

const Row* find_row(const std::vector<Row>& rows, QpType t, QpState from, QpState to) {
  for (const Row& r : rows)
    if (r.type == t && r.from == from && r.to == to) return &r;
  return nullptr;
}

std::string describe(const Row& r) { return name(r.type) + " " + name(r.from) + "->" + name(r.to); }

int check(QpType t, QpState from, const QpAttr& a, std::uint32_t mask) {
  return check_modify_qp(t, from, a, mask, test_limits());
}
int check(const Row& r, std::uint32_t mask) { return check(r.type, r.from, valid_attr(r.from, r.to), mask); }

}  // namespace

TEST_CASE("modify_qp: every legal transition passes with exactly its required attributes", "[core][qp_transition]") {
  for (const Row& r : legal_rows()) {
    INFO(describe(r));
    CHECK(check(r, state | r.required) == 0);
    if (r.from == r.to) CHECK(check(r, r.required) == 0);  // the same-state modify needs no state bit
  }
}

TEST_CASE("modify_qp: leaving out any required attribute fails", "[core][qp_transition]") {
  for (const Row& r : legal_rows())
    for (int i = 0; i < 32; ++i) {
      const std::uint32_t bit = 1u << i;
      if ((r.required & bit) == 0) continue;
      INFO(describe(r) << " without bit " << i);
      CHECK(check(r, (state | r.required) & ~bit) == EINVAL);
    }
}

TEST_CASE("modify_qp: each optional attribute is accepted, every other bit refused", "[core][qp_transition]") {
  for (const Row& r : legal_rows()) {
    // alt_path is in Linux's table but refused on a device without an InfiniBand link.
    const std::uint32_t accepted = (r.required | r.optional) & ~alt_path;
    for (int i = 0; i < 32; ++i) {
      const std::uint32_t bit = 1u << i;
      if (bit == state) continue;
      INFO(describe(r) << " with bit " << i);
      CHECK(check(r, state | r.required | bit) == ((accepted & bit) != 0 ? 0 : EINVAL));
    }
    INFO(describe(r) << " with every accepted bit");
    CHECK(check(r, state | accepted) == 0);
  }
}

TEST_CASE("modify_qp: every (from, to) pair outside the table fails", "[core][qp_transition]") {
  const std::vector<Row> rows = legal_rows();
  for (QpType t : kTypes)
    for (QpState from : kStates)
      for (QpState to : kStates) {
        const Row* r = find_row(rows, t, from, to);
        INFO(name(t) << " " << name(from) << "->" << name(to));
        CHECK(check(t, from, valid_attr(from, to), state | (r != nullptr ? r->required : 0)) ==
              (r != nullptr ? 0 : EINVAL));
      }
}

TEST_CASE("modify_qp: without the state bit a modify stays in its state, which RTR and SQE cannot",
          "[core][qp_transition]") {
  for (QpType t : {QpType::uc, QpType::ud}) {
    INFO(name(t));
    CHECK(check(t, S::reset, valid_attr(S::reset, S::reset), 0) == 0);
    CHECK(check(t, S::init, valid_attr(S::init, S::init), 0) == 0);
    CHECK(check(t, S::rtr, valid_attr(S::rtr, S::rtr), 0) == EINVAL);
    CHECK(check(t, S::rts, valid_attr(S::rts, S::rts), 0) == 0);
    CHECK(check(t, S::sqd, valid_attr(S::sqd, S::sqd), 0) == 0);
    CHECK(check(t, S::sqe, valid_attr(S::sqe, S::sqe), 0) == EINVAL);
    CHECK(check(t, S::err, valid_attr(S::err, S::err), 0) == 0);
  }
  // The attributes of RTS->RTS without moving: a new RNR timer on an RC QP.
  CHECK(check(QpType::rc, S::rts, valid_attr(S::rts, S::rts), min_rnr_timer) == 0);
  // ...but not an attribute only INIT->RTR takes.
  CHECK(check(QpType::rc, S::rts, valid_attr(S::rts, S::rts), path_mtu) == EINVAL);
}

TEST_CASE("modify_qp: to RESET from every state, to ERR from every state but RESET, with only the state bit",
          "[core][qp_transition]") {
  for (QpType t : kTypes)
    for (QpState from : kStates) {
      INFO(name(t) << " from " << name(from));
      const int unless_rc_in_sqe = t == QpType::rc && from == S::sqe ? EINVAL : 0;
      CHECK(check(t, from, valid_attr(from, S::reset), state) == unless_rc_in_sqe);
      CHECK(check(t, from, valid_attr(from, S::err), state) == (from == S::reset ? EINVAL : unless_rc_in_sqe));
    }
}

TEST_CASE("modify_qp: an RC QP has no SQE state, while UC and UD leave it for RTS", "[core][qp_transition]") {
  for (QpState to : kStates) {
    INFO("RC SQE->" << name(to));
    CHECK(check(QpType::rc, S::sqe, valid_attr(S::sqe, to), state) == EINVAL);
  }
  CHECK(check(QpType::uc, S::sqe, valid_attr(S::sqe, S::rts), state | access_flags) == 0);
  CHECK(check(QpType::ud, S::sqe, valid_attr(S::sqe, S::rts), state | qkey) == 0);
}

TEST_CASE("modify_qp: cur_state must name the current state, and only where it is allowed", "[core][qp_transition]") {
  const QpType t = QpType::uc;
  QpAttr a = valid_attr(S::rtr, S::rts);
  CHECK(check(t, S::rtr, a, state | cur_state | sq_psn) == 0);
  a.cur_qp_state = S::rts;
  CHECK(check(t, S::rtr, a, state | cur_state | sq_psn) == EINVAL);

  a = valid_attr(S::sqe, S::rts);
  CHECK(check(t, S::sqe, a, state | cur_state) == 0);
  a.cur_qp_state = S::rts;  // a caller who missed the move to SQE
  CHECK(check(t, S::sqe, a, state | cur_state) == EINVAL);

  a = valid_attr(S::rts, S::rts);
  CHECK(check(t, S::rts, a, cur_state) == 0);
  a.cur_qp_state = S::sqd;
  CHECK(check(t, S::rts, a, cur_state) == EINVAL);

  // Right, but on transitions that do not take it.
  CHECK(check(t, S::init, valid_attr(S::init, S::rtr), state | cur_state | av | path_mtu | dest_qpn | rq_psn) ==
        EINVAL);
  CHECK(check(t, S::rts, valid_attr(S::rts, S::err), state | cur_state) == EINVAL);
}

TEST_CASE("modify_qp: out-of-range states and types are refused", "[core][qp_transition]") {
  QpAttr a = valid_attr(S::init, S::init);
  a.qp_state = static_cast<QpState>(7);
  CHECK(check(QpType::uc, S::init, a, state) == EINVAL);
  CHECK(check(static_cast<QpType>(1), S::init, valid_attr(S::init, S::err), state) == EINVAL);
}

namespace {

// One value check: a transition that takes the attribute, and two edits of valid_attr(): one
// just inside the limit (test_limits()), one at it.
struct ValueCase {
  const char* what;
  QpType type;
  QpState from, to;
  std::uint32_t extra;  // optional bits to add to the required ones
  void (*inside)(QpAttr&);
  void (*outside)(QpAttr&);
};

const ValueCase kValueCases[] = {
    {"port_num <= phys_port_cnt", QpType::rc, S::reset, S::init, 0, [](QpAttr& a) { a.port_num = 2; },
     [](QpAttr& a) { a.port_num = 3; }},
    {"port_num >= 1", QpType::ud, S::reset, S::init, 0, [](QpAttr& a) { a.port_num = 1; },
     [](QpAttr& a) { a.port_num = 0; }},
    {"pkey_index < pkey_table_len", QpType::ud, S::reset, S::init, 0, [](QpAttr& a) { a.pkey_index = 3; },
     [](QpAttr& a) { a.pkey_index = 4; }},
    {"ah_attr.port_num <= phys_port_cnt", QpType::rc, S::init, S::rtr, 0, [](QpAttr& a) { a.ah_attr.port_num = 2; },
     [](QpAttr& a) { a.ah_attr.port_num = 3; }},
    {"ah_attr.port_num >= 1", QpType::uc, S::init, S::rtr, 0, [](QpAttr& a) { a.ah_attr.port_num = 1; },
     [](QpAttr& a) { a.ah_attr.port_num = 0; }},
    {"ah_attr.sgid_index < gid_table_len", QpType::rc, S::init, S::rtr, 0, [](QpAttr& a) { a.ah_attr.sgid_index = 7; },
     [](QpAttr& a) { a.ah_attr.sgid_index = 8; }},
    {"port_num == ah_attr.port_num when both are given", QpType::rc, S::sqd, S::sqd, port | av,
     [](QpAttr& a) { a.port_num = a.ah_attr.port_num = 2; },
     [](QpAttr& a) {
       a.port_num = 1;
       a.ah_attr.port_num = 2;
     }},
    {"path_mtu <= 4096", QpType::uc, S::init, S::rtr, 0, [](QpAttr& a) { a.path_mtu = Mtu::mtu4096; },
     [](QpAttr& a) { a.path_mtu = static_cast<Mtu>(6); }},
    {"path_mtu >= 256", QpType::rc, S::init, S::rtr, 0, [](QpAttr& a) { a.path_mtu = Mtu::mtu256; },
     [](QpAttr& a) { a.path_mtu = static_cast<Mtu>(0); }},
    {"timeout <= 31", QpType::rc, S::rtr, S::rts, 0, [](QpAttr& a) { a.timeout = 31; },
     [](QpAttr& a) { a.timeout = 32; }},
    {"retry_cnt <= 7", QpType::rc, S::rtr, S::rts, 0, [](QpAttr& a) { a.retry_cnt = 7; },
     [](QpAttr& a) { a.retry_cnt = 8; }},
    {"rnr_retry <= 7", QpType::rc, S::rtr, S::rts, 0, [](QpAttr& a) { a.rnr_retry = 7; },
     [](QpAttr& a) { a.rnr_retry = 8; }},
    {"min_rnr_timer <= 31", QpType::rc, S::init, S::rtr, 0, [](QpAttr& a) { a.min_rnr_timer = 31; },
     [](QpAttr& a) { a.min_rnr_timer = 32; }},
    {"max_rd_atomic <= max_qp_init_rd_atom", QpType::rc, S::rtr, S::rts, 0, [](QpAttr& a) { a.max_rd_atomic = 8; },
     [](QpAttr& a) { a.max_rd_atomic = 9; }},
    {"max_dest_rd_atomic <= max_qp_rd_atom", QpType::rc, S::init, S::rtr, 0,
     [](QpAttr& a) { a.max_dest_rd_atomic = 4; }, [](QpAttr& a) { a.max_dest_rd_atomic = 5; }},
    {"sq_psn < 2^24", QpType::ud, S::rtr, S::rts, 0, [](QpAttr& a) { a.sq_psn = 0xFFFFFF; },
     [](QpAttr& a) { a.sq_psn = 0x1000000; }},
    {"rq_psn < 2^24", QpType::uc, S::init, S::rtr, 0, [](QpAttr& a) { a.rq_psn = 0xFFFFFF; },
     [](QpAttr& a) { a.rq_psn = 0x1000000; }},
    {"dest_qp_num < 2^24", QpType::rc, S::init, S::rtr, 0, [](QpAttr& a) { a.dest_qp_num = 0xFFFFFF; },
     [](QpAttr& a) { a.dest_qp_num = 0x1000000; }},
    {"qp_access_flags within the QP flags", QpType::rc, S::reset, S::init, 0,
     [](QpAttr& a) {
       a.qp_access_flags =
           access::local_write | access::remote_write | access::remote_read | access::remote_atomic | access::mw_bind;
     },
     [](QpAttr& a) { a.qp_access_flags = access::local_write | access::zero_based; }},
    {"qp_access_flags: no undefined bit", QpType::uc, S::init, S::init, access_flags,
     [](QpAttr& a) { a.qp_access_flags = 0; }, [](QpAttr& a) { a.qp_access_flags = 1u << 31; }},
};

}  // namespace

TEST_CASE("modify_qp: each value check refuses at its limit and accepts just inside it", "[core][qp_transition]") {
  const std::vector<Row> rows = legal_rows();
  for (const ValueCase& c : kValueCases) {
    INFO(c.what);
    const Row* r = find_row(rows, c.type, c.from, c.to);
    REQUIRE(r != nullptr);
    const std::uint32_t mask = state | r->required | c.extra;
    QpAttr a = valid_attr(c.from, c.to);
    c.inside(a);
    CHECK(check(c.type, c.from, a, mask) == 0);
    a = valid_attr(c.from, c.to);
    c.outside(a);
    CHECK(check(c.type, c.from, a, mask) == EINVAL);
  }
}

TEST_CASE("modify_qp: a value outside its range is ignored when the mask does not name it", "[core][qp_transition]") {
  QpAttr a = valid_attr(S::rts, S::sqd);
  a.port_num = 0;
  a.pkey_index = 100;
  a.path_mtu = static_cast<Mtu>(0);
  a.timeout = 200;
  a.sq_psn = 0xFFFFFFFF;
  a.qp_access_flags = ~0u;
  a.cur_qp_state = S::err;
  CHECK(check(QpType::rc, S::rts, a, state | en_sqd_async_notify) == 0);
}

namespace {

auto fields(const QpAttr& a) {
  return std::tuple(a.qp_state, a.cur_qp_state, a.path_mtu, a.qkey, a.rq_psn, a.sq_psn, a.dest_qp_num,
                    a.qp_access_flags, a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge,
                    a.cap.max_inline_data, a.ah_attr.dgid, a.ah_attr.sgid_index, a.ah_attr.flow_label,
                    a.ah_attr.hop_limit, a.ah_attr.traffic_class, a.ah_attr.sl, a.ah_attr.port_num, a.pkey_index,
                    a.sq_draining, a.en_sqd_async_notify, a.max_rd_atomic, a.max_dest_rd_atomic, a.min_rnr_timer,
                    a.port_num, a.timeout, a.retry_cnt, a.rnr_retry);
}

// Every field set from `v`, so that two fillings differ in every field.
QpAttr filled(std::uint8_t v) {
  QpAttr a;
  a.qp_state = static_cast<QpState>(v);
  a.cur_qp_state = static_cast<QpState>(v + 1);
  a.path_mtu = static_cast<Mtu>(v + 2);
  a.qkey = a.rq_psn = a.sq_psn = a.dest_qp_num = a.qp_access_flags = v * 0x01010101u;
  a.cap = {v, v, v, v, v};
  a.ah_attr.dgid.fill(v);
  a.ah_attr.sgid_index = a.ah_attr.hop_limit = a.ah_attr.traffic_class = a.ah_attr.sl = a.ah_attr.port_num = v;
  a.ah_attr.flow_label = v;
  a.pkey_index = v;
  a.sq_draining = (v & 1) != 0;
  a.en_sqd_async_notify = a.max_rd_atomic = a.max_dest_rd_atomic = a.min_rnr_timer = a.port_num = v;
  a.timeout = a.retry_cnt = a.rnr_retry = v;
  return a;
}

// What each mask bit copies, written field by field; bits not listed copy nothing.
struct Copy {
  std::uint32_t bit;
  void (*copy)(QpAttr& to, const QpAttr& from);
};
const Copy kCopies[] = {
    {state, [](QpAttr& t, const QpAttr& f) { t.qp_state = f.qp_state; }},
    {en_sqd_async_notify, [](QpAttr& t, const QpAttr& f) { t.en_sqd_async_notify = f.en_sqd_async_notify; }},
    {access_flags, [](QpAttr& t, const QpAttr& f) { t.qp_access_flags = f.qp_access_flags; }},
    {pkey_index, [](QpAttr& t, const QpAttr& f) { t.pkey_index = f.pkey_index; }},
    {port, [](QpAttr& t, const QpAttr& f) { t.port_num = f.port_num; }},
    {qkey, [](QpAttr& t, const QpAttr& f) { t.qkey = f.qkey; }},
    {av, [](QpAttr& t, const QpAttr& f) { t.ah_attr = f.ah_attr; }},
    {path_mtu, [](QpAttr& t, const QpAttr& f) { t.path_mtu = f.path_mtu; }},
    {timeout, [](QpAttr& t, const QpAttr& f) { t.timeout = f.timeout; }},
    {retry_cnt, [](QpAttr& t, const QpAttr& f) { t.retry_cnt = f.retry_cnt; }},
    {rnr_retry, [](QpAttr& t, const QpAttr& f) { t.rnr_retry = f.rnr_retry; }},
    {rq_psn, [](QpAttr& t, const QpAttr& f) { t.rq_psn = f.rq_psn; }},
    {max_qp_rd_atomic, [](QpAttr& t, const QpAttr& f) { t.max_rd_atomic = f.max_rd_atomic; }},
    {min_rnr_timer, [](QpAttr& t, const QpAttr& f) { t.min_rnr_timer = f.min_rnr_timer; }},
    {sq_psn, [](QpAttr& t, const QpAttr& f) { t.sq_psn = f.sq_psn; }},
    {max_dest_rd_atomic, [](QpAttr& t, const QpAttr& f) { t.max_dest_rd_atomic = f.max_dest_rd_atomic; }},
    {dest_qpn, [](QpAttr& t, const QpAttr& f) { t.dest_qp_num = f.dest_qp_num; }},
};

}  // namespace

TEST_CASE("apply_modify_qp copies exactly the fields the mask names", "[core][qp_transition]") {
  const QpAttr poison = filled(0xA5);
  const QpAttr source = filled(0x3C);
  QpAttr all_expected = poison;
  for (int i = 0; i < 32; ++i) {
    const std::uint32_t bit = 1u << i;
    QpAttr expected = poison;
    for (const Copy& c : kCopies)
      if (c.bit == bit) {
        c.copy(expected, source);
        c.copy(all_expected, source);
      }
    QpAttr qp = poison;
    apply_modify_qp(qp, source, bit);
    INFO("bit " << i);
    CHECK(fields(qp) == fields(expected));
  }
  QpAttr qp = poison;
  apply_modify_qp(qp, source, ~0u);
  CHECK(fields(qp) == fields(all_expected));
  // cur_state, cap and sq_draining are not attributes a modify sets.
  CHECK(qp.cur_qp_state == poison.cur_qp_state);
  CHECK(qp.cap.max_send_wr == poison.cap.max_send_wr);
  CHECK(qp.sq_draining == poison.sq_draining);
  qp = poison;
  apply_modify_qp(qp, source, 0);
  CHECK(fields(qp) == fields(poison));
}
