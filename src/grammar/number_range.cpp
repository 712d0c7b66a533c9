#include "grammar/number_range.h"

#include <string>
#include <vector>

#include <fmt/format.h>

namespace moetier::grammar {

namespace {

std::string digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n);
}

std::string alts(const std::vector<std::string>& a) {
  if (a.size() == 1) return a[0];
  std::string out = "(";
  for (size_t i = 0; i < a.size(); ++i) out += (i ? " | " : "") + a[i];
  return out + ")";
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Digit strings of equal length n, a <= s <= b digit by digit (leading zeros allowed: these
// are the tails of longer numbers).
std::string same_length(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a == b) return fmt::format("\"{}\"", a);
  const std::string a_rest = a.substr(1), b_rest = b.substr(1);
  const bool rest_free = a_rest == std::string(a_rest.size(), '0') && b_rest == std::string(b_rest.size(), '9');
  if (a[0] == b[0]) return join(fmt::format("\"{}\"", a[0]), same_length(a_rest, b_rest));
  if (rest_free) return join(fmt::format("[{}-{}]", a[0], b[0]), digits(a_rest.size()));
  // First digit a[0] with a tail >= a_rest, the digits strictly between with any tail,
  // b[0] with a tail <= b_rest; an end whose tail is unconstrained joins the middle class.
  const bool low_free = a_rest == std::string(a_rest.size(), '0');
  const bool high_free = b_rest == std::string(b_rest.size(), '9');
  const char mid_lo = low_free ? a[0] : static_cast<char>(a[0] + 1);
  const char mid_hi = high_free ? b[0] : static_cast<char>(b[0] - 1);
  std::vector<std::string> out;
  if (!low_free) out.push_back(join(fmt::format("\"{}\"", a[0]), same_length(a_rest, std::string(a_rest.size(), '9'))));
  if (mid_lo <= mid_hi) {
    out.push_back(join(mid_lo == mid_hi ? fmt::format("\"{}\"", mid_lo) : fmt::format("[{}-{}]", mid_lo, mid_hi),
                       digits(a_rest.size())));
  }
  if (!high_free) out.push_back(join(fmt::format("\"{}\"", b[0]), same_length(std::string(b_rest.size(), '0'), b_rest)));
  return alts(out);
}

// Non-negative integers in [lo, hi] written without leading zeros; hi missing = up to
// kMaxDigits digits. Empty when the range is empty.
std::string unsigned_range(uint64_t lo, std::optional<uint64_t> hi) {
  if (hi && *hi < lo) return "";
  const std::string lo_s = std::to_string(lo);
  std::vector<std::string> out;
  const size_t max_len = hi ? std::to_string(*hi).size() : kMaxDigits;
  for (size_t len = lo_s.size(); len <= max_len; ++len) {
    const std::string first = len == lo_s.size() ? lo_s : (len == 1 ? "0" : "1" + std::string(len - 1, '0'));
    if (!hi && len > lo_s.size()) {
      // Every longer length up to the cap at once.
      out.push_back(join("[1-9]", len == kMaxDigits ? digits(len - 1)
                                                    : fmt::format("[0-9]{{{},{}}}", len - 1, kMaxDigits - 1)));
      break;
    }
    const std::string last = hi && len == max_len ? std::to_string(*hi) : std::string(len, '9');
    out.push_back(same_length(first, last));
  }
  return alts(out);
}

// Magnitudes m (integer part and optional fraction, no sign) with lo <(=) m <(=) hi.
std::string magnitude_range(NumberBound lo, std::optional<NumberBound> hi) {
  const std::string any_frac = fmt::format("(\".\" [0-9]{{1,{}}})?", kMaxDigits);
  const std::string zero_frac = fmt::format("(\".\" \"0\"{{1,{}}})?", kMaxDigits);
  const std::string nonzero_frac = fmt::format("\".\" [0-9]{{0,{}}} [1-9]", kMaxDigits - 1);
  std::vector<std::string> out;
  // Integer parts strictly inside the interval take any fraction.
  const uint64_t first = static_cast<uint64_t>(lo.value) + (lo.exclusive ? 1 : 0);
  std::optional<uint64_t> last;  // missing: no upper limit
  bool any_inside = true;
  if (hi) {
    any_inside = hi->value > 0;
    if (any_inside) last = static_cast<uint64_t>(hi->value) - 1;
  }
  if (any_inside && (!last || first <= *last)) {
    std::string r = unsigned_range(first, last);
    if (!r.empty()) out.push_back(r + " " + any_frac);
  }
  // The lower bound itself, when exclusive: only with a non-zero fraction.
  if (lo.exclusive && (!hi || hi->value > lo.value)) out.push_back(fmt::format("\"{}\" {}", lo.value, nonzero_frac));
  // The upper bound itself, when inclusive: only with a zero fraction.
  if (hi && !hi->exclusive && (hi->value > lo.value || (hi->value == lo.value && !lo.exclusive))) {
    out.push_back(fmt::format("\"{}\" {}", hi->value, zero_frac));
  }
  if (out.empty()) return "";
  return alts(out);
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> out;
  if (!lo || *lo < 0) {
    // Negative numbers: "-" then a magnitude in [max(1, -hi), -lo].
    const uint64_t mag_lo = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = static_cast<uint64_t>(-*lo);
    std::string r = unsigned_range(mag_lo, mag_hi);
    if (!r.empty()) out.push_back("\"-\" " + r);
  }
  if (!hi || *hi >= 0) {
    std::optional<uint64_t> h;
    if (hi) h = static_cast<uint64_t>(*hi);
    std::string r = unsigned_range(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0, h);
    if (!r.empty()) out.insert(out.begin(), r);
  }
  return out.empty() ? "\"\"" : alts(out);
}

std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<std::string> out;
  // Non-negative side: x >= 0 (and x > 0 when the upper side excludes 0 it is empty).
  const bool has_nonneg = !hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive);
  if (has_nonneg) {
    const NumberBound mlo = lo && lo->value >= 0 ? *lo : NumberBound{0, false};
    std::string r = magnitude_range(mlo, hi);
    if (!r.empty()) out.push_back(r);
  }
  // Negative side: "-" and a magnitude between -hi (when hi <= 0) and -lo.
  if (!lo || lo->value < 0) {
    NumberBound mlo{0, false};
    if (hi && hi->value <= 0) mlo = {-hi->value, hi->exclusive};
    if (mlo.value == 0 && !mlo.exclusive) mlo.exclusive = has_nonneg;  // "-0" adds nothing
    std::optional<NumberBound> mhi;
    if (lo) mhi = NumberBound{-lo->value, lo->exclusive};
    std::string r = magnitude_range(mlo, mhi);
    if (!r.empty()) out.push_back("\"-\" " + r);
  }
  return out.empty() ? "\"\"" : alts(out);
}

}  // namespace moetier::grammar
