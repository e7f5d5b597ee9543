#include "io/npz.h"

#include <stdlib.h>
#include <zip.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/atomic_file.h"
#include "run/run.h"
#include "test_support.h"
#include "util/error.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

// The golden cases in testdata/goldens (format: testdata/golden-format.md).
std::string Golden(const std::string& relative) {
  return std::string(SHARDTRACE_SOURCE_DIR) + "/testdata/goldens/" + relative;
}

using testing::ReadFile;
using testing::TempDir;

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The message of the Error `f` throws; fails the test if it throws nothing or something else.
std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected shardtrace::Error");
  return "";
}

// A hand-made .npy image: magic, version, little-endian header length, `dict` padded to a
// multiple of 16 like old numpy, then `data`.
std::string Npy(std::string_view dict, std::string_view data, int major = 1) {
  std::string header(dict);
  const size_t prefix = major == 1 ? 10 : 12;
  header.append((16 - (prefix + header.size() + 1) % 16) % 16, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  return out + header + std::string(data);
}

template <typename T>
std::string Raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());  // the test host is little-endian
  return out;
}

// Writes a zip archive with libzip, members stored or deflated as asked.
void WriteZip(const std::string& path,
              const std::vector<std::pair<std::string, std::string>>& members, zip_int32_t method) {
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  REQUIRE(archive != nullptr);
  for (const auto& [name, bytes] : members) {
    zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
    REQUIRE(source != nullptr);
    const zip_int64_t index = zip_file_add(archive, name.c_str(), source, 0);
    REQUIRE(index >= 0);
    REQUIRE(zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), method, 9) == 0);
  }
  REQUIRE(zip_close(archive) == 0);
}

