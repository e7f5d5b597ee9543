#include "io/npz.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "io/atomic_file.h"
#include "io/input_file.h"
#include "util/error.h"
#include "util/progress.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kNpyMagic("\x93NUMPY", 6);
// Integers are stored as floats (see array.h); beyond 2^24 that would silently round, and
// golden integer arrays are compared exactly, so larger values are rejected instead.
constexpr int64_t kMaxExactInt = int64_t{1} << 24;
// Bounds against hostile archives, checked before anything is inflated or allocated: real
// golden cases hold a dozen small arrays with headers of ~100 bytes. An array's size has no
// fixed bound (a Mixtral layer slice holds 1.9 GB members): each member's .npy header is
// inflated first, and its declared size must be exactly what the header's shape and dtype
// need and must fit in this machine's memory (MemoryBytes), so a few MB of deflate claiming
// gigabytes is refused before anything is inflated or allocated.
constexpr zip_int64_t kMaxNpzMembers = 1024;
constexpr uint64_t kMaxNpyHeaderBytes = 65536;
constexpr size_t kMaxRank = 32;

// ---------------------------------------------------------------------------------------
// Byte order. The .npy descriptors shardtrace accepts and writes are little-endian; these
// helpers assemble bytes explicitly so the code is also right on a big-endian host.

template <typename U>
U LoadLittleEndian(const unsigned char* p) {
  U value = 0;
  for (size_t i = 0; i < sizeof(U); ++i) value |= static_cast<U>(static_cast<U>(p[i]) << (8 * i));
  return value;
}

template <typename U>
void AppendLittleEndian(U value, std::string& out) {
  for (size_t i = 0; i < sizeof(U); ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
}

float HalfToFloat(uint16_t half) {
  const bool negative = (half & 0x8000u) != 0;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  const uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return negative ? -magnitude : magnitude;
  }
  const uint32_t sign = negative ? 0x80000000u : 0u;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

// `text` made safe for a one-line error message: non-printable bytes (which a corrupted
// header, or a member name, can hold) are escaped and long text is cut.
std::string Printable(std::string_view text, size_t max_chars = 100) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max_chars; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > max_chars) out += "...";
  return out;
}

// A header for error messages, without numpy's space-and-newline padding.
std::string Excerpt(std::string_view header) {
  while (!header.empty() && (header.back() == ' ' || header.back() == '\n')) {
    header.remove_suffix(1);
  }
  return Printable(header);
}

