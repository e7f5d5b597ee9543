"""The grouped matmul of tokamax gmm v2 (use_gmm_v2=True) on a CPU, for oracle cases only.

MaxText 0.2.5 requires use_gmm_v2 (with use_tokamax_gmm) for num_moe_emb_chunks > 0, and gmm v2
is a Mosaic TPU kernel that asks the device for its TPU generation while it is traced
("Unsupported TPU device kind: cpu"), so no CPU program containing it can even be lowered.
This module replaces the v2 forward (megablox ops._fwd_run_tokamax_v2) with what its
documentation and code say it computes, from a kernel that runs on a CPU: the megablox v1
kernel in Pallas interpret mode (the one every ring-of-experts oracle case already runs), plus
`partial_sum`, which v2 aliases into its output (rows the groups cover get partial_sum +
lhs @ rhs[group]; the rows past them keep partial_sum, and v1 writes zeros there).
Nothing here is MaxText's or tokamax's code; it calls megablox's own v1 path.
test_gmm_v2_emulation.py checks it against NumPy on random inputs.
"""

import jax.numpy as jnp

from maxtext.kernels.megablox import ops

REAL_V2 = ops._fwd_run_tokamax_v2  # pylint: disable=protected-access


def fwd_run_tokamax_v2(lhs, rhs, group_sizes, preferred_element_type, tiling, use_gmm_v2_heuristic_tiling,
                       group_offset, partial_sum, transpose_rhs, quantization_rule=None):
  del use_gmm_v2_heuristic_tiling  # tiling does not change the values
  if quantization_rule is not None or hasattr(lhs, "qvalue"):
    raise NotImplementedError("gmm v2 emulation: unquantized operands only")
  out = ops._fwd_run_megablox(  # pylint: disable=protected-access
      lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, None, transpose_rhs, True, ())
  if partial_sum is not None:
    out = out + partial_sum.astype(out.dtype)
  return out


def install():
  ops._fwd_run_tokamax_v2 = fwd_run_tokamax_v2  # pylint: disable=protected-access


def uninstall():
  ops._fwd_run_tokamax_v2 = REAL_V2  # pylint: disable=protected-access
