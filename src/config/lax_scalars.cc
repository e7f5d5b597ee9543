#include "config/lax_scalars.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string>

namespace shardtrace::config_internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view StripSpace(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// `text` without its underscores when each stands between two digits; nullopt otherwise.
std::optional<std::string> WithoutDigitUnderscores(std::string_view text) {
  std::string out;
  for (size_t k = 0; k < text.size(); ++k) {
    if (text[k] != '_') {
      out.push_back(text[k]);
    } else if (k == 0 || k + 1 == text.size() || !IsDigit(text[k - 1]) || !IsDigit(text[k + 1])) {
      return std::nullopt;
    }
  }
  return out;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The length of the run of digits at `pos`.
size_t Digits(std::string_view text, size_t pos) {
  size_t end = pos;
  while (end < text.size() && IsDigit(text[end])) ++end;
  return end - pos;
}

}  // namespace

std::optional<int64_t> LaxIntFromString(std::string_view text) {
  const std::optional<std::string> plain = WithoutDigitUnderscores(StripSpace(text));
  if (!plain) return std::nullopt;
  std::string_view body = *plain;
  if (const size_t dot = body.find('.'); dot != std::string_view::npos) {
    const std::string_view fraction = body.substr(dot + 1);
    if (fraction.empty() || fraction.find_first_not_of('0') != std::string_view::npos)
      return std::nullopt;
    body = body.substr(0, dot);
  }
  std::string digits;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    if (body[0] == '-') digits.push_back('-');
    body.remove_prefix(1);
  }
  if (body.empty() || Digits(body, 0) != body.size()) return std::nullopt;
  digits.append(body);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

std::optional<double> LaxFloatFromString(std::string_view text) {
  const std::optional<std::string> plain = WithoutDigitUnderscores(StripSpace(text));
  if (!plain) return std::nullopt;
  const std::string_view body = *plain;
  size_t pos = body.empty() || (body[0] != '+' && body[0] != '-') ? 0 : 1;
  const std::string word = Lower(body.substr(pos));
  if (word == "inf" || word == "infinity" || word == "nan") {
    // strtod reads these words the same way, sign included.
    return std::strtod(plain->c_str(), nullptr);
  }
  const size_t whole = Digits(body, pos);
  pos += whole;
  size_t fraction = 0;
  if (pos < body.size() && body[pos] == '.') {
    fraction = Digits(body, pos + 1);
    pos += 1 + fraction;
  }
  if (whole + fraction == 0) return std::nullopt;
  if (pos < body.size() && (body[pos] == 'e' || body[pos] == 'E')) {
    ++pos;
    if (pos < body.size() && (body[pos] == '+' || body[pos] == '-')) ++pos;
    const size_t exponent = Digits(body, pos);
    if (exponent == 0) return std::nullopt;
    pos += exponent;
  }
  if (pos != body.size()) return std::nullopt;
  return std::strtod(plain->c_str(), nullptr);
}

std::optional<bool> LaxBoolFromString(std::string_view text) {
  constexpr std::array<std::string_view, 6> kTrue = {"1", "on", "t", "true", "y", "yes"};
  constexpr std::array<std::string_view, 6> kFalse = {"0", "off", "f", "false", "n", "no"};
  const std::string word = Lower(text);
  for (const std::string_view w : kTrue)
    if (word == w) return true;
  for (const std::string_view w : kFalse)
    if (word == w) return false;
  return std::nullopt;
}

}  // namespace shardtrace::config_internal
