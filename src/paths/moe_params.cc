#include "paths/moe_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "numeric/elementwise.h"
#include "paths/capacity_masks.h"
#include "paths/moe_setup.h"
#include "util/error.h"

namespace shardtrace {
namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) / 9007199254740992.0; }
  double Normal() {
    const double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t state_;
};

Array Make(Rng* rng, Shape shape, DType dtype, double stddev) {
  // A dense model has no expert dims (moe_mlp_dim -1): its unused MoE arrays are empty.
  for (int64_t& d : shape) d = std::max<int64_t>(d, 0);
  if (!rng) return Array::Symbolic(std::move(shape), dtype);
  std::vector<float> data(static_cast<size_t>(NumElements(shape)));
  for (float& v : data) v = RoundTo(dtype, static_cast<float>(rng->Normal() * stddev));
  return Array::FromData(std::move(shape), dtype, std::move(data));
}

Array Ones(bool numeric, Shape shape) {
  for (int64_t& d : shape) d = std::max<int64_t>(d, 0);
  return numeric ? Array::Filled(std::move(shape), DType::kFloat32, 1.0f)
                 : Array::Symbolic(std::move(shape), DType::kFloat32);
}

MlpParams MakeMlp(Rng* rng, const MoeSettings& settings, int64_t in, int64_t hidden, int n,
                  DType dtype) {
  MlpParams p;
  for (int i = 0; i < n; ++i) p.wi.push_back(Make(rng, {in, hidden}, dtype, 1.0 / std::sqrt(in)));
  p.wo = Make(rng, {hidden, in}, dtype, 1.0 / std::sqrt(hidden));
  if (settings.IsFp8Storage()) {
    for (int i = 0; i < n; ++i)
      p.wi_scale.push_back(Ones(rng != nullptr, DenseScaleShape(settings, {in, hidden})));
    p.wo_scale = Ones(rng != nullptr, DenseScaleShape(settings, {hidden, in}));
  }
  return p;
}

}  // namespace

Shape DenseScaleShape(const MoeSettings& settings, const Shape& kernel) {
  if (!settings.weight_block_size) return {};
  const auto [b_in, b_out] = *settings.weight_block_size;
  return {ScaleBlocks(kernel[0], b_in), ScaleBlocks(kernel[1], b_out)};
}

