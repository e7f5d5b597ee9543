// NumPy archive I/O: the bridge between golden cases exported from a real MaxText run
// (tensors.npz, written by np.savez or np.savez_compressed) and shardtrace's Array. An .npz
// is a zip archive with one `<name>.npy` member per array; each member is a .npy file (magic,
// version, a Python-dict header giving dtype, memory order and shape, then raw data).
//
// Reading is liberal in what numpy actually writes (format versions 1.0-3.0, stored or
// deflated members, Fortran order, float16/32/64, 8-64 bit signed and unsigned integers,
// bool) and strict about everything else: any malformed or unsupported input is an Error
// whose one-line message names the archive and the array. Every element becomes a float
// (Array's numeric representation): floating kinds load as kFloat32, integer kinds as kInt32,
// bool as kBool. Integers beyond +-2^24 are rejected rather than silently rounded, because
// goldens compare integer arrays exactly.
//
// Writing produces what np.savez would: an uncompressed archive of version 1.0 .npy members
// ('<f4' for every floating dtype, '<i4' for int32, '|b1' for bool), replaced atomically so an
// error never leaves a partial archive behind.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "numeric/array.h"

namespace shardtrace {

class Progress;

// Reads every array of the .npz at `path`; member `name.npy` becomes key `name`.
// `progress`, when given, shows which member is being read.
std::map<std::string, Array> ReadNpz(const std::string& path, Progress* progress = nullptr);

// Writes `arrays` (all numeric) as an uncompressed .npz at `path`, replacing any existing
// file atomically. Throws Error naming `path` and the array on a symbolic array or an int32
// array holding a non-integer value.
void WriteNpz(const std::string& path, const std::map<std::string, Array>& arrays);

// The single-.npy layer under ReadNpz/WriteNpz, public for standalone .npy files and tests.
// `context` starts every error message, e.g. "golden/tensors.npz: array 'wo'".
Array DecodeNpy(std::string_view bytes, std::string_view context);
std::string EncodeNpy(const Array& array, std::string_view context);

}  // namespace shardtrace