std::string ShapeToPythonTuple(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

// ---------------------------------------------------------------------------------------
// The .npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (4, 8, 16), }
// numpy reads it with ast.literal_eval; this parser accepts the subset numpy writes (plus
// double quotes and Python 2 "8L" integers) and reports anything else precisely.

struct HeaderValue {
  enum class Kind { kString, kBool, kTuple, kList };
  Kind kind = Kind::kString;
  std::string text;           // kString
  bool flag = false;          // kBool
  std::vector<int64_t> ints;  // kTuple
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view context) : text_(text), context_(context) {}

  NpyHeader Parse() {
    const std::map<std::string, HeaderValue> dict = ParseDict();
    for (const auto& [key, value] : dict) {
      if (key != "descr" && key != "fortran_order" && key != "shape") {
        Bad(fmt::format("unexpected key '{}' (expected only 'descr', 'fortran_order', 'shape')",
                        Printable(key)));
      }
    }
    NpyHeader header;
    const HeaderValue& descr = Require(dict, "descr");
    if (descr.kind == HeaderValue::Kind::kList) {
      Fail(
          "{}: unsupported dtype: structured (record) arrays are not supported (expected "
          "float, int or bool)",
          context_);
    }
    if (descr.kind != HeaderValue::Kind::kString) Bad("'descr' is not a string");
    header.descr = descr.text;
    const HeaderValue& fortran = Require(dict, "fortran_order");
    if (fortran.kind != HeaderValue::Kind::kBool) Bad("'fortran_order' is not True or False");
    header.fortran_order = fortran.flag;
    const HeaderValue& shape = Require(dict, "shape");
    if (shape.kind != HeaderValue::Kind::kTuple) Bad("'shape' is not a tuple of integers");
    header.shape = shape.ints;
    if (header.shape.size() > kMaxRank)
      Fail("{}: shape of rank {}; expected rank at most {}", context_, header.shape.size(),
           kMaxRank);
    return header;
  }

 private:
  [[noreturn]] void Bad(std::string_view what) const {
    Fail("{}: bad .npy header: {} (header: {})", context_, what, Excerpt(text_));
  }

  const HeaderValue& Require(const std::map<std::string, HeaderValue>& dict,
                             const std::string& key) const {
    const auto it = dict.find(key);
    if (it == dict.end()) Bad(fmt::format("missing key '{}'", key));
    return it->second;
  }

  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool AtEnd() const { return pos_ >= text_.size(); }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  void Expect(char c) {
    SkipSpace();
    if (Peek() != c || AtEnd()) Bad(fmt::format("expected '{}' at offset {}", c, pos_));
    ++pos_;
  }

  std::map<std::string, HeaderValue> ParseDict() {
    std::map<std::string, HeaderValue> dict;
    Expect('{');
    SkipSpace();
    while (Peek() != '}') {
      const std::string key = ParseString();
      Expect(':');
      HeaderValue value = ParseValue();
      if (!dict.emplace(key, std::move(value)).second)
        Bad(fmt::format("duplicate key '{}'", Printable(key)));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        SkipSpace();
      } else if (Peek() != '}') {
        Bad(fmt::format("expected ',' or '}}' at offset {}", pos_));
      }
    }
    Expect('}');
    SkipSpace();
    if (!AtEnd()) Bad(fmt::format("unexpected text after the dict at offset {}", pos_));
    return dict;
  }

  std::string ParseString() {
    SkipSpace();
    const char quote = Peek();
    if (quote != '\'' && quote != '"')
      Bad(fmt::format("expected a quoted string at offset {}", pos_));
    ++pos_;
    std::string out;
    while (!AtEnd() && Peek() != quote) {
      if (Peek() == '\\') ++pos_;  // numpy never escapes, but skip the escaped char anyway
      if (!AtEnd()) out.push_back(text_[pos_++]);
    }
    if (AtEnd()) Bad("unterminated string");
    ++pos_;
    return out;
  }

  HeaderValue ParseValue() {
    SkipSpace();
    HeaderValue value;
    const char c = Peek();
    if (c == '\'' || c == '"') {
      value.kind = HeaderValue::Kind::kString;
      value.text = ParseString();
    } else if (text_.substr(pos_, 4) == "True") {
      value.kind = HeaderValue::Kind::kBool;
      value.flag = true;
      pos_ += 4;
    } else if (text_.substr(pos_, 5) == "False") {
      value.kind = HeaderValue::Kind::kBool;
      value.flag = false;
      pos_ += 5;
    } else if (c == '(') {
      value.kind = HeaderValue::Kind::kTuple;
      value.ints = ParseIntTuple();
    } else if (c == '[') {
      value.kind = HeaderValue::Kind::kList;
      SkipBracketed();
    } else {
      Bad(fmt::format("unexpected value at offset {}", pos_));
    }
    return value;
  }

  // "()", "(8,)", "(4, 8, 16)"; "(8)" is the integer 8 in Python, not a shape.
  std::vector<int64_t> ParseIntTuple() {
    Expect('(');
    std::vector<int64_t> ints;
    bool trailing_comma = false;
    SkipSpace();
    while (Peek() != ')') {
      ints.push_back(ParseNonNegativeInt());
      SkipSpace();
      trailing_comma = Peek() == ',';
      if (trailing_comma) {
        ++pos_;
        SkipSpace();
      } else if (Peek() != ')') {
        Bad(fmt::format("expected ',' or ')' in 'shape' at offset {}", pos_));
      }
    }
    ++pos_;
    if (ints.size() == 1 && !trailing_comma) Bad("'shape' is a parenthesised integer, not a tuple");
    return ints;
  }

  int64_t ParseNonNegativeInt() {
    SkipSpace();
    if (Peek() < '0' || Peek() > '9' || AtEnd()) {
      Bad(fmt::format("expected a non-negative integer at offset {}", pos_));
    }
    int64_t value = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      const int digit = Peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) Bad("dimension too large");
      value = value * 10 + digit;
      ++pos_;
    }
    if (Peek() == 'L' || Peek() == 'l') ++pos_;  // Python 2 long literal
    return value;
  }

  // Skips a nested [...] value (structured dtype descr) so the dtype error can name it.
  void SkipBracketed() {
    int depth = 0;
    do {
      if (AtEnd()) Bad("unterminated list");
      const char c = Peek();
      if (c == '\'' || c == '"') {
        ParseString();
        continue;
      }
      if (c == '[' || c == '(') ++depth;
      if (c == ']' || c == ')') --depth;
      ++pos_;
    } while (depth > 0);
  }

  std::string_view text_;
  std::string_view context_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------