// Compression method and raw bytes of each member, read with libzip directly.
std::map<std::string, std::pair<zip_uint16_t, std::string>> ZipMembers(const std::string& path) {
  std::map<std::string, std::pair<zip_uint16_t, std::string>> members;
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
  REQUIRE(archive != nullptr);
  for (zip_int64_t i = 0; i < zip_get_num_entries(archive, 0); ++i) {
    zip_stat_t stat;
    REQUIRE(zip_stat_index(archive, static_cast<zip_uint64_t>(i), 0, &stat) == 0);
    std::string bytes(stat.size, '\0');
    zip_file_t* file = zip_fopen_index(archive, static_cast<zip_uint64_t>(i), 0);
    REQUIRE(file != nullptr);
    REQUIRE(zip_fread(file, bytes.data(), bytes.size()) == static_cast<zip_int64_t>(stat.size));
    zip_fclose(file);
    members[stat.name] = {stat.comp_method, bytes};
  }
  zip_discard(archive);
  return members;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Goldens.

TEST_CASE("ReadNpz reads the sparse_ep2_mixtral golden as golden-format.md describes", "[npz]") {
  const auto arrays = ReadNpz(Golden("sparse_ep2_mixtral/tensors.npz"));
  const std::map<std::string, std::pair<DType, Shape>> expected = {
      {"inputs", {DType::kFloat32, {4, 8, 16}}},
      {"gate_kernel", {DType::kFloat32, {16, 8}}},
      {"wi_0", {DType::kFloat32, {8, 16, 24}}},
      {"wi_1", {DType::kFloat32, {8, 16, 24}}},
      {"wo", {DType::kFloat32, {8, 24, 16}}},
      {"output", {DType::kFloat32, {4, 8, 16}}},
      {"gate_logits", {DType::kFloat32, {4, 8, 8}}},
      {"top_k_weights", {DType::kFloat32, {4, 8, 2}}},
      {"top_k_indices", {DType::kInt32, {4, 8, 2}}},
      {"group_sizes", {DType::kInt32, {8}}},
      {"lb_loss", {DType::kFloat32, {}}},
  };
  REQUIRE(arrays.size() == expected.size());
  for (const auto& [name, dtype_shape] : expected) {
    INFO("array " << name);
    REQUIRE(arrays.count(name) == 1);
    const Array& array = arrays.at(name);
    CHECK(array.dtype == dtype_shape.first);
    CHECK(array.shape == dtype_shape.second);
    REQUIRE(array.numeric());
    CHECK(static_cast<int64_t>(array.values().size()) == array.size());
    for (const float v : array.values()) REQUIRE(std::isfinite(v));
  }

  // The sparse path's group sizes count every (token, choice) pair once: B*S*K = 4*8*2, and
  // they are exactly the histogram of the selected experts.
  const std::vector<float>& sizes = arrays.at("group_sizes").values();
  std::vector<float> histogram(8, 0.0f);
  for (const float expert : arrays.at("top_k_indices").values()) {
    REQUIRE(expert == std::floor(expert));
    REQUIRE(expert >= 0.0f);
    REQUIRE(expert < 8.0f);
    histogram[static_cast<size_t>(expert)] += 1.0f;
  }
  CHECK(std::accumulate(sizes.begin(), sizes.end(), 0.0f) == 64.0f);
  CHECK(sizes == histogram);

  const Array& lb_loss = arrays.at("lb_loss");
  CHECK(lb_loss.rank() == 0);
  CHECK(lb_loss.size() == 1);
  CHECK(lb_loss.values()[0] > 0.0f);
}

TEST_CASE("every golden case reads and is consistent with golden-format.md", "[npz]") {
  const std::set<std::string> known = {
      "inputs",        "gate_kernel", "gate_bias",       "wi_0",
      "wi_1",          "wo",          "wi_0_bias",       "wi_1_bias",
      "wo_bias",       "shared_wi_0", "shared_wi_1",     "shared_wo",
      "output",        "gate_logits", "pre_bias_logits", "top_k_weights",
      "top_k_indices", "group_sizes", "dispatch_mask",   "combine_mask",
      "lb_loss",       "bias_updates"};
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(Golden(""))) {
    const std::string name = entry.path().filename().string();
    INFO("golden case " << name);
    const auto arrays = ReadNpz((entry.path() / "tensors.npz").string());
    ++cases;
    for (const auto& [array_name, array] : arrays) {
      INFO("array " << array_name);
      CHECK(known.count(array_name) == 1);
      CHECK(array.dtype == (array_name == "top_k_indices" || array_name == "group_sizes"
                                ? DType::kInt32
                            : array_name == "dispatch_mask" ? DType::kBool
                                                            : DType::kFloat32));
    }
    for (const char* required : {"inputs", "gate_kernel", "wi_0", "wi_1", "wo", "output"}) {
      REQUIRE(arrays.count(required) == 1);
    }
    const Shape& inputs = arrays.at("inputs").shape;
    REQUIRE(inputs.size() == 3);
    const int64_t batch = inputs[0], seq = inputs[1], emb = inputs[2];
    const Shape& gate = arrays.at("gate_kernel").shape;
    REQUIRE(gate.size() == 2);
    CHECK(gate[0] == emb);
    const int64_t experts = gate[1];
    const Shape& wi_0 = arrays.at("wi_0").shape;
    REQUIRE(wi_0.size() == 3);
    const int64_t hidden = wi_0[2];
    CHECK(wi_0 == Shape{experts, emb, hidden});
    CHECK(arrays.at("wi_1").shape == Shape{experts, emb, hidden});
    CHECK(arrays.at("wo").shape == Shape{experts, hidden, emb});
    CHECK(arrays.at("output").shape == inputs);
    if (arrays.count("gate_logits"))
      CHECK(arrays.at("gate_logits").shape == Shape{batch, seq, experts});
    if (arrays.count("gate_bias")) CHECK(arrays.at("gate_bias").shape == Shape{experts});
    if (arrays.count("lb_loss")) CHECK(arrays.at("lb_loss").shape.empty());
    if (arrays.count("top_k_indices")) {
      const Shape& top_k = arrays.at("top_k_indices").shape;
      REQUIRE(top_k.size() == 3);
      CHECK(Shape{top_k[0], top_k[1]} == Shape{batch, seq});
      CHECK(arrays.at("top_k_weights").shape == top_k);
      if (arrays.count("group_sizes")) {
        const std::vector<float>& sizes = arrays.at("group_sizes").values();
        CHECK(arrays.at("group_sizes").shape == Shape{experts});
        CHECK(std::accumulate(sizes.begin(), sizes.end(), 0.0f) ==
              static_cast<float>(batch * seq * top_k[2]));
      }
    }
    if (arrays.count("dispatch_mask")) {
      const Shape& dispatch = arrays.at("dispatch_mask").shape;
      REQUIRE(dispatch.size() == 4);
      CHECK(Shape{dispatch[0], dispatch[1], dispatch[2]} == Shape{batch, seq, experts});
      CHECK(arrays.at("combine_mask").shape == dispatch);
    }
  }
  CHECK(cases == 8);
}

