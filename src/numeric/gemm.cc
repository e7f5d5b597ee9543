#include "numeric/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

extern "C" void openblas_set_num_threads(int num_threads);

namespace shardtrace {

void MatMul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    std::fill(c, c + m * n, 0.0f);
    return;
  }
  // OpenBLAS's own threads would compete with the pool for the same cores; the process
  // has one OpenBLAS, so this is set once, for every caller.
  static std::once_flag single_threaded;
  std::call_once(single_threaded, [] { openblas_set_num_threads(1); });
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(k), b, static_cast<int>(n), 0.0f, c,
              static_cast<int>(n));
}

}  // namespace shardtrace
