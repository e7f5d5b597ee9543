// The numeric engine's storage and parallelism contracts: arrays share buffers copy-on-write
// (copies, reshapes, value-preserving casts and whole-array slices cost nothing; writing
// detaches), the thread pool covers every index once and reports the lowest failing one,
// and a numeric trace on the pool is bit-identical to the serial run on every path.
#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>

#include "numeric/ops.h"
#include "paths/moe_block.h"
#include "run/run.h"
#include "shard/mesh.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace shardtrace {
namespace {

Array Iota(Shape shape, DType dtype = DType::kFloat32) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Array::FromData(std::move(shape), dtype, std::move(v));
}

TEST_CASE("arrays share buffers and copy on write", "[numeric][storage]") {
  const Array a = Iota({2, 3, 4});
  Array copy = a;
  CHECK(copy.SharesBufferWith(a));
  CHECK(Reshape(a, {6, 4}).SharesBufferWith(a));
  CHECK(Cast(a, DType::kFloat32).SharesBufferWith(a));
  CHECK(Cast(Iota({3}, DType::kInt32), DType::kFloat32).values() == Iota({3}).values());
  CHECK(Slice(a, 1, 0, 3).SharesBufferWith(a));
  CHECK_FALSE(Slice(a, 1, 0, 2).SharesBufferWith(a));
  CHECK(Transpose(a, {0, 1, 2}).SharesBufferWith(a));
  CHECK(BroadcastTo(a, {2, 3, 4}).SharesBufferWith(a));
  CHECK(Pad(a, 0, 0, 0, 0.0f).SharesBufferWith(a));
  // A cast that rounds computes new values.
  const Array bf = Cast(a, DType::kBfloat16);
  CHECK_FALSE(bf.SharesBufferWith(a));

  copy.mutable_values()[5] = -1.0f;  // detaches
  CHECK_FALSE(copy.SharesBufferWith(a));
  CHECK(a.values()[5] == 5.0f);
  CHECK(copy.values()[5] == -1.0f);
  const Array deep = a.Copy();
  CHECK_FALSE(deep.SharesBufferWith(a));
  CHECK(deep.values() == a.values());

  Array sole = Iota({4});
  const float* before = sole.values().data();
  sole.mutable_values()[0] = 9.0f;  // sole owner: written in place
  CHECK(sole.values().data() == before);
}

TEST_CASE("thread pool runs every index once and reports the lowest failure", "[numeric][pool]") {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(1000);
  pool.ParallelFor(1000, [&](int64_t i) { hits[i]++; });
  for (const auto& h : hits) CHECK(h.load() == 1);

  // Nested loops run inline in the worker and still cover everything.
  std::vector<std::atomic<int>> nested(64);
  pool.ParallelFor(
      8, [&](int64_t i) { pool.ParallelFor(8, [&](int64_t j) { nested[i * 8 + j]++; }); });
  for (const auto& h : nested) CHECK(h.load() == 1);

  try {
    pool.ParallelFor(100, [](int64_t i) {
      if (i % 10 == 7) Fail("item {}", i);
    });
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "item 7");
  }
  ThreadPool serial(1);
  CHECK(serial.size() == 1);
  int64_t sum = 0;
  serial.ParallelFor(10, [&](int64_t i) { sum += i; });
  CHECK(sum == 45);
}

bool BitIdentical(const Array& a, const Array& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.values().size() == b.values().size() &&
         std::memcmp(a.values().data(), b.values().data(), a.values().size() * sizeof(float)) == 0;
}

// Runs the MoE block serially and on a 4-thread pool (more threads than this machine's
// cores, so work really interleaves) and requires identical captures, facts and summaries.
void CheckPoolMatchesSerial(std::vector<std::string> overrides, int64_t devices) {
  INFO(fmt::format("{} on {} devices", fmt::join(overrides, " "), devices));
  RunRequest serial_request = SymbolicRequest(overrides, devices);
  serial_request.evaluation = Evaluation::kNumeric;
  serial_request.seed = 11;
  serial_request.threads = 1;
  RunRequest pool_request = serial_request;
  pool_request.threads = 4;
  const RunResult serial = Run(serial_request);
  const RunResult pooled = Run(pool_request);
  REQUIRE(serial.captures.all().size() == pooled.captures.all().size());
  REQUIRE_FALSE(serial.captures.empty());
  for (const auto& [id, array] : serial.captures.all()) {
    INFO(CaptureName(id));
    REQUIRE(pooled.captures.Has(id));
    CHECK(BitIdentical(array, pooled.captures.At(id)));
  }
  REQUIRE(serial.trace.tensors.size() == pooled.trace.tensors.size());
  for (size_t i = 0; i < serial.trace.tensors.size(); ++i) {
    const auto& s = serial.trace.tensors[i].summary;
    const auto& p = pooled.trace.tensors[i].summary;
    REQUIRE(s.has_value());
    REQUIRE(p.has_value());
    CHECK(std::memcmp(&s->mean, &p->mean, sizeof(double)) == 0);
    CHECK(s->min == p->min);
    CHECK(s->max == p->max);
    CHECK(s->nonzeros == p->nonzeros);
  }
  REQUIRE(serial.trace.facts.size() == pooled.trace.facts.size());
  for (size_t i = 0; i < serial.trace.facts.size(); ++i)
    CHECK(serial.trace.facts[i].values == pooled.trace.facts[i].values);
}

std::vector<std::string> Small(std::initializer_list<std::string> extra) {
  std::vector<std::string> args = {"dtype=float32",         "weight_dtype=float32",
                                   "base_emb_dim=32",       "base_mlp_dim=48",
                                   "base_moe_mlp_dim=48",   "num_experts=8",
                                   "num_experts_per_tok=2", "max_target_length=16",
                                   "decoder_block=mixtral", "per_device_batch_size=2"};
  args.insert(args.end(), extra);
  return args;
}

TEST_CASE("numeric traces on the thread pool are bit-identical to serial", "[numeric][pool]") {
  CheckPoolMatchesSerial(Small({}), 1);
  CheckPoolMatchesSerial(Small({"ici_expert_parallelism=4"}), 4);
  CheckPoolMatchesSerial(Small({"ici_expert_parallelism=8"}), 8);
  CheckPoolMatchesSerial(Small({"ici_expert_parallelism=2", "ici_tensor_parallelism=2"}), 4);
  CheckPoolMatchesSerial(
      Small({"sparse_matmul=false", "capacity_factor=1.5", "ici_expert_parallelism=4"}), 4);
  CheckPoolMatchesSerial(Small({"sparse_matmul=false", "ici_fsdp_parallelism=4"}), 4);
}

}  // namespace
}  // namespace shardtrace
