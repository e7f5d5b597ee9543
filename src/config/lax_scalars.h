// How MaxText's config (pydantic's lax mode, types.py MaxTextConfig) reads a string given for
// an int, float or bool key: `ici_expert_parallelism: "4"` is 4, `capacity_factor: "1.5"` is
// 1.5, `sparse_matmul: "yes"` is True, while "4.5" for an int or "maybe" for a bool is refused.
// Measured on maxtext 0.2.5 with pydantic 2.14 (docs/config.md, "Quoted values").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shardtrace::config_internal {

// Surrounding whitespace, a sign, decimal digits (single underscores between them) and
// optionally a fraction of zeros: " 4 ", "+4", "1_000", "4.00". Not "4.", "4.5", "1e3", "0x10".
// nullopt also when the value does not fit 64 bits.
std::optional<int64_t> LaxIntFromString(std::string_view text);

// Python's float syntax: surrounding whitespace, a sign, digits with an optional '.' and
// exponent (single underscores between digits), or inf, infinity, nan in any case.
std::optional<double> LaxFloatFromString(std::string_view text);

// 1, on, t, true, y, yes / 0, off, f, false, n, no in any case, nothing around them.
std::optional<bool> LaxBoolFromString(std::string_view text);

}  // namespace shardtrace::config_internal