// ---------------------------------------------------------------------------------------
// Writing.

TEST_CASE("WriteNpz and ReadNpz round-trip float, int, bool and scalar arrays", "[npz]") {
  const TempDir dir;
  const std::string path = dir.File("round_trip.npz");
  const std::map<std::string, Array> arrays = {
      {"weights", Array::FromData({2, 3}, DType::kFloat32,
                                  {1.5f, -0.0f, 3.0e-40f, std::numeric_limits<float>::infinity(),
                                   std::numeric_limits<float>::quiet_NaN(), -7.25f})},
      {"indices", Array::FromData({4}, DType::kInt32, {0.0f, -3.0f, 7.0f, 16777216.0f})},
      {"mask", Array::FromData({2, 1, 2}, DType::kBool, {1.0f, 0.0f, 0.0f, 1.0f})},
      {"loss", Array::FromData({}, DType::kFloat32, {0.125f})},
      {"count", Array::FromData({}, DType::kInt32, {42.0f})},
      {"empty", Array::FromData({0, 3}, DType::kFloat32, {})},
  };
  WriteNpz(path, arrays);
  const auto read = ReadNpz(path);
  REQUIRE(read.size() == arrays.size());
  for (const auto& [name, array] : arrays) {
    INFO("array " << name);
    REQUIRE(read.count(name) == 1);
    CHECK(read.at(name).dtype == array.dtype);
    CHECK(read.at(name).shape == array.shape);
    CHECK(BitwiseEqual(read.at(name).values(), array.values()));
  }
  CHECK(dir.Entries() == std::vector<std::string>{"round_trip.npz"});  // no temp file left

  // What np.savez writes: stored members, v1.0 headers padded so the data is 64-byte aligned.
  const auto members = ZipMembers(path);
  REQUIRE(members.size() == arrays.size());
  for (const auto& [member, method_bytes] : members) {
    INFO("member " << member);
    CHECK(method_bytes.first == ZIP_CM_STORE);
  }
  const std::string& indices = members.at("indices.npy").second;
  CHECK(indices.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<uint8_t>(indices[8]) | static_cast<uint8_t>(indices[9])
                                                                   << 8;
  CHECK((10 + header_len) % 64 == 0);
  CHECK(indices.substr(10, header_len)
            .starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }"));
  CHECK(members.at("loss.npy").second.find("'shape': (), }") != std::string::npos);
  CHECK(members.at("mask.npy").second.find("'descr': '|b1'") != std::string::npos);
  CHECK(members.at("weights.npy").second.find("'shape': (2, 3), }") != std::string::npos);
}

TEST_CASE("WriteNpz reproduces numpy's .npy bytes for a golden", "[npz]") {
  const TempDir dir;
  const std::string path = dir.File("rewritten.npz");
  const std::string golden = Golden("sparse_ep2_mixtral/tensors.npz");
  WriteNpz(path, ReadNpz(golden));
  const auto original = ZipMembers(golden);
  const auto rewritten = ZipMembers(path);
  REQUIRE(rewritten.size() == original.size());
  for (const auto& [member, method_bytes] : original) {
    INFO("member " << member);
    REQUIRE(rewritten.count(member) == 1);
    CHECK(rewritten.at(member) == method_bytes);
  }
}

TEST_CASE("WriteNpz writes every floating dtype as float32", "[npz]") {
  const TempDir dir;
  const std::string path = dir.File("narrow.npz");
  WriteNpz(path, {{"bf16", Array::FromData({2}, DType::kBfloat16, {1.0f, -2.5f})},
                  {"f16", Array::FromData({1}, DType::kFloat16, {0.5f})}});
  const auto read = ReadNpz(path);
  CHECK(read.at("bf16").dtype == DType::kFloat32);
  CHECK(read.at("bf16").values() == std::vector<float>{1.0f, -2.5f});
  CHECK(read.at("f16").dtype == DType::kFloat32);
}

TEST_CASE("WriteNpz of no arrays writes a valid empty archive", "[npz]") {
  const TempDir dir;
  const std::string path = dir.File("empty.npz");
  WriteNpz(path, {});
  CHECK(fs::file_size(path) == 22);
  CHECK(ReadNpz(path).empty());
}

TEST_CASE("WriteNpz replaces atomically and leaves nothing behind on error", "[npz]") {
  const TempDir dir;
  const std::string path = dir.File("out.npz");
  WriteNpz(path, {{"a", Array::Filled({2}, DType::kFloat32, 1.0f)}});
  const std::string before = ReadFile(path);

  SECTION("a symbolic array") {
    const std::string message = ErrorOf([&] {
      WriteNpz(path, {{"b", Array::Symbolic({2}, DType::kFloat32)}});
    });
    CHECK(message ==
          path + ": array 'b': array is symbolic (no data); only numeric arrays can be written");
  }
  SECTION("a non-integer int32 value") {
    const std::string message = ErrorOf([&] {
      WriteNpz(path, {{"idx", Array::FromData({2}, DType::kInt32, {1.0f, 1.5f})}});
    });
    CHECK(message ==
          path + ": array 'idx': int32 array holds 1.5 at flat index 1 (expected an integer)");
  }
  SECTION("a missing directory") {
    const std::string missing = dir.File("no/such/dir/out.npz");
    const std::string message = ErrorOf([&] { WriteNpz(missing, {}); });
    CHECK(message == "output file (" + missing + "): expected an existing directory '" +
                         dir.File("no/such/dir") + "', found none");
  }
  CHECK(ReadFile(path) == before);
  CHECK(dir.Entries() == std::vector<std::string>{"out.npz"});

  // A successful write replaces the old content.
  WriteNpz(path, {{"c", Array::Filled({1}, DType::kInt32, 3.0f)}});
  const auto read = ReadNpz(path);
  REQUIRE(read.size() == 1);
  CHECK(read.at("c").values() == std::vector<float>{3.0f});
  CHECK(dir.Entries() == std::vector<std::string>{"out.npz"});
}

TEST_CASE("WriteNpz is deterministic", "[npz]") {
  const TempDir dir;
  const std::map<std::string, Array> arrays = {{"x", Array::Filled({3, 2}, DType::kFloat32, 0.5f)}};
  WriteNpz(dir.File("a.npz"), arrays);
  WriteNpz(dir.File("b.npz"), arrays);
  CHECK(ReadFile(dir.File("a.npz")) == ReadFile(dir.File("b.npz")));
}

// ---------------------------------------------------------------------------------------
// Reading what numpy may write.

TEST_CASE("ReadNpz reads np.savez_compressed (deflate) archives", "[npz]") {
  const TempDir dir;
  const std::string path = dir.File("compressed.npz");
  const auto golden = ReadNpz(Golden("sparse_ep2_mixtral/tensors.npz"));
  std::vector<std::pair<std::string, std::string>> members;
  for (const auto& [name, array] : golden)
    members.emplace_back(name + ".npy", EncodeNpy(array, name));
  WriteZip(path, members, ZIP_CM_DEFLATE);
  for (const auto& [member, method_bytes] : ZipMembers(path)) {
    INFO("member " << member);
    REQUIRE(method_bytes.first == ZIP_CM_DEFLATE);
  }
  CHECK(fs::file_size(path) < fs::file_size(Golden("sparse_ep2_mixtral/tensors.npz")));

  const auto read = ReadNpz(path);
  REQUIRE(read.size() == golden.size());
  for (const auto& [name, array] : golden) {
    INFO("array " << name);
    CHECK(read.at(name).dtype == array.dtype);
    CHECK(read.at(name).shape == array.shape);
    CHECK(BitwiseEqual(read.at(name).values(), array.values()));
  }
}

TEST_CASE("DecodeNpy converts every supported dtype", "[npz]") {
  const auto decode = [](std::string_view descr, const std::string& data, std::string_view shape) {
    return DecodeNpy(
        Npy(fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape),
            data),
        "test");
  };
  SECTION("<f4") {
    const Array a = decode("<f4", Raw<float>({1.5f, -2.0f}), "(2,)");
    CHECK(a.dtype == DType::kFloat32);
    CHECK(a.values() == std::vector<float>{1.5f, -2.0f});
  }
  SECTION("<f8") {
    const Array a = decode("<f8", Raw<double>({0.1, -1e300}), "(2,)");
    CHECK(a.dtype == DType::kFloat32);
    CHECK(a.values()[0] == 0.1f);
    CHECK(a.values()[1] == -std::numeric_limits<float>::infinity());
  }
  SECTION("<f2") {
    // 1.0, -2.0, 65504 (max), 2^-24 (smallest subnormal), -0.0, +inf, nan.
    const Array a = decode(
        "<f2", Raw<uint16_t>({0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00, 0x7E00}), "(7,)");
    CHECK(a.dtype == DType::kFloat32);
    const std::vector<float>& v = a.values();
    CHECK(v[0] == 1.0f);
    CHECK(v[1] == -2.0f);
    CHECK(v[2] == 65504.0f);
    CHECK(v[3] == std::ldexp(1.0f, -24));
    CHECK(std::bit_cast<uint32_t>(v[4]) == 0x80000000u);
    CHECK(v[5] == std::numeric_limits<float>::infinity());
    CHECK(std::isnan(v[6]));
  }
  SECTION("integers") {
    CHECK(decode("<i4", Raw<int32_t>({-5, 16777216}), "(2,)").values() ==
          std::vector<float>{-5.0f, 16777216.0f});
    CHECK(decode("<i8", Raw<int64_t>({-16777216, 3}), "(2,)").values() ==
          std::vector<float>{-16777216.0f, 3.0f});
    CHECK(decode("<i2", Raw<int16_t>({-32768, 7}), "(2,)").values() ==
          std::vector<float>{-32768.0f, 7.0f});
    CHECK(decode("|i1", Raw<int8_t>({-128, 127}), "(2,)").values() ==
          std::vector<float>{-128.0f, 127.0f});
    CHECK(decode("|u1", Raw<uint8_t>({255, 0}), "(2,)").values() ==
          std::vector<float>{255.0f, 0.0f});
    CHECK(decode("<u4", Raw<uint32_t>({7, 16777216}), "(2,)").values() ==
          std::vector<float>{7.0f, 16777216.0f});
    CHECK(decode("<i8", Raw<int64_t>({1}), "(1,)").dtype == DType::kInt32);
    CHECK(decode("|u1", Raw<uint8_t>({1}), "(1,)").dtype == DType::kInt32);
  }
  SECTION("|b1") {
    const Array a = decode("|b1", Raw<uint8_t>({1, 0, 1}), "(3,)");
    CHECK(a.dtype == DType::kBool);
    CHECK(a.values() == std::vector<float>{1.0f, 0.0f, 1.0f});
  }
  SECTION("scalar") {
    const Array a = decode("<f4", Raw<float>({2.5f}), "()");
    CHECK(a.shape.empty());
    CHECK(a.values() == std::vector<float>{2.5f});
  }
  SECTION("zero-size") {
    const Array a = decode("<f4", "", "(0, 4)");
    CHECK(a.shape == Shape{0, 4});
    CHECK(a.values().empty());
  }
}