// Element types.

struct ElementType {
  char kind = 'f';  // 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  int size = 4;     // bytes
};

ElementType ParseDescr(std::string_view descr, std::string_view context) {
  const auto unsupported = [&]() {
    Fail("{}: unsupported dtype '{}' (expected float, int or bool)", context, Printable(descr));
  };
  if (descr.size() < 3) unsupported();
  const char order = descr[0];
  ElementType type;
  type.kind = descr[1];
  const std::string_view digits = descr.substr(2);
  if (digits.size() != 1 || digits[0] < '1' || digits[0] > '8') unsupported();
  type.size = digits[0] - '0';
  const bool supported =
      (type.kind == 'f' && (type.size == 2 || type.size == 4 || type.size == 8)) ||
      ((type.kind == 'i' || type.kind == 'u') &&
       (type.size == 1 || type.size == 2 || type.size == 4 || type.size == 8)) ||
      (type.kind == 'b' && type.size == 1);
  if (!supported || (order != '<' && order != '>' && order != '|' && order != '=')) unsupported();
  // Byte order is meaningless for one-byte types; numpy writes '|' there.
  if (type.size > 1) {
    if (order == '>') {
      Fail(
          "{}: big-endian dtype '{}' is not supported (expected little-endian '<{}{}'; re-save "
          "with arr.astype('<{}{}'))",
          context, descr, type.kind, type.size, type.kind, type.size);
    }
    // '|' on a multi-byte type is malformed; '=' (native) is never written by numpy and its
    // meaning depends on the writer's machine, so neither can be trusted.
    if (order != '<') unsupported();
  }
  return type;
}

DType ToDType(const ElementType& type) {
  if (type.kind == 'f') return DType::kFloat32;
  if (type.kind == 'b') return DType::kBool;
  return DType::kInt32;
}

int64_t CheckedProduct(int64_t a, int64_t b, std::string_view context, const Shape& shape) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) {
    Fail("{}: shape {} is too large", context, ShapeToPythonTuple(shape));
  }
  return product;
}

// Integers are held as floats, exact only up to 2^24. `value` is any integer type, so the
// message names the value the file holds: a uint64 was once clamped first and reported as
// 16777217 whatever it was.
template <typename Int>
float CheckedIntToFloat(Int value, int64_t index, std::string_view context) {
  if (std::cmp_greater(value, kMaxExactInt) || std::cmp_less(value, -kMaxExactInt)) {
    Fail("{}: integer {} at flat index {} cannot be held exactly (expected |value| <= 2^24)",
         context, value, index);
  }
  return static_cast<float>(value);
}

