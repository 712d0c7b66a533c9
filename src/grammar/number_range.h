// GBNF for decimal numbers within integer bounds, as JSON writes them (no leading zeros, no
// '+', no exponent). Digit counts are capped (kMaxDigits) so an unbounded side still ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace moetier::grammar {

inline constexpr int kMaxDigits = 16;  // integer part digits (and fraction digits)

struct NumberBound {
  int64_t value = 0;  // |value| < 10^kMaxDigits
  bool exclusive = false;
};

// Integers n with lo <= n <= hi (a missing side is unbounded). Requires lo <= hi.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// Decimal numbers x (integer part and optional fraction) between the bounds. Requires a
// non-empty interval.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace moetier::grammar