TEST_CASE("DecodeNpy transposes fortran_order arrays to row-major", "[npz]") {
  // A 2x3x2 array with a[i][j][k] = 100i + 10j + k, stored first axis fastest.
  std::vector<float> fortran;
  for (int k = 0; k < 2; ++k) {
    for (int j = 0; j < 3; ++j) {
      for (int i = 0; i < 2; ++i) fortran.push_back(static_cast<float>(100 * i + 10 * j + k));
    }
  }
  const Array a = DecodeNpy(
      Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 2), }", Raw(fortran)), "test");
  std::vector<float> row_major;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 2; ++k) row_major.push_back(static_cast<float>(100 * i + 10 * j + k));
    }
  }
  CHECK(a.shape == Shape{2, 3, 2});
  CHECK(a.values() == row_major);
}

TEST_CASE("DecodeNpy reads format versions 2.0 and 3.0", "[npz]") {
  for (const int major : {2, 3}) {
    INFO("version " << major);
    const Array a = DecodeNpy(Npy("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }",
                                  Raw<int32_t>({4, 5}), major),
                              "test");
    CHECK(a.shape == Shape{1, 2});
    CHECK(a.values() == std::vector<float>{4.0f, 5.0f});
  }
  // Python 2 numpy wrote long literals and double quotes are valid Python too.
  const Array a = DecodeNpy(
      Npy("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1L,)}", Raw<float>({1.0f})),
      "test");
  CHECK(a.shape == Shape{1});
}

