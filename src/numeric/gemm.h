// MatMul: the one single-precision GEMM every numeric op calls (einsum's batched matmul,
// ragged_dot's per-expert groups). It runs OpenBLAS's cblas_sgemm on one thread: OpenBLAS
// picks its kernel for the CPU at run time (AVX-512/AVX2/...), while Eigen's own kernels
// are fixed at compile time to the portable baseline (SSE2), 3-4x slower on the expert
// shapes (bench/README.md has the measurement). One thread per call because parallelism
// comes from the ThreadPool over devices and experts, and because a call then performs
// the same operations in the same order wherever it runs: pool and serial runs stay
// bit-identical.
#pragma once

#include <cstdint>

namespace shardtrace {

// c[m,n] = a[m,k] * b[k,n], all row-major and contiguous; c is overwritten. m, k or n may
// be 0 (c is then zero-filled when it has elements).
void MatMul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);

}  // namespace shardtrace
