#include "emulator/net/fault_plan.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace softrdma::net {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// "1%", "0.5%" or "0.01" (a fraction) → a probability in [0, 1].
std::optional<double> probability(std::string_view v) {
  const bool percent = !v.empty() && v.back() == '%';
  if (percent) v.remove_suffix(1);
  double x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x)) return std::nullopt;
  if (percent) x /= 100;
  if (x < 0 || x > 1) return std::nullopt;
  return x;
}

// "200us", "3ms", "1s", "500ns" → nanoseconds.
std::optional<core::Time> duration(std::string_view v) {
  static constexpr struct {
    std::string_view suffix;
    core::Time ns;
  } kUnits[] = {{"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000}};
  for (const auto& u : kUnits) {
    if (v.size() <= u.suffix.size() || v.substr(v.size() - u.suffix.size()) != u.suffix) continue;
    const std::string_view number = v.substr(0, v.size() - u.suffix.size());
    if (u.suffix == "s" && (number.back() == 'n' || number.back() == 'u' || number.back() == 'm')) continue;
    std::uint64_t x = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), x);
    if (ec != std::errc() || end != number.data() + number.size() || x > ~core::Time{0} / u.ns) return std::nullopt;
    return x * u.ns;
  }
  return std::nullopt;
}

// "3+7+12" → {3, 7, 12}, sorted: 1-based packet positions.
std::optional<std::vector<std::uint64_t>> positions(std::string_view v) {
  std::vector<std::uint64_t> out;
  const std::string err = for_each_listed(v, [&](std::string_view part) -> std::string {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (ec != std::errc() || end != part.data() + part.size() || n == 0) return "bad";
    out.push_back(n);
    return {};
  });
  if (!err.empty()) return std::nullopt;
  std::sort(out.begin(), out.end());
  return out;
}

// Applies NAME=VALUE (with its :SUB=VALUE options) to one direction; an error text or empty.
std::string apply(DirectionFaults& dir, std::string_view name, std::string_view value, std::string_view options) {
  // Appended, not "literal" + std::string: GCC 12 at -O3 sees a false -Wrestrict in that.
  const auto bad = [&](std::string_view what) {
    return std::string(what).append(" in '").append(name).append("=").append(value) + "'";
  };
  if (name == "opcode" || name == "qp" || name == "drop") {
    if (!options.empty()) return bad("no options are allowed");
    if (name == "drop") {
      auto at = positions(value);
      if (!at) return bad("packet numbers from 1, '+'-separated, are expected");
      dir.drop_nth.insert(dir.drop_nth.end(), at->begin(), at->end());
      std::sort(dir.drop_nth.begin(), dir.drop_nth.end());
      return {};
    }
    const std::string err = name == "opcode" ? dir.filter.add_opcodes(value) : dir.filter.add_qps(value);
    return err.empty() ? err : bad(err);
  }
  FaultRates& r = dir.rates;
  if (name == "delay") {
    const auto d = duration(value);
    if (!d) return bad("a duration such as 200us is expected");
    r.delay_ns = *d;
  } else {
    const auto p = probability(value);
    if (!p) return bad("a probability such as 1% is expected");
    if (name == "loss")
      r.loss = *p;
    else if (name == "dup")
      r.dup = *p;
    else if (name == "corrupt")
      r.corrupt = *p;
    else if (name == "reorder")
      r.reorder = *p;
    else
      return std::string("unknown fault '").append(name) +
             "' (loss, dup, corrupt, reorder, delay, opcode, qp, drop, rnr, linkdown, seed)";
  }
  while (!options.empty()) {
    const std::size_t colon = options.find(':');
    const std::string_view opt = options.substr(0, colon);
    options = colon == std::string_view::npos ? std::string_view{} : options.substr(colon + 1);
    const std::size_t eq = opt.find('=');
    const std::string_view key = opt.substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view{} : opt.substr(eq + 1);
    if (name == "delay" && key == "jitter") {
      const auto j = duration(val);
      if (!j) return bad("jitter needs a duration");
      r.jitter_ns = *j;
    } else if (name == "reorder" && key == "depth") {
      std::uint32_t depth = 0;
      const auto [end, ec] = std::from_chars(val.data(), val.data() + val.size(), depth);
      if (ec != std::errc() || end != val.data() + val.size() || depth == 0 || depth > 1024)
        return bad("depth needs a count from 1 to 1024");
      r.reorder_depth = depth;
    } else {
      return bad(std::string("unknown option '").append(opt) + "'");
    }
  }
  return {};
}