TEST_CASE("DecodeNpy rejects malformed input with one-line messages", "[npz]") {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const auto error = [](const std::string& bytes) {
    return ErrorOf([&] { DecodeNpy(bytes, "t.npz: array 'x'"); });
  };

  CHECK(error("garbage bytes") ==
        "t.npz: array 'x': not a .npy array (missing the \\x93NUMPY magic)");
  std::string v4 = Npy(f4, Raw<float>({1, 2}));
  v4[6] = 4;
  CHECK(error(v4) ==
        "t.npz: array 'x': unsupported .npy format version 4.0 (expected 1.0, 2.0 or 3.0)");
  CHECK(error(Npy(f4, Raw<float>({1, 2})).substr(0, 30))
            .starts_with("t.npz: array 'x': truncated .npy header: header length"));
  CHECK(error(Npy(f4, Raw<float>({1}))) ==
        "t.npz: array 'x': truncated data: shape (2,) of '<f4' needs 8 bytes, found 4");
  CHECK(error(Npy(f4, Raw<float>({1, 2, 3}))) ==
        "t.npz: array 'x': 4 unexpected bytes after the data of shape (2,) '<f4' (expected exactly "
        "8)");
  CHECK(error(Npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
                  Raw<float>({1, 2, 3, 4}))) ==
        "t.npz: array 'x': unsupported dtype '<c8' (expected float, int or bool)");
  CHECK(
      error(Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", Raw<float>({1, 2}))) ==
      "t.npz: array 'x': big-endian dtype '>f4' is not supported (expected little-endian '<f4'; "
      "re-save with arr.astype('<f4'))");
  CHECK(error(Npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                  Raw<float>({1, 2})))
            .starts_with("t.npz: array 'x': unsupported dtype: structured"));
  CHECK(error(Npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
                  Raw<int64_t>({16777217}))) ==
        "t.npz: array 'x': integer 16777217 at flat index 0 cannot be held exactly (expected "
        "|value| <= 2^24)");
  CHECK(error(Npy("{'descr': '<f4', 'fortran_order': False}", "")) ==
        "t.npz: array 'x': bad .npy header: missing key 'shape' (header: {'descr': '<f4', "
        "'fortran_order': False})");
  CHECK(error(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", Raw<float>({1, 2})))
            .starts_with("t.npz: array 'x': bad .npy header: 'shape' is a parenthesised integer"));
  CHECK(error(Npy("{'descr': '<f4', 'fortran_order': Nope, 'shape': (2,), }", Raw<float>({1, 2})))
            .starts_with("t.npz: array 'x': bad .npy header: unexpected value at offset"));
  CHECK(error(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", ""))
            .starts_with("t.npz: array 'x': bad .npy header: unexpected value at offset"));
  CHECK(error(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 'y'}", ""))
            .starts_with("t.npz: array 'x': bad .npy header: unexpected key 'x'"));
  CHECK(error(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }",
                  ""))
            .starts_with("t.npz: array 'x': shape (99999999999, 99999999999) is too large"));
  // Binary junk in a header stays on one line.
  const std::string junk = error(Npy(std::string("{'descr\x01\n'", 11), ""));
  CHECK(junk.starts_with("t.npz: array 'x': bad .npy header:"));
  CHECK(junk.find('\n') == std::string::npos);
}

