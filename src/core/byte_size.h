// Byte counts from environment variables: "1073741824", "8G", "512M", "64K".
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <optional>

namespace smelt {

/// Parses a byte count with an optional K/M/G suffix (powers of 1024). Nothing for null, empty,
/// unparsable text (a sign, trailing junk) or a value past size_t: a typo must not silently set
/// a limit of zero.
inline std::optional<size_t> parse_byte_size(const char* text) {
  if (!text || *text < '0' || *text > '9') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno == ERANGE) return std::nullopt;
  int shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    case '\0': case 'b': case 'B': break;
    default: return std::nullopt;
  }
  if (*end == 'B' || *end == 'b') ++end;  // "8GB" reads as 8 GiB too
  if (*end != '\0') return std::nullopt;
  if (shift && v > (std::numeric_limits<size_t>::max() >> shift)) return std::nullopt;
  return static_cast<size_t>(v << shift);
}

/// The byte count in environment variable `name`, else `fallback` (unset or unparsable).
inline size_t byte_size_from_env(const char* name, size_t fallback) {
  return parse_byte_size(std::getenv(name)).value_or(fallback);
}

}  // namespace smelt