void CheckNumericSize(const MoeSetup& s, int64_t devices, int64_t budget_bytes) {
  // The budget bounds memory, not time: every simulated device runs its own shard of every op,
  // so a tiny config within the budget on 2^18 devices ran for 45 s (65,536: 11 s). Past this
  // many devices a numeric run is refused before any work; the symbolic trace has no bound.
  constexpr int64_t kMaxNumericDevices = 16384;
  if (devices > kMaxNumericDevices) {
    Fail("a numeric run simulates every device, and {} devices is more than the {} it "
         "simulates in seconds; trace symbolically (trace without --numeric) or give a smaller "
         "mesh",
         devices, kMaxNumericDevices);
  }
  // Element counts saturate instead of overflowing: any of them past the budget is refused.
  const auto product = [](std::initializer_list<int64_t> dims) {
    int64_t n = 1;
    for (const int64_t d : dims)
      if (__builtin_mul_overflow(n, std::max<int64_t>(d, 0), &n)) return INT64_MAX;
    return n;
  };
  constexpr const char* kDeviceCount = "the device count";
  // The largest arrays each path materialises. Kernels are held by every device (the expert
  // kernels split over EP); activations split over the devices, but a run keeps several
  // copies (an op's inputs and outputs, per-device shards of replicated ones): 4, on any
  // device count. Counting min(devices, 4) let a one-device run of 1.6 GB routed rows
  // (per_device_batch_size=100000, max_target_length=64) pass and hold 6.2 GB for 93 s; one
  // device measured 3.8 copies, two 4.2.
  constexpr int64_t kActivationCopies = 4;
  const int64_t wide = std::max({s.hidden, s.wi_hidden, s.emb, s.mlp_dim, s.shared_hidden});
  struct Candidate {
    std::string what, keys;
    int64_t elements;
    int64_t kernel_split;  // a kernel: the devices one copy is split over; 0: an activation
  };
  std::vector<Candidate> candidates = {
      {"the expert kernels wi_0/wi_1/wo", "num_experts, base_emb_dim, base_moe_mlp_dim",
       product({3, s.num_experts, s.emb, std::max(s.hidden, s.wi_hidden)}),
       std::max<int64_t>(s.ep, 1)},
      {"the dense MLP kernels", "base_emb_dim, base_mlp_dim", product({3, s.emb, s.mlp_dim}), 1},
      // A device's ragged receive buffer holds at most every routed row (it is sized by the
      // rows actually received, not allocated at get_ragged_buffer_size's worst case).
      {"the routed rows", "per_device_batch_size, max_target_length, num_experts_per_tok, dims",
       product({s.batch, s.seq, s.top_k, wide}), 0},
  };
  if (s.path == MoePath::kDenseDropless) {
    // Only dense dropless runs every token through every expert ("BSM,EMH -> BSEH"); the
    // sparse paths hold the routed rows above, the dropping path its capacity slots below.
    candidates.push_back({"a [B,S,E,H] activation",
                          "per_device_batch_size, max_target_length, num_experts, dims",
                          product({s.batch, s.seq, s.num_experts, wide}), 0});
  }
  if (s.path == MoePath::kDenseDropping) {
    // generate_masks' [B,S,E,C] masks and the [E,B,C,M] expert inputs they dispatch to.
    const int64_t c = Capacity(s.seq * s.top_k, s.num_experts, s.capacity_factor);
    candidates.push_back({fmt::format("the [B,S,E,C] dispatch and combine masks (C = {})", c),
                          "capacity_factor, per_device_batch_size, max_target_length",
                          product({2, s.batch, s.seq, s.num_experts, c}), 0});
    candidates.push_back({fmt::format("the [E,B,C,M] expert inputs (C = {})", c),
                          "capacity_factor, per_device_batch_size, base_emb_dim",
                          product({s.num_experts, s.batch, c, wide}), 0});
  }
  if (s.path == MoePath::kSparse) {
    // Inside shard_map every simulated device keeps its own shard of every array the block
    // records, however small: measured 6.8 KB a device on 8-wide dims (65,536 devices: 445 MB,
    // 11 s). Without this, a tiny config on 2^20 devices fit the kernels' budget and then ran
    // for minutes. Counted as 8 KiB (2048 floats) a device.
    constexpr int64_t kDeviceShardFloats = 2048;
    candidates.push_back({"each simulated device's shards of the arrays the block records",
                          kDeviceCount, kDeviceShardFloats, 1});
  }
  int64_t total = 0;  // floats, saturating
  const Candidate* largest = &candidates.front();
  int64_t largest_held = 0;
  for (const Candidate& c : candidates) {
    const int64_t held = c.kernel_split > 0 ? product({c.elements / c.kernel_split, devices})
                                            : product({c.elements, kActivationCopies});
    if (__builtin_add_overflow(total, held, &total)) total = INT64_MAX;
    if (held > largest_held) {
      largest = &c;
      largest_held = held;
    }
  }
  const int64_t bytes = product({total, 4});
  const auto mib = [](int64_t b) { return fmt::format("{} MiB", (b + (1 << 20) - 1) >> 20); };
  if (bytes > budget_bytes)
    Fail(
        "--numeric: the run would hold {} (largest: {}, {} floats{}); the budget is {} "
        "(--max-memory GIB raises it); shrink {}{}, or trace symbolically",
        bytes == INT64_MAX ? std::string("more than 8 EiB") : "about " + mib(bytes), largest->what,
        largest->elements,
        devices > 1 ? fmt::format(", on up to {} simulated devices", devices) : "",
        mib(budget_bytes), largest->keys,
        devices > 1 && largest->keys != kDeviceCount ? " or the device count" : "");
}