// ---------------------------------------------------------------------------------------
// Archive-level errors.

TEST_CASE("ReadNpz errors name the file and the array", "[npz]") {
  const TempDir dir;

  SECTION("missing file") {
    const std::string path = dir.File("missing.npz");
    CHECK(ErrorOf([&] { ReadNpz(path); }) == path + ": cannot read npz: no such file");
  }
  SECTION("a directory") {
    CHECK(ErrorOf([&] {
            ReadNpz(dir.File(""));
          }).ends_with(": cannot read npz: it is a directory, not a file"));
  }
  SECTION("not a zip file") {
    const std::string path = dir.File("text.npz");
    WriteBytes(path, "inputs,gate_kernel\n1,2\n");
    CHECK(ErrorOf([&] { ReadNpz(path); }) ==
          path +
              ": not an npz archive: not a zip file, or truncated (expected "
              "the output of np.savez or np.savez_compressed)");
  }
  SECTION("an empty file") {
    const std::string path = dir.File("empty.npz");
    WriteBytes(path, "");
    CHECK(ErrorOf([&] { ReadNpz(path); }) == path + ": not an npz archive: the file is empty");
  }
  SECTION("a corrupted .npy header") {
    const std::string path = dir.File("bad_header.npz");
    WriteZip(path,
             {{"inputs.npy",
               Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", Raw<float>({1}))},
              {"wi_0.npy", std::string("\x93NUMPY\x01\x00\x08\x00{'descr'", 18)}},
             ZIP_CM_STORE);
    const std::string message = ErrorOf([&] { ReadNpz(path); });
    CHECK(message ==
          path + ": array 'wi_0': bad .npy header: expected ':' at offset 8 (header: {'descr')");
    CHECK(message.find('\n') == std::string::npos);
  }
  SECTION("an unsupported dtype") {
    const std::string path = dir.File("complex.npz");
    WriteZip(path,
             {{"wi_0.npy", Npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                               Raw<float>({1, 0}))}},
             ZIP_CM_DEFLATE);
    CHECK(ErrorOf([&] { ReadNpz(path); }) ==
          path + ": array 'wi_0': unsupported dtype '<c8' (expected float, int or bool)");
  }
  SECTION("truncated data") {
    const std::string path = dir.File("truncated.npz");
    WriteZip(path,
             {{"wo.npy", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                             Raw<float>({1, 2, 3}))}},
             ZIP_CM_STORE);
    CHECK(ErrorOf([&] { ReadNpz(path); }) ==
          path + ": array 'wo': truncated data: shape (2, 2) of '<f4' needs 16 bytes, found 12");
  }
  SECTION("a corrupted member (CRC mismatch)") {
    const std::string path = dir.File("crc.npz");
    WriteNpz(path, {{"output", Array::Filled({16}, DType::kFloat32, 1.0f)}});
    std::string bytes = ReadFile(path);
    const size_t data = bytes.find(std::string("\x00\x00\x80\x3f", 4));  // first 1.0f
    REQUIRE(data != std::string::npos);
    bytes[data + 3] = '\x40';
    WriteBytes(path, bytes);
    CHECK(ErrorOf([&] { ReadNpz(path); }) ==
          path + ": array 'output': corrupt archive member: CRC error");
  }
  SECTION("a member that is not .npy") {
    const std::string path = dir.File("readme.npz");
    WriteZip(path, {{"README.txt", "hello"}}, ZIP_CM_STORE);
    CHECK(ErrorOf([&] { ReadNpz(path); }) ==
          path + ": member 'README.txt' is not a .npy array (expected only <name>.npy members)");
  }
}