// One element of `type` at `p` as a float; `index` only names the element in errors.
float LoadElement(const unsigned char* p, const ElementType& type, int64_t index,
                  std::string_view context) {
  switch (type.kind) {
    case 'f':
      if (type.size == 2) return HalfToFloat(LoadLittleEndian<uint16_t>(p));
      if (type.size == 4) return std::bit_cast<float>(LoadLittleEndian<uint32_t>(p));
      return static_cast<float>(std::bit_cast<double>(LoadLittleEndian<uint64_t>(p)));
    case 'b':
      return *p != 0 ? 1.0f : 0.0f;
    case 'i':
      if (type.size == 1) return static_cast<int8_t>(*p);
      if (type.size == 2) return static_cast<int16_t>(LoadLittleEndian<uint16_t>(p));
      if (type.size == 4) {
        return CheckedIntToFloat(static_cast<int32_t>(LoadLittleEndian<uint32_t>(p)), index,
                                 context);
      }
      return CheckedIntToFloat(static_cast<int64_t>(LoadLittleEndian<uint64_t>(p)), index, context);
    default: {  // 'u'
      if (type.size == 1) return *p;
      if (type.size == 2) return LoadLittleEndian<uint16_t>(p);
      if (type.size == 4) return CheckedIntToFloat(LoadLittleEndian<uint32_t>(p), index, context);
      return CheckedIntToFloat(LoadLittleEndian<uint64_t>(p), index, context);
    }
  }
}

// Fortran order stores the first axis fastest; Array is row-major (last axis fastest).
std::vector<float> FortranToRowMajor(const std::vector<float>& fortran, const Shape& shape) {
  if (shape.size() < 2 || fortran.empty()) return fortran;
  const std::vector<int64_t> strides = Strides(shape);
  std::vector<int64_t> index(shape.size(), 0);
  std::vector<float> row_major(fortran.size());
  int64_t offset = 0;  // row-major offset of `index`
  for (const float value : fortran) {
    row_major[static_cast<size_t>(offset)] = value;
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      if (++index[axis] < shape[axis]) {
        offset += strides[axis];
        break;
      }
      offset -= (shape[axis] - 1) * strides[axis];
      index[axis] = 0;
    }
  }
  return row_major;
}

// ---------------------------------------------------------------------------------------
// libzip plumbing.

struct ZipDiscarder {
  void operator()(zip_t* archive) const { zip_discard(archive); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* file) const { zip_fclose(file); }
};
using ZipArchive = std::unique_ptr<zip_t, ZipDiscarder>;
using ZipFile = std::unique_ptr<zip_file_t, ZipFileCloser>;

std::string ZipErrorString(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string message = zip_error_strerror(&error);
  zip_error_fini(&error);
  return message;
}

ZipArchive OpenForReading(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    const std::string kind = PathKind(path);
    Fail("{}: cannot read npz: {}", path,
         kind == "no such file or directory" ? "no such file" : "found " + kind);
  }
  if (fs::is_directory(status)) Fail("{}: cannot read npz: it is a directory, not a file", path);
  // A FIFO or device is refused unread (libzip would block or read forever).
  CheckInputFile(path, "npz archive", std::numeric_limits<int64_t>::max());
  // libzip opens a zero-length file as a new, empty archive; numpy rejects it, and an empty
  // tensors.npz is always a failed export, so say so.
  if (fs::is_regular_file(status) && fs::file_size(path, ec) == 0 && !ec) {
    Fail("{}: not an npz archive: the file is empty", path);
  }
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (archive == nullptr) {
    if (code == ZIP_ER_NOZIP) {
      Fail(
          "{}: not an npz archive: not a zip file, or truncated (expected the output of np.savez "
          "or "
          "np.savez_compressed)",
          path);
    }
    Fail("{}: cannot open npz: {}", path, ZipErrorString(code));
  }
  return ZipArchive(archive);
}

