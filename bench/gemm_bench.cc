// GEMM ratio for bench/README.md (target 2 of issue 13): on the expert shapes of the
// benchmark cases, in one process and interleaved so machine load hits every contender
// alike, the GF/s of
//   - shardtrace's MatMul (numeric/gemm.h: OpenBLAS cblas_sgemm, one thread),
//   - Eigen's own kernels as this build compiles them (what numeric ops used before),
//   - cblas_sgemm called directly (the reference),
// and the ratios to the reference. Prints one table row per shape.
#include <cblas.h>
#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "numeric/gemm.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct GemmShape {
  const char* what;
  int64_t m, k, n;
};

double Seconds(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() {
  openblas_set_num_threads(1);
  const std::vector<GemmShape> shapes = {
      {"400 MB case wi (512 rows/expert)", 512, 1024, 2048},
      {"400 MB case wo", 512, 2048, 1024},
      {"Mixtral-8x7B wi (128 rows/expert)", 128, 4096, 14336},
      {"Mixtral-8x7B wo", 128, 14336, 4096},
  };
  fmt::print(
      "| shape (rows x K x N) | what | MatMul GF/s | Eigen GF/s | cblas_sgemm GF/s | MatMul / "
      "cblas | Eigen / cblas |\n");
  fmt::print("|---|---|---|---|---|---|---|\n");
  for (const GemmShape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
        c(static_cast<size_t>(s.m * s.n));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) * 0.01f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.02f;
    const auto matmul = [&] { shardtrace::MatMul(a.data(), b.data(), c.data(), s.m, s.k, s.n); };
    const auto eigen = [&] {
      const Eigen::Map<const RowMatrix> lhs(a.data(), s.m, s.k), rhs(b.data(), s.k, s.n);
      Eigen::Map<RowMatrix> out(c.data(), s.m, s.n);
      out.noalias() = lhs * rhs;
    };
    const auto blas = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.m),
                  static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a.data(),
                  static_cast<int>(s.k), b.data(), static_cast<int>(s.n), 0.0f, c.data(),
                  static_cast<int>(s.n));
    };
    // Best of interleaved rounds: load from other processes only ever adds time.
    double t_matmul = 1e9, t_eigen = 1e9, t_blas = 1e9;
    for (int round = 0; round < 5; ++round) {
      t_matmul = std::min(t_matmul, Seconds(matmul));
      t_eigen = std::min(t_eigen, Seconds(eigen));
      t_blas = std::min(t_blas, Seconds(blas));
    }
    const double flops = 2.0 * static_cast<double>(s.m * s.k * s.n);
    fmt::print("| {}x{}x{} | {} | {:.1f} | {:.1f} | {:.1f} | {:.2f} | {:.2f} |\n", s.m, s.k, s.n,
               s.what, flops / t_matmul / 1e9, flops / t_eigen / 1e9, flops / t_blas / 1e9,
               t_blas / t_matmul, t_blas / t_eigen);
  }
  return 0;
}