// "linkdown=AT[:for=DURATION]".
std::string apply_link_down(FaultPlan& plan, std::string_view item, std::string_view value, std::string_view options) {
  const auto at = duration(value == "0" ? "0s" : value);
  if (!at) return std::string("a duration such as 100ms is expected in '").append(item) + "'";
  LinkDown down{*at};
  if (!options.empty()) {
    if (!options.starts_with("for=")) return std::string("only ':for=DURATION' may follow in '").append(item) + "'";
    const auto length = duration(options.substr(4));
    if (!length || *length == 0) return std::string("for= needs a duration such as 2s in '").append(item) + "'";
    down.length = *length;
  }
  plan.link_down = down;
  return {};
}

}  // namespace

FaultParse parse_faults(std::string_view spec) {
  FaultPlan plan;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) return {std::nullopt, std::string("'").append(item) + "' is not NAME=VALUE"};
    std::string_view name = item.substr(0, eq);
    std::string_view rest = item.substr(eq + 1);
    const std::size_t colon = rest.find(':');
    const std::string_view value = rest.substr(0, colon);
    const std::string_view options = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    if (name == "seed" || name == "rnr" || name == "rx.rnr") {
      std::uint64_t n = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || !options.empty() ||
          (name != "seed" && n > 0xFFFF'FFFF))
        return {std::nullopt, std::string(name).append(" needs a number in '").append(item) + "'"};
      if (name == "seed")
        plan.seed = n;
      else
        plan.forced_rnr = static_cast<std::uint32_t>(n);
      continue;
    }
    if (name == "linkdown") {
      if (std::string err = apply_link_down(plan, item, value, options); !err.empty()) return {std::nullopt, err};
      continue;
    }
    if (name == "tx.rnr")
      return {std::nullopt, "rnr applies to the requests the device receives: 'rnr=K', not 'tx.rnr'"};
    bool tx = true, rx = true;
    if (name.starts_with("tx.")) {
      rx = false;
      name.remove_prefix(3);
    } else if (name.starts_with("rx.")) {
      tx = false;
      name.remove_prefix(3);
    }
    for (DirectionFaults* r : {tx ? &plan.tx : nullptr, rx ? &plan.rx : nullptr}) {
      if (r == nullptr) continue;
      if (std::string err = apply(*r, name, value, options); !err.empty()) return {std::nullopt, err};
    }
  }
  return {plan, {}};
}

FaultDice::FaultDice(const FaultRates& rates, std::uint64_t seed, std::size_t corrupt_from)
    : rates_(rates), state_(seed), corrupt_from_(corrupt_from) {}

double FaultDice::uniform() {
  // splitmix64 (Steele, Lea, Flood 2014): every seed gives a full-period, well-mixed sequence.
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

Fate FaultDice::roll(std::size_t length) {
  // Always the same six draws per packet, whatever they decide, so one decision never shifts
  // the sequence of the next packet's.
  const double loss = uniform(), dup = uniform(), corrupt = uniform(), where = uniform(), reorder = uniform(),
               jitter = uniform();
  Fate f;
  f.lost = loss < rates_.loss;
  f.duplicated = dup < rates_.dup;
  if (corrupt < rates_.corrupt && length > corrupt_from_) {
    const auto bit = static_cast<std::size_t>(where * static_cast<double>((length - corrupt_from_) * 8));
    f.corrupt_at = corrupt_from_ + bit / 8;
    f.corrupt_bit = static_cast<std::uint8_t>(bit % 8);
  }
  if (reorder < rates_.reorder)
    f.overtaken_by = 1 + static_cast<std::uint32_t>(jitter * rates_.reorder_depth) % rates_.reorder_depth;
  f.delay_ns = rates_.delay_ns + static_cast<core::Time>(jitter * static_cast<double>(rates_.jitter_ns));
  return f;
}

}  // namespace softrdma::net