// Reads up to `n` bytes of `file` into `out`; fewer only at the end of the member.
size_t ReadUpTo(zip_file_t* file, char* out, size_t n, std::string_view context) {
  size_t total = 0;
  while (total < n) {
    const zip_int64_t got = zip_fread(file, out + total, n - total);
    // libzip verifies the CRC when the member is exhausted, so corruption surfaces here.
    if (got < 0) Fail("{}: corrupt archive member: {}", context, zip_file_strerror(file));
    if (got == 0) break;
    total += static_cast<size_t>(got);
  }
  return total;
}

// The rest of `file` appended to `bytes` (`expected` sizes the buffer once).
// Physical memory: the largest array an npz member may ask to be inflated into.
uint64_t MemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// The rest of `file` appended to `bytes`, which then holds at most `declared` + 1 bytes: a
// member that inflates past the size its directory entry declares (a decompression bomb) is
// refused as soon as it does, never read in full. `declared` is already checked against the
// header and memory; `reserve` sizes the buffer once.
void ReadRest(zip_file_t* file, uint64_t declared, uint64_t reserve, std::string& bytes,
              std::string_view context) {
  bytes.reserve(std::max<uint64_t>(bytes.size(), reserve));
  for (;;) {
    const size_t old_size = bytes.size();
    if (old_size > declared)
      Fail("{}: the member inflates to more than the {} bytes its archive entry declares", context,
           declared);
    const size_t room = static_cast<size_t>(declared + 1 - old_size);
    const size_t chunk = std::min<size_t>(std::max<size_t>(bytes.capacity() - old_size, 1 << 16), room);
    bytes.resize(old_size + chunk);
    const size_t got = ReadUpTo(file, bytes.data() + old_size, chunk, context);
    bytes.resize(old_size + got);
    if (got < chunk) return;
  }
}

// One member as an Array. The .npy header is inflated first and checked against the
// member's declared size (and memory) before any data is inflated or allocated. A
// little-endian float32 C-order array (what np.savez writes for float32 weights) is then read
// straight into the Array's buffer, inflated (or copied, when stored) once by libzip into its
// final place. Any other dtype, and every malformed member, goes through DecodeNpy on the
// member's bytes, so the two routes accept and reject the same inputs with the same messages.
Array ReadMember(zip_t* archive, zip_uint64_t index, uint64_t size, std::string_view context) {
  const ZipFile file(zip_fopen_index(archive, index, 0));
  if (file == nullptr) Fail("{}: cannot open archive member: {}", context, zip_strerror(archive));
  std::string bytes(12, '\0');
  bytes.resize(ReadUpTo(file.get(), bytes.data(), bytes.size(), context));
  // Only for members whose header is short or unreadable: what remains is the header at most.
  const auto slow = [&]() {
    ReadRest(file.get(), size, std::min<uint64_t>(size, 12 + kMaxNpyHeaderBytes), bytes, context);
    return DecodeNpy(bytes, context);
  };
  const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
  // A wrong magic or version fails on these 12 bytes; nothing more is read.
  if (bytes.size() < 12 || std::string_view(bytes).substr(0, kNpyMagic.size()) != kNpyMagic ||
      raw[6] < 1 || raw[6] > 3 || raw[7] != 0)
    return slow();
  const int major = raw[6];
  const size_t prefix = major == 1 ? 10 : 12;
  const uint64_t header_len =
      major == 1 ? LoadLittleEndian<uint16_t>(raw + 8) : LoadLittleEndian<uint32_t>(raw + 8);
  if (header_len > kMaxNpyHeaderBytes)
    Fail("{}: .npy header of {} bytes; expected at most {}", context, header_len,
         kMaxNpyHeaderBytes);
  if (size < prefix || header_len > size - prefix || prefix + header_len < 12) return slow();
  bytes.resize(prefix + header_len);
  const size_t header_rest = bytes.size() - 12;
  const size_t header_got = ReadUpTo(file.get(), bytes.data() + 12, header_rest, context);
  if (header_got != header_rest) {
    bytes.resize(12 + header_got);
    return slow();
  }
  const NpyHeader header =
      HeaderParser(std::string_view(bytes).substr(prefix, header_len), context).Parse();
  const ElementType type = ParseDescr(header.descr, context);
  int64_t count = 1;
  for (const int64_t dim : header.shape) count = CheckedProduct(count, dim, context, header.shape);
  const int64_t needed = CheckedProduct(count, type.size, context, header.shape);
  // The same words as DecodeNpy's, from the declared size instead of the inflated bytes.
  const uint64_t declared = size - prefix - header_len;
  if (static_cast<uint64_t>(needed) > declared) {
    Fail("{}: truncated data: shape {} of '{}' needs {} bytes, found {}", context,
         ShapeToPythonTuple(header.shape), header.descr, needed, declared);
  }
  if (static_cast<uint64_t>(needed) < declared) {
    Fail("{}: {} unexpected bytes after the data of shape {} '{}' (expected exactly {})", context,
         declared - static_cast<uint64_t>(needed), ShapeToPythonTuple(header.shape), header.descr,
         needed);
  }
  if (static_cast<uint64_t>(needed) > MemoryBytes()) {
    Fail("{}: shape {} of '{}' needs {} bytes; this machine has {} bytes of memory", context,
         ShapeToPythonTuple(header.shape), header.descr, needed, MemoryBytes());
  }
  if (std::endian::native != std::endian::little || header.descr != "<f4" || header.fortran_order) {
    ReadRest(file.get(), size, size, bytes, context);
    return DecodeNpy(bytes, context);
  }
  std::vector<float> values(static_cast<size_t>(count));
  char* data = reinterpret_cast<char*>(values.data());
  const size_t got = ReadUpTo(file.get(), data, static_cast<size_t>(needed), context);
  char extra = 0;
  if (got != static_cast<size_t>(needed) || ReadUpTo(file.get(), &extra, 1, context) != 0) {
    // The member was shorter or longer than its directory entry says; let DecodeNpy word it.
    bytes.append(data, got);
    if (got == static_cast<size_t>(needed)) bytes.push_back(extra);
    values = {};
    ReadRest(file.get(), size, size, bytes, context);
    return DecodeNpy(bytes, context);
  }
  return Array::FromData(header.shape, DType::kFloat32, std::move(values));
}

