#include "util/printable.h"

#include <fmt/format.h>

namespace shardtrace {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (no overlongs, no surrogates), or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\0') {
      out += "\\0";
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (const size_t n = Utf8Length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
  return out;
}

// Cuts at a byte offset without splitting a UTF-8 sequence (moves back to a lead byte).
size_t CharBoundary(std::string_view s, size_t at) {
  while (at > 0 && at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  return at;
}

}  // namespace

std::string PrintableMessage(std::string_view message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const size_t space = message.find(' ', i);
    const size_t end = space == std::string_view::npos ? message.size() : space;
    std::string_view token = message.substr(i, end - i);
    if (token.size() > kMaxToken) {
      const size_t head = CharBoundary(token, 100);
      const size_t tail = CharBoundary(token, token.size() - 20);
      out += Escape(token.substr(0, head));
      out += fmt::format("...({} bytes)...", token.size());
      out += Escape(token.substr(tail));
    } else {
      out += Escape(token);
    }
    if (end < message.size()) out.push_back(' ');
    i = end + 1;
  }
  return out;
}

std::string WithoutTerminalControls(std::string_view text) {
  const auto is_control = [&](size_t i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\t') return false;
    if (c < 0x20 || c == 0x7F) return true;
    return c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
           static_cast<unsigned char>(text[i + 1]) <= 0x9F;
  };
  size_t i = 0;
  while (i < text.size() && !is_control(i)) ++i;
  if (i == text.size()) return std::string(text);  // the usual case: nothing to change
  std::string out(text.substr(0, i));
  out.reserve(text.size() + 16);
  for (; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!is_control(i)) {
      out.push_back(static_cast<char>(c));
    } else if (c == 0xC2) {
      out += fmt::format("\\u{{{:02x}}}", static_cast<unsigned char>(text[i + 1]));
      ++i;
    } else if (c == 0) {
      out += "\\0";
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

}  // namespace shardtrace