// ---------------------------------------------------------------------------------------
// Atomic files.

TEST_CASE("WriteTextAtomically writes and replaces files", "[npz]") {
  const TempDir dir;
  const std::string path = dir.File("report.txt");
  WriteTextAtomically(path, "first\n");
  CHECK(ReadFile(path) == "first\n");
  WriteTextAtomically(path, std::string("second\0line", 11));
  CHECK(ReadFile(path) == std::string("second\0line", 11));
  CHECK(dir.Entries() == std::vector<std::string>{"report.txt"});
}

TEST_CASE("WriteFileAtomically removes the temp file and rethrows on error", "[npz]") {
  const TempDir dir;
  const std::string path = dir.File("data.bin");
  WriteTextAtomically(path, "original");
  std::string seen_tmp;
  const auto failing = [&](const std::string& tmp_path) {
    seen_tmp = tmp_path;
    std::ofstream(tmp_path) << "half-writ";
    throw std::runtime_error("disk on fire");
  };
  CHECK_THROWS_WITH(WriteFileAtomically(path, failing), "disk on fire");
  CHECK(fs::path(seen_tmp).parent_path() == fs::path(path).parent_path());
  CHECK(!fs::exists(seen_tmp));
  CHECK(ReadFile(path) == "original");
  CHECK(dir.Entries() == std::vector<std::string>{"data.bin"});

  const std::string message =
      ErrorOf([&] { WriteFileAtomically(path, [](const std::string&) {}); });
  CHECK(message.starts_with("output file (" + path +
                            "): the writer did not create temporary file '"));
  CHECK(ReadFile(path) == "original");
}

}  // namespace
}  // namespace shardtrace