MoeParams MakeParams(const MoeSetup& s, int num_mlp_activations, bool numeric, uint64_t seed,
                     int64_t budget_bytes) {
  if (numeric) CheckNumericSize(s, 1, budget_bytes);
  Rng generator(seed);
  Rng* rng = numeric ? &generator : nullptr;
  const DType w = s.weight_dtype;
  MoeParams p;
  // The block receives its input in `dtype` (the decoder layer's pre-MoE norm emits it), so
  // the argument XLA holds per device is that size.
  p.inputs = Make(rng, {s.batch, s.seq, s.emb}, s.dtype, 1.0);
  const DType gate_w = s.settings.WeightDtypeOf("gate");
  p.gate_kernel = Make(rng, {s.emb, s.num_experts}, gate_w, 1.0 / std::sqrt(s.emb));
  p.gate_bias = Make(rng, {s.num_experts}, gate_w, 0.1);
  p.wi_0 = Make(rng, {s.num_experts, s.emb, s.wi_hidden}, w, 1.0 / std::sqrt(s.emb));
  p.wi_1 = Make(rng, {s.num_experts, s.emb, s.wi_hidden}, w, 1.0 / std::sqrt(s.emb));
  p.wo = Make(rng, {s.num_experts, s.wo_hidden, s.emb}, w, 1.0 / std::sqrt(s.wo_hidden));
  p.wi_0_bias = Make(rng, {s.num_experts, s.hidden}, w, 0.1);
  p.wi_1_bias = Make(rng, {s.num_experts, s.hidden}, w, 0.1);
  p.wo_bias = Make(rng, {s.num_experts, s.emb}, w, 0.1);
  p.per_expert_scale =
      numeric ? Array::Filled({s.num_experts}, w, 1.0f) : Array::Symbolic({s.num_experts}, w);
  if (s.shared_hidden > 0)
    p.shared = MakeMlp(rng, s.settings, s.emb, s.shared_hidden, num_mlp_activations, w);
  p.dense = MakeMlp(rng, s.settings, s.emb, s.mlp_dim, num_mlp_activations, w);
  // Drawn last, so every other parameter keeps the values it has without this gate.
  if (s.shared_hidden > 0 && s.qwen3_next_block)
    p.shared_expert_gate = Make(rng, {s.emb, 1}, s.settings.WeightDtypeOf("shared_expert_gate"),
                                1.0 / std::sqrt(s.emb));
  if (s.settings.IsFp8Storage()) {
    // moe.py's scale grid: the kernel's (E, M, H) in blocks; one scale per expert without
    // weight_block_size. Both wi and wo count the hidden dim in b_out blocks, M in b_in.
    Shape wi_scale = {s.num_experts}, wo_scale = {s.num_experts};
    if (s.settings.weight_block_size) {
      const auto [b_in, b_out] = *s.settings.weight_block_size;
      wi_scale = {s.num_experts, ScaleBlocks(s.emb, b_in), ScaleBlocks(s.wi_hidden, b_out)};
      wo_scale = {s.num_experts, ScaleBlocks(s.wi_hidden, b_out), ScaleBlocks(s.emb, b_in)};
    }
    p.wi_0_scale = Ones(numeric, wi_scale);
    p.wi_1_scale = Ones(numeric, wi_scale);
    p.wo_scale = Ones(numeric, wo_scale);
  }
  return p;
}

bool IsDenseMlpCase(const std::map<std::string, Array>& arrays) {
  return arrays.count("mlp_wo") > 0;
}

