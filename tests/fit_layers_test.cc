// `fit` of the decoders that scan layers inside each scanned block (MaxText 0.2.5's Gemma 4
// and Qwen3-Next: nnx_decoders.py's _init_scanned_gemma4 / _init_scanned_qwen3_next), and of
// Qwen3-Next's gated delta net, through the CLI: every layer of a nested stack counted, its
// loop the outer scan's, the linear-attention layer among the blocks; and the layer rules TPU's
// schedules show (the attention's input gathered under tensor parallelism, an inlined first
// stack's forward held through a later loop's backward).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fit_json.h"

namespace shardtrace::testing {
namespace {

using nlohmann::json;

const json& Stack(const json& fit, const std::string& name) {
  for (const json& s : fit.at("stacks"))
    if (s.at("name") == name) return s;
  FAIL("no stack " << name);
  return fit;
}

TEST_CASE("a stack scanned in every block counts every layer and runs in the outer loop", "[fit]") {
  // gemma4-26b: 30 layers in 5 blocks of 5 local layers and 1 global.
  const json gemma = FitJson({"model_name=gemma4-26b", "compile_topology=v5p-64",
                              "per_device_batch_size=1", "max_target_length=2048"});
  const json& local = Stack(gemma, "local_layers");
  const json& global = Stack(gemma, "layers");
  CHECK(local.at("layers") == 25);
  CHECK(global.at("layers") == 5);
  CHECK(local.at("loop") == "layers");
  CHECK(global.at("loop") == "layers");
  // Every layer's input is kept under remat full: bf16 [1 x 32 devices, 2048, 2816] sharded
  // over the 32 devices' fsdp, 11 MiB a layer.
  const int64_t carry = int64_t{1} * 2048 * 2816 * 2;
  CHECK(local.at("kept_bytes_per_layer") == carry);
  CHECK(gemma.at("components").at("kept_for_backward") == 30 * carry);
  CHECK_FALSE(global.at("inlined").get<bool>());

  // qwen3-next-80b-a3b: 48 layers in 12 blocks of 3 linear-attention layers and 1 full.
  const json next = FitJson({"model_name=qwen3-next-80b-a3b", "compile_topology=v6e-16",
                             "per_device_batch_size=1", "max_target_length=4096"});
  CHECK(Stack(next, "local_layers").at("layers") == 36);
  CHECK(Stack(next, "layers").at("layers") == 12);
  CHECK(Stack(next, "local_layers").at("blocks") == "1 linear attention, 1 MoE, 1 shared experts");
  CHECK(Stack(next, "layers").at("blocks") == "1 attention, 1 MoE, 1 shared experts");

  // qwen3.5-35b-a3b: 40 layers in 10 scanned blocks of 3 linear-attention layers and 1 full,
  // no nested scan: one stack, one carry kept a block.
  const json q35 = FitJson({"model_name=qwen3.5-35b-a3b", "compile_topology=v6e-16",
                            "per_device_batch_size=1", "max_target_length=4096"});
  REQUIRE(q35.at("stacks").size() == 1);
  CHECK(Stack(q35, "layers").at("layers") == 10);
  CHECK(Stack(q35, "layers").at("loop") == "layers");
  CHECK(Stack(q35, "layers").at("blocks") ==
        "1 attention, 3 linear attention, 4 MoE, 4 shared experts");
}

TEST_CASE(
    "Qwen3-Next's gated delta net: its specs as JAX prints MaxText's, its residuals kept "
    "without remat",
    "[fit]") {
  const std::vector<std::string> config = {
      "model_name=qwen3-next-80b-a3b", "compile_topology=v6e-16",    "per_device_batch_size=1",
      "max_target_length=4096",        "override_model_config=true", "base_num_decoder_layers=4"};
  const json full = FitJson(config);
  std::map<std::string, std::string> spec;
  for (const json& p : full.at("params")) spec[p.at("path")] = p.at("spec");
  // No logical axes but the scans': JAX's P shorter than the array; none at all: P().
  CHECK(spec.at("decoder/layers/global_layer/attention/attention/key_norm/scale") == "P(None,)");
  CHECK(spec.at("decoder/layers/local_layers/attention/A_log") == "P()");
  CHECK(spec.at("decoder/layers/local_layers/attention/in_proj_qkvz/kernel") ==
        "P('fsdp', None, None, None)");

  std::vector<std::string> none = config;
  none.push_back("remat_policy=none");
  const json kept = FitJson(none);
  int64_t delta_net = -1;
  for (const json& k : Stack(kept, "local_layers").at("kept_per_layer"))
    if (k.at("name") == "gated_delta_net") delta_net = k.at("bytes");
  // Per device (fsdp 16, batch 1), every array the backward reads, as the compiler holds
  // them: chunk states 2 x f32 [1,32,64*128,128] (128 MiB each); in f32, chunk values 3 x
  // [1,32,64*64,128], keys 4 x the same, solves 5 x [1,32,64*64,128 lanes] (64 MiB each), and
  // one bf16 copy of each (32 MiB); the conv's bf16 [1,4096,8192] (64 MiB); the gate twice
  // and the core output twice, bf16 [1,4096,4096] (32 MiB each), and once in f32
  // [1,4096,32,128] (64 MiB); query and key heads 2 x bf16 [1,4096,16*2*128] (32 MiB each).
  const int64_t mib = int64_t{1} << 20;
  CHECK(delta_net ==
        (2 * 128 + (3 + 4 + 5) * 64 + 3 * 32 + 64 + 2 * 32 + 2 * 32 + 64 + 2 * 32) * mib);
}

TEST_CASE("under tensor parallelism the attention's input is gathered over tensor for its "
          "projections and held for their weight gradients",
          "[fit]") {
  // mixtral_l2_v5p8_tp2's config: fsdp 2 x tensor 2, batch 2 a device x 2048 x emb 4096.
  std::vector<std::string> config = {"model_name=mixtral-8x7b", "compile_topology=v5p-8",
                                     "override_model_config=true", "base_num_decoder_layers=2",
                                     "per_device_batch_size=2", "max_target_length=2048",
                                     "ici_fsdp_parallelism=2", "ici_tensor_parallelism=2"};
  const auto gathered_input = [](const json& fit) {
    int64_t bytes = 0;
    for (const json& k : Stack(fit, "layers").at("kept_per_layer"))
      if (k.at("name") == "attention_input_gathered") bytes = k.at("bytes");
    return bytes;
  };
  // Under remat full it is rematerialized with the layer (the compiler's fullest moment holds
  // it beside the MoE backward, bf16[4,2048,4096]), not kept.
  CHECK(gathered_input(FitJson(config)) == 0);
  config.push_back("remat_policy=none");
  // Kept without remat: [4 sequences (fsdp 2), 2048, 4096] in bf16, whole over tensor.
  CHECK(gathered_input(FitJson(config)) == int64_t{4} * 2048 * 4096 * 2);
  // Without tensor parallelism the projections read the input as it is: nothing gathered.
  config[6] = "ici_fsdp_parallelism=4";
  config[7] = "ici_tensor_parallelism=1";
  CHECK(gathered_input(FitJson(config)) == 0);
}

TEST_CASE("an inlined first stack holds its forward through the later loop's backward", "[fit]") {
  // deepseek2-16b at full depth: its one dense layer is inlined, and its forward (its MLP's
  // matmul activations, its attention's q, k and log-sum-exp) stays through the MoE layers'
  // backward loop at the compiler's fullest moment (full_deepseek2_16b_v5p8, _v5p16, _v5p32).
  const auto deepseek2 = [](const std::string& topology, int batch) {
    return FitJson({"model_name=deepseek2-16b", "compile_topology=" + topology,
                    fmt::format("per_device_batch_size={}", batch), "max_target_length=4096"});
  };
  const std::string held = "and dense_layers's rematerialized forward";
  CHECK(deepseek2("v5p-16", 4).at("peak_where").get<std::string>().find(held) != std::string::npos);
  CHECK(deepseek2("v5p-8", 2).at("peak_where").get<std::string>().find(held) != std::string::npos);
  // One stack: nothing before its loop.
  const json mixtral = FitJson({"model_name=mixtral-8x7b", "compile_topology=v5p-32"});
  CHECK(mixtral.at("peak_where").get<std::string>().find("rematerialized forward") ==
        std::string::npos);
  // The compiler refuses batch 27 (pair_deepseek2_16b_v5p16_pdb27), which fit called a fit
  // without it, and compiles 25.
  CHECK_FALSE(deepseek2("v5p-16", 27).at("fits").get<bool>());
  CHECK(deepseek2("v5p-16", 25).at("fits").get<bool>());
}

}  // namespace
}  // namespace shardtrace::testing
