"""Checks gmm_v2_emulation.py against a NumPy grouped matmul with partial sums.

Run with the oracle venv's python (JAX_PLATFORMS=cpu). The model: rows are grouped in order by
group_sizes, which cover every row (as the ring's do); the first rhs.shape[0] groups (group_offset 0, as the ring of experts calls it
after rolling its local experts first) get partial_sum + lhs[rows] @ rhs[group]; every other row
keeps partial_sum (or 0 without one).
"""

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax.numpy as jnp  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position

import gmm_v2_emulation  # pylint: disable=wrong-import-position


def model(lhs, rhs, group_sizes, partial_sum):
  out = np.zeros((lhs.shape[0], rhs.shape[2]), np.float64) if partial_sum is None else partial_sum.astype(np.float64)
  start = 0
  for g, size in enumerate(group_sizes):
    if g < rhs.shape[0]:
      out[start:start + size] += lhs[start:start + size].astype(np.float64) @ rhs[g].astype(np.float64)
    start += size
  return out


def main():
  rng = np.random.default_rng(20261125)
  passed = failed = 0
  for trial in range(24):
    m, k, n = 8 * int(rng.integers(1, 9)), int(rng.choice([8, 16])), int(rng.choice([16, 32]))
    local = int(rng.integers(1, 5))
    groups = local * int(rng.choice([1, 2]))  # all experts, or (ring) twice the local ones
    cuts = np.sort(rng.integers(0, m + 1, groups - 1))
    # Every row in some group: moe.py's ring counts all E experts over all its rows (bincount),
    # so no row lies past the groups (the kernels leave such rows unspecified).
    sizes = np.diff(np.concatenate([[0], cuts, [m]]))
    lhs = rng.standard_normal((m, k)).astype(np.float32)
    rhs = rng.standard_normal((local, k, n)).astype(np.float32)
    ps = rng.standard_normal((m, n)).astype(np.float32) if trial % 2 else None
    got = gmm_v2_emulation.fwd_run_tokamax_v2(
        jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(sizes, jnp.int32), jnp.float32, (m, k, n), False,
        jnp.asarray(0, jnp.int32), None if ps is None else jnp.asarray(ps), False)
    want = model(lhs, rhs, sizes, ps)
    ok = np.allclose(np.asarray(got), want, atol=1e-4, rtol=1e-4)
    passed += ok
    failed += not ok
    if not ok:
      print(f"FAIL trial {trial}: m={m} k={k} n={n} sizes={sizes.tolist()} partial_sum={ps is not None}")
  print(f"{passed} passed, {failed} failed")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
