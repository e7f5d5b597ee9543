"""jax.lax.ragged_all_to_all built only from collectives XLA:CPU compiles.

XLA:CPU has no `ragged-all-to-all` ("not supported by XLA:CPU ThunkEmitter"), so MaxText's
sparse path with expert parallelism > 1 cannot run on fake CPU devices. export.py swaps
`jax.lax.ragged_all_to_all` for `ragged_all_to_all` below while it computes a case's numbers
(and only then: the collectives it records come from XLA's optimized HLO of the real program).

The emulation follows the semantics documented on jax.lax.ragged_all_to_all (jax 0.12,
jax/_src/lax/parallel.py), written from that description, not from JAX's implementation:
with N = len(input_offsets) = k * axis_size, slice i of the caller (operand rows
[input_offsets[i], input_offsets[i] + send_sizes[i])) goes to axis index i // k, where it is
written at rows [output_offsets[i], ...) of that receiver's result; the receiver's
recv_sizes[s * k + j] is the size of the j-th slice it gets from axis index s, and every row
of `output` no slice writes keeps its value. The receiver's writes run in the documented
order (source s, then slice j), so where two writes overlap the later one wins.

How: inside the shard_map, all_gather over `axis_name` the operand, input_offsets and
output_offsets (so every device holds what every sender would send), then each device picks
the slices addressed to it and fills its result with one masked gather. All-gather moves
axis_size times the bytes of the real collective; the fixtures' arrays are tiny.
`tools/maxtext_oracle/test_ragged_a2a.py` checks it against a NumPy model of the same
documented semantics on random inputs.
"""

import jax
import jax.numpy as jnp


def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                      axis_name, axis_index_groups=None):
  """Drop-in for jax.lax.ragged_all_to_all inside a shard_map (see the module docstring)."""
  if axis_index_groups is not None:
    raise NotImplementedError("ragged_all_to_all emulation: axis_index_groups is not supported")
  del send_sizes  # the receiver's recv_sizes say how many rows each write has (they must agree)
  n = input_offsets.shape[0]
  p = jax.lax.psum(1, axis_name)  # a Python int: the size of the mapped axis
  if n % p:
    raise ValueError(f"ragged_all_to_all: {n} offsets not divisible by axis size {p}")
  k = n // p
  me = jax.lax.axis_index(axis_name)
  every_operand = jax.lax.all_gather(operand, axis_name)  # [p, rows, ...]
  every_input_offsets = jax.lax.all_gather(input_offsets, axis_name)  # [p, n]
  every_output_offsets = jax.lax.all_gather(output_offsets, axis_name)  # [p, n]
  # The k slices each sender s addresses to this device, in receive order (s, j).
  mine = lambda a: jax.lax.dynamic_slice_in_dim(a, me * k, k, axis=1).reshape(p * k)
  src_offset = mine(every_input_offsets)
  dst_offset = mine(every_output_offsets)
  size = recv_sizes.reshape(p * k)
  rows = jnp.arange(output.shape[0], dtype=dst_offset.dtype)
  hit = (rows[None, :] >= dst_offset[:, None]) & (rows[None, :] < dst_offset[:, None] + size[:, None])
  written = jnp.any(hit, axis=0)
  # The last write that covers a row is the one that stays.
  last = (p * k - 1) - jnp.argmax(hit[::-1], axis=0)
  sender = last // k
  src_row = src_offset[last] + rows - dst_offset[last]
  src_row = jnp.clip(src_row, 0, operand.shape[0] - 1)  # rows nobody writes read row 0..; masked
  received = every_operand[sender, src_row]
  mask = written.reshape(written.shape + (1,) * (output.ndim - 1))
  return jnp.where(mask, received.astype(output.dtype), output)
