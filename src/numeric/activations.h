// Nonlinearities of the MoE layer: the expert MLP activation chosen by MaxText's
// `mlp_activations` config (looked up by its flax name, "linear" meaning identity), the
// router's softmax over experts and the sigmoid of DeepSeek-V3 and Llama4 routing. Each
// computes in float32 from the stored values and rounds once to the output dtype, which is
// what XLA does for bfloat16 inputs on CPU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "numeric/array.h"

namespace shardtrace {

// The names Activation accepts, in the order error messages list them.
std::vector<std::string> ActivationNames();

// Applies the flax/jax activation `name` elementwise: "linear", "silu", "swish",
// "sigmoid", "relu", "gelu" (tanh approximation, flax's default), "tanh", "softplus",
// "elu", "leaky_relu" (slope 0.01), "relu6", "hard_sigmoid", "log_sigmoid", "soft_sign",
// "selu", "celu" (alpha 1). Throws Error listing the valid names on anything else.
// Output dtype: a.dtype if floating, else float32.
Array Activation(std::string_view name, const Array& a);

// 1 / (1 + exp(-x)). Output dtype: a.dtype if floating, else float32.
Array Sigmoid(const Array& a);

// exp(x - max) / sum(exp(x - max)) along `axis` (may be negative). Output dtype: a.dtype if
// floating, else float32.
Array Softmax(const Array& a, int64_t axis = -1);

}  // namespace shardtrace