MoeParams ParamsFromArrays(const MoeSetup& s, int num_mlp_activations,
                           const std::map<std::string, Array>& arrays, const std::string& source,
                           bool routed_bias, bool mlp_bias) {
  // Shapes only: every slot is either taken from `arrays` (sharing its buffer) or given
  // MaxText's initial value below, so nothing is generated and then overwritten. The
  // arrays' own size is the only bound (no CheckNumericSize): the data already exists.
  MoeParams p = MakeParams(s, num_mlp_activations, /*numeric=*/false, /*seed=*/0);
  auto take = [&](const std::string& name, Array& slot, bool required) {
    const auto it = arrays.find(name);
    if (it == arrays.end()) {
      if (required)
        Fail("{}: array '{}' is missing (expected shape {})", source, name,
             ShapeToString(slot.shape));
      return;
    }
    if (it->second.shape != slot.shape)
      Fail("{}: array '{}' has shape {} but the config implies {}", source, name,
           ShapeToString(it->second.shape), ShapeToString(slot.shape));
    // A case stores its inputs as float32; the block receives them in `dtype`, rounded as
    // the exporter rounded them before the call (a no-op for its bf16-exact values).
    slot =
        name == "inputs"
            ? shardtrace::Cast(Array::FromBuffer(slot.shape, DType::kFloat32, it->second.buffer()),
                               slot.dtype)
            : Array::FromBuffer(slot.shape, slot.dtype, it->second.buffer());
  };
  // Parameters a golden case leaves out take MaxText's initial value: biases start at zero,
  // per_expert_scale at one.
  for (std::optional<Array>* bias : {&p.gate_bias, &p.wi_0_bias, &p.wi_1_bias, &p.wo_bias})
    *bias = Array::Filled((*bias)->shape, (*bias)->dtype, 0.0f);
  // A dense MlpBlock case carries mlp_wi_0.., mlp_wo and no expert arrays.
  const bool moe = !IsDenseMlpCase(arrays);
  if (moe) p.dense.reset();  // a MoE case holds no dense MlpBlock
  p.per_expert_scale = Array::Filled(p.per_expert_scale->shape, p.per_expert_scale->dtype, 1.0f);
  // fp8 scales start at one too (a case may carry its own, by MaxText's leaf names).
  const auto one = [](Array& a) { a = Array::Filled(a.shape, a.dtype, 1.0f); };
  for (std::optional<Array>* scale : {&p.wi_0_scale, &p.wi_1_scale, &p.wo_scale})
    if (*scale) one(**scale);
  for (std::optional<MlpParams>* mlp : {&p.shared, &p.dense}) {
    if (!*mlp) continue;
    for (Array& scale : (*mlp)->wi_scale) one(scale);
    if ((*mlp)->wo_scale) one(*(*mlp)->wo_scale);
  }
  take("inputs", p.inputs, true);
  take("gate_kernel", p.gate_kernel, moe);
  if (routed_bias) take("gate_bias", *p.gate_bias, false);
  take("wi_0", p.wi_0, moe);
  take("wi_1", p.wi_1, moe);
  take("wo", p.wo, moe);
  if (p.wi_0_scale) {
    take("wi_0_scale", *p.wi_0_scale, false);
    take("wi_1_scale", *p.wi_1_scale, false);
    take("wo_scale", *p.wo_scale, false);
  }
  if (!moe) {
    for (size_t i = 0; i < p.dense->wi.size(); ++i)
      take(fmt::format("mlp_wi_{}", i), p.dense->wi[i], true);
    take("mlp_wo", p.dense->wo, true);
  }
  if (mlp_bias) {
    take("wi_0_bias", *p.wi_0_bias, false);
    take("wi_1_bias", *p.wi_1_bias, false);
    take("wo_bias", *p.wo_bias, false);
  }
  if (p.shared) {
    for (size_t i = 0; i < p.shared->wi.size(); ++i)
      take(fmt::format("shared_wi_{}", i), p.shared->wi[i], true);
    take("shared_wo", p.shared->wo, true);
    for (size_t i = 0; i < p.shared->wi_scale.size(); ++i)
      take(fmt::format("shared_wi_{}_scale", i), p.shared->wi_scale[i], false);
    if (p.shared->wo_scale) take("shared_wo_scale", *p.shared->wo_scale, false);
  }
  if (p.shared_expert_gate) take("shared_expert_gate", *p.shared_expert_gate, true);
  // gemma4's per-expert scale: a case may carry it (a step case, for its gradient).
  if (moe) take("per_expert_scale", *p.per_expert_scale, false);
  return p;
}

}  // namespace shardtrace