// What np.savez writes for an archive without arrays: just the end-of-central-directory
// record. libzip deletes an archive that ends up empty instead of writing it.
constexpr std::string_view kEmptyZip("PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 22);

}  // namespace

Array DecodeNpy(std::string_view bytes, std::string_view context) {
  if (bytes.size() < 10 || bytes.substr(0, kNpyMagic.size()) != kNpyMagic) {
    Fail("{}: not a .npy array (missing the \\x93NUMPY magic)", context);
  }
  const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = raw[6];
  const int minor = raw[7];
  if (major < 1 || major > 3 || minor != 0) {
    Fail("{}: unsupported .npy format version {}.{} (expected 1.0, 2.0 or 3.0)", context, major,
         minor);
  }
  // Version 1.0 has a 2-byte header length; 2.0 and 3.0 (utf-8 header) a 4-byte one.
  const size_t prefix = major == 1 ? 10 : 12;
  if (bytes.size() < prefix) Fail("{}: truncated .npy header", context);
  const uint64_t header_len =
      major == 1 ? LoadLittleEndian<uint16_t>(raw + 8) : LoadLittleEndian<uint32_t>(raw + 8);
  if (header_len > kMaxNpyHeaderBytes)
    Fail("{}: .npy header of {} bytes; expected at most {}", context, header_len,
         kMaxNpyHeaderBytes);
  if (header_len > bytes.size() - prefix) {
    Fail("{}: truncated .npy header: header length {} but only {} bytes follow", context,
         header_len, bytes.size() - prefix);
  }
  const NpyHeader header =
      HeaderParser(bytes.substr(prefix, static_cast<size_t>(header_len)), context).Parse();
  const ElementType type = ParseDescr(header.descr, context);

  int64_t count = 1;
  for (const int64_t dim : header.shape) count = CheckedProduct(count, dim, context, header.shape);
  const int64_t needed = CheckedProduct(count, type.size, context, header.shape);
  const std::string_view data = bytes.substr(prefix + static_cast<size_t>(header_len));
  if (static_cast<uint64_t>(needed) > data.size()) {
    Fail("{}: truncated data: shape {} of '{}' needs {} bytes, found {}", context,
         ShapeToPythonTuple(header.shape), header.descr, needed, data.size());
  }
  if (static_cast<uint64_t>(needed) < data.size()) {
    Fail("{}: {} unexpected bytes after the data of shape {} '{}' (expected exactly {})", context,
         data.size() - static_cast<uint64_t>(needed), ShapeToPythonTuple(header.shape),
         header.descr, needed);
  }
  const auto* elements = reinterpret_cast<const unsigned char*>(data.data());
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    values[static_cast<size_t>(i)] = LoadElement(elements + i * type.size, type, i, context);
  }
  if (header.fortran_order) values = FortranToRowMajor(values, header.shape);
  return Array::FromData(header.shape, ToDType(type), std::move(values));
}

std::string EncodeNpy(const Array& array, std::string_view context) {
  if (!array.numeric())
    Fail("{}: array is symbolic (no data); only numeric arrays can be written", context);
  SHARDTRACE_CHECK(static_cast<int64_t>(array.values().size()) == array.size());
  const bool floating = IsFloating(array.dtype);
  const std::string_view descr = floating ? "<f4" : array.dtype == DType::kInt32 ? "<i4" : "|b1";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   descr, ShapeToPythonTuple(array.shape));
  // Like numpy, pad with spaces so magic + version + length + header is a multiple of 64 and
  // the data that follows is aligned (numpy relies on this for memory mapping).
  const size_t unpadded = kNpyMagic.size() + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  if (header.size() > std::numeric_limits<uint16_t>::max()) {
    Fail("{}: shape {} is too long for a version 1.0 .npy header", context,
         ShapeToString(array.shape));
  }

  std::string out(kNpyMagic);
  out.push_back('\x01');  // version 1.0
  out.push_back('\x00');
  AppendLittleEndian(static_cast<uint16_t>(header.size()), out);
  out += header;
  const std::vector<float>& values = array.values();
  out.reserve(out.size() + values.size() * (floating || array.dtype == DType::kInt32 ? 4 : 1));
  for (size_t i = 0; i < values.size(); ++i) {
    const float value = values[i];
    if (floating) {
      AppendLittleEndian(std::bit_cast<uint32_t>(value), out);
    } else if (array.dtype == DType::kInt32) {
      if (!(value == std::nearbyint(value) && value >= -2147483648.0f && value < 2147483648.0f)) {
        Fail("{}: int32 array holds {} at flat index {} (expected an integer)", context, value, i);
      }
      AppendLittleEndian(static_cast<uint32_t>(static_cast<int32_t>(value)), out);
    } else {
      out.push_back(value != 0.0f ? '\x01' : '\x00');
    }
  }
  return out;
}

std::map<std::string, Array> ReadNpz(const std::string& path, Progress* progress) {
  const ZipArchive archive = OpenForReading(path);
  const zip_int64_t entries = zip_get_num_entries(archive.get(), 0);
  if (entries < 0) Fail("{}: cannot list npz members: {}", path, zip_strerror(archive.get()));
  if (entries > kMaxNpzMembers)
    Fail("{}: {} archive members; expected at most {}", path, entries, kMaxNpzMembers);
  std::map<std::string, Array> arrays;
  for (zip_int64_t i = 0; i < entries; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    zip_stat_t stat;
    zip_stat_init(&stat);
    if (zip_stat_index(archive.get(), index, 0, &stat) != 0 || (stat.valid & ZIP_STAT_NAME) == 0) {
      Fail("{}: cannot read npz member #{}: {}", path, i, zip_strerror(archive.get()));
    }
    const std::string member = stat.name;
    if (!member.empty() && member.back() == '/') continue;  // directory entry, no data
    constexpr std::string_view kSuffix = ".npy";
    if (member.size() <= kSuffix.size() || !member.ends_with(kSuffix)) {
      Fail("{}: member '{}' is not a .npy array (expected only <name>.npy members)", path,
           Printable(member));
    }
    const std::string name = member.substr(0, member.size() - kSuffix.size());
    const std::string context = fmt::format("{}: array '{}'", path, Printable(name));
    // Checked against the member's own header before inflating: a few MB of deflate can
    // claim gigabytes.
    const uint64_t size = (stat.valid & ZIP_STAT_SIZE) != 0 ? stat.size : 0;
    if (progress != nullptr)
      progress->Update(fmt::format("reading {} ({} MB)", context, size >> 20));
    Array array = ReadMember(archive.get(), index, size, context);
    if (!arrays.emplace(name, std::move(array)).second) {
      Fail("{}: array '{}' appears twice in the archive", path, Printable(name));
    }
  }
  return arrays;
}

void WriteNpz(const std::string& path, const std::map<std::string, Array>& arrays) {
  // Encode everything before touching the disk, so bad contents fail without any I/O. The
  // encoded buffers must outlive zip_close, which is when libzip actually reads them.
  std::vector<std::pair<std::string, std::string>> members;
  members.reserve(arrays.size());
  for (const auto& [name, array] : arrays) {
    if (name.empty() || name.find('\0') != std::string::npos) {
      Fail("{}: invalid array name '{}' (expected a non-empty name without NUL bytes)", path,
           Printable(name));
    }
    members.emplace_back(name + ".npy",
                         EncodeNpy(array, fmt::format("{}: array '{}'", path, name)));
  }

  WriteFileAtomically(path, [&](const std::string& tmp_path) {
    if (members.empty()) {
      std::ofstream out(tmp_path, std::ios::binary);
      out.write(kEmptyZip.data(), static_cast<std::streamsize>(kEmptyZip.size()));
      out.close();
      if (!out) Fail("{}: cannot write temporary file '{}'", path, tmp_path);
      return;
    }
    int code = 0;
    zip_t* raw = zip_open(tmp_path.c_str(), ZIP_CREATE | ZIP_EXCL, &code);
    if (raw == nullptr) {
      Fail("{}: cannot create temporary archive '{}': {}", path, tmp_path, ZipErrorString(code));
    }
    ZipArchive archive(raw);
    for (const auto& [member, bytes] : members) {
      zip_source_t* source = zip_source_buffer(raw, bytes.data(), bytes.size(), 0);
      if (source == nullptr) Fail("{}: cannot add '{}': {}", path, member, zip_strerror(raw));
      const zip_int64_t index = zip_file_add(raw, member.c_str(), source, ZIP_FL_ENC_UTF_8);
      if (index < 0) {
        zip_source_free(source);  // still ours: zip_file_add failed
        Fail("{}: cannot add '{}': {}", path, member, zip_strerror(raw));
      }
      const auto entry = static_cast<zip_uint64_t>(index);
      // Stored like np.savez, dated 1980-01-01 00:00 like Python's zipfile, so identical
      // arrays give byte-identical archives (goldens live in git).
      constexpr zip_uint16_t kDosTime = 0;
      constexpr zip_uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;
      if (zip_set_file_compression(raw, entry, ZIP_CM_STORE, 0) != 0 ||
          zip_file_set_dostime(raw, entry, kDosTime, kDosDate, 0) != 0) {
        Fail("{}: cannot add '{}': {}", path, member, zip_strerror(raw));
      }
    }
    if (zip_close(raw) != 0) Fail("{}: cannot write npz: {}", path, zip_strerror(raw));
    (void)archive.release();  // zip_close freed it
  });
}

}  // namespace shardtrace
