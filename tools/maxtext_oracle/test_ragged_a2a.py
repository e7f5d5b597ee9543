#!/usr/bin/env python3
"""Checks ragged_a2a.ragged_all_to_all against a NumPy model of jax.lax.ragged_all_to_all's
documented semantics (jax 0.12, jax/_src/lax/parallel.py) on random inputs.

Run with the oracle venv (not part of `make test`: the C++ suite never runs Python):
    tools/maxtext_oracle/test_ragged_a2a.py   (or: VENV/bin/python tools/maxtext_oracle/test_ragged_a2a.py)
It prints one line per group of trials and exits 1 on the first mismatch. It also checks that
JAX's VJP of the emulation is the transpose of the documented map (the step fixtures' gradients).
"""

import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # pylint: disable=wrong-import-position
import jax.numpy as jnp  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # pylint: disable=wrong-import-position

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ragged_a2a  # pylint: disable=wrong-import-position


def numpy_model(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes):
  """The documented pseudocode, literally, for all devices at once (index 0 = axis index).

  Sender s sends operand[s][input_offsets[s][i] : + send_sizes[s][i]] to axis index i // k;
  receiver d, in order i = 0..N-1 (source i // k), writes what it receives at
  all_to_all(output_offsets)[d][i] with recv_sizes[d][i] rows.
  """
  p, n = input_offsets.shape
  k = n // p
  # all_to_all(x, split 0, concat 0, tiled): chunk c of device q lands at chunk q of device c.
  a2a = lambda x: np.stack([np.concatenate([x[q][d * k:(d + 1) * k] for q in range(p)]) for d in range(p)])
  offsets_here = a2a(output_offsets)
  results = []
  for d in range(p):
    result = output[d].copy()
    for i in range(n):
      s, j = divmod(i, k)
      sent_index = d * k + j  # the slice of sender s addressed to d, j-th of its k
      data = operand[s][input_offsets[s][sent_index]:input_offsets[s][sent_index] + send_sizes[s][sent_index]]
      assert len(data) == recv_sizes[d][i], "send_sizes must equal all_to_all(recv_sizes)"
      result[offsets_here[d][i]:offsets_here[d][i] + recv_sizes[d][i]] = data
    results.append(result)
  return np.stack(results)


def random_case(rng, p, k, rows_in, rows_out, trailing, dtype, gaps):
  """Valid random arguments: every slice inside the operand, receivers' writes disjoint and inside output."""
  n = p * k
  operand = rng.normal(size=(p, rows_in) + trailing).astype(dtype)
  output = rng.normal(size=(p, rows_out) + trailing).astype(dtype)
  send = np.zeros((p, n), np.int32)
  in_off = np.zeros((p, n), np.int32)
  out_off = np.zeros((p, n), np.int32)
  recv = np.zeros((p, n), np.int32)
  for s in range(p):
    for i in range(n):
      size = int(rng.integers(0, min(rows_in, rows_out // n) + 1))
      send[s, i] = size
      in_off[s, i] = int(rng.integers(0, rows_in - size + 1))  # reads may overlap: they are copies
  for d in range(p):
    # The n slices arriving at d, (source s, j-th), laid out disjointly in a random order, with
    # the spare rows spread as random gaps before them (or all left at the end).
    incoming = [(s, j) for s in range(p) for j in range(k)]
    order = rng.permutation(len(incoming))
    spare = rows_out - sum(send[s, d * k + j] for s, j in incoming)
    cuts = np.sort(rng.integers(0, spare + 1, size=len(incoming))) if gaps else np.zeros(len(incoming), int)
    pos, used = 0, 0
    for t, cut in zip(order, cuts):
      s, j = incoming[t]
      pos += int(cut) - used  # gaps before this slice add up to `cut`
      used = int(cut)
      out_off[s, d * k + j] = pos
      recv[d, s * k + j] = send[s, d * k + j]
      pos += int(send[s, d * k + j])
  return operand, output, in_off, send, out_off, recv


def run_emulation(mesh, axis, args, other_axis=None):
  """The emulation inside a shard_map over `axis` (and `other_axis` carrying a copy per index)."""
  spec = P(axis) if other_axis is None else P((axis, other_axis))

  def body(operand, output, io, ss, oo, rs):
    squeeze = lambda a: a[0]
    out = ragged_a2a.ragged_all_to_all(*map(squeeze, (operand, output, io, ss, oo, rs)), axis_name=axis)
    return out[None]

  f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(spec,) * 6, out_specs=spec))
  placed = [jax.device_put(a, NamedSharding(mesh, spec)) for a in args]
  return np.asarray(f(*placed))


def numpy_vjp(args, ct):
  """The transpose of the documented map (linear in operand and output): (d operand, d output).

  The model itself, run on position ids instead of values, says where each result row came
  from (a row of some sender's operand, or the receiver's own output row); the cotangent of a
  result row goes back to exactly that row.
  """
  operand, output = args[0], args[1]
  p, rows_in, rows_out = operand.shape[0], operand.shape[1], output.shape[1]
  ids_in = np.arange(1, p * rows_in + 1, dtype=np.int64).reshape(p, rows_in)
  ids_out = -np.arange(1, p * rows_out + 1, dtype=np.int64).reshape(p, rows_out)
  source = numpy_model(ids_in, ids_out, *args[2:])
  d_operand = np.zeros(operand.shape, np.float64)
  d_output = np.zeros(output.shape, np.float64)
  for d in range(p):
    for r in range(rows_out):
      i = int(source[d, r])
      if i > 0:
        d_operand[divmod(i - 1, rows_in)] += ct[d, r]
      else:
        d_output[divmod(-i - 1, rows_out)] += ct[d, r]
  return d_operand, d_output


def run_emulation_vjp(mesh, axis, args, ct):
  """JAX's own VJP of the emulation (what export_step.py differentiates) w.r.t. operand and output."""
  spec = P(axis)

  def body(operand, output, io, ss, oo, rs):
    squeeze = lambda a: a[0]
    out = ragged_a2a.ragged_all_to_all(*map(squeeze, (operand, output, io, ss, oo, rs)), axis_name=axis)
    return out[None]

  mapped = jax.shard_map(body, mesh=mesh, in_specs=(spec,) * 6, out_specs=spec)
  placed = [jax.device_put(a, NamedSharding(mesh, spec)) for a in list(args) + [ct]]

  @jax.jit
  def vjp(operand, output, io, ss, oo, rs, c):
    _, back = jax.vjp(lambda a, b: mapped(a, b, io, ss, oo, rs), operand, output)
    return back(c)

  return tuple(np.asarray(g) for g in vjp(*placed))


def check_close(name, got, want):
  if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-6):
    print(f"FAIL {name}: shape {got.shape}/{want.shape} max |error| "
          f"{np.max(np.abs(got - want)) if got.shape == want.shape else 'shape'}")
    sys.exit(1)


def check(name, got, want):
  if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
    bad = np.argwhere(got != want)[:5] if got.shape == want.shape else "shape"
    print(f"FAIL {name}: dtype {got.dtype}/{want.dtype} shape {got.shape}/{want.shape} first differences {bad}")
    sys.exit(1)


def main():
  devices = jax.devices()
  assert len(devices) >= 8, devices
  # The documented example (axis size 2), values as ints.
  ex = [np.array(a) for a in ([[1, 2, 2], [3, 4, 0]], [[0, 0, 0, 0], [0, 0, 0, 0]], [[0, 1], [0, 1]],
                              [[1, 2], [1, 1]], [[0, 0], [1, 2]], [[1, 1], [2, 1]])]
  ex[0] = ex[0].astype(np.float32)
  ex[1] = ex[1].astype(np.float32)
  for i in range(2, 6):
    ex[i] = ex[i].astype(np.int32)
  mesh2 = Mesh(np.array(devices[:2]), ("x",))
  want = numpy_model(*ex)
  check("documented example (model)", want, np.array([[1, 3, 0, 0], [2, 2, 4, 0]], np.float32))
  check("documented example", run_emulation(mesh2, "x", ex), want)
  print("documented example: pass")

  rng = np.random.default_rng(20261125)
  trials = 0
  for p in (1, 2, 3, 4, 8):
    mesh = Mesh(np.array(devices[:p]), ("x",))
    for k in (1, 2, 3):
      for t in range(6):
        trailing = ((), (3,), (2, 5))[t % 3]
        dtype = (np.float32, np.int32, jnp.bfloat16)[t % 3]
        rows_in = int(rng.integers(1, 12))
        rows_out = int(rng.integers(p * k, p * k + 14))
        args = random_case(rng, p, k, rows_in, rows_out, trailing, dtype, gaps=t % 2 == 0)
        check(f"p={p} k={k} trial {t}", run_emulation(mesh, "x", args), numpy_model(*args))
        trials += 1
  print(f"random 1-axis meshes (axis size 1, 2, 3, 4, 8; 1-3 slices per device): {trials} trials pass")

  # The collective over one axis of a 2-axis mesh (MaxText's expert axis beside tensor): each
  # index of the other axis runs its own independent ragged all-to-all over `e`.
  mesh = Mesh(np.array(devices[:8]).reshape(4, 2), ("e", "t"))
  two = 0
  for t in range(6):
    per_t = [random_case(rng, 4, 1 + t % 2, 9, 12, (3,), np.float32, gaps=True) for _ in range(2)]
    # Device (e, t) holds per_t[t][.][e]: interleave so the flattened (e, t) order matches.
    args = [np.stack([per_t[tt][a][e] for e in range(4) for tt in range(2)]) for a in range(6)]
    got = run_emulation(mesh, "e", args, other_axis="t")
    want = np.stack([numpy_model(*per_t[tt])[e] for e in range(4) for tt in range(2)])
    check(f"2-axis mesh trial {t}", got, want)
    two += 1
  print(f"random 2-axis mesh (expert=4 x tensor=2, over expert): {two} trials pass")

  # Overlapping writes: the documented loop order (source, then slice) makes the later one win.
  p, k = 2, 2
  operand = np.arange(2 * 4 * 1, dtype=np.float32).reshape(2, 4, 1) + 1
  output = np.zeros((2, 5, 1), np.float32)
  in_off = np.array([[0, 1, 2, 3], [0, 1, 2, 3]], np.int32)
  send = np.full((2, 4), 2, np.int32)
  send[:, 3] = 1
  send[:, 1] = 1
  out_off = np.array([[0, 1, 0, 1], [1, 2, 2, 3]], np.int32)
  recv = np.array([[2, 1, 2, 1], [2, 1, 2, 1]], np.int32)
  args = args_overlap = (operand, output, in_off, send, out_off, recv)
  check("overlapping writes", run_emulation(Mesh(np.array(devices[:2]), ("x",)), "x", args), numpy_model(*args))
  print("overlapping writes (later write wins): pass")

  # Differentiable: JAX's VJP of the emulation (all_gather's transpose, the gather's scatter-add,
  # where's select) is the transpose of the documented map, so the step fixtures' gradients
  # through it are those of the real collective.
  grads = 0
  for p in (1, 2, 4, 8):
    mesh = Mesh(np.array(devices[:p]), ("x",))
    for k in (1, 2):
      for t in range(3):
        args = random_case(rng, p, k, int(rng.integers(1, 12)), int(rng.integers(p * k, p * k + 14)), (3,),
                           np.float32, gaps=t % 2 == 0)
        ct = rng.normal(size=args[1].shape).astype(np.float32)
        got = run_emulation_vjp(mesh, "x", args, ct)
        want = numpy_vjp(args, ct)
        check_close(f"vjp p={p} k={k} trial {t} (operand)", got[0], want[0])
        check_close(f"vjp p={p} k={k} trial {t} (output)", got[1], want[1])
        grads += 1
  ct = rng.normal(size=output.shape).astype(np.float32)
  got = run_emulation_vjp(Mesh(np.array(devices[:2]), ("x",)), "x", args_overlap, ct)
  want = numpy_vjp(args_overlap, ct)
  check_close("vjp overlapping writes (operand)", got[0], want[0])
  check_close("vjp overlapping writes (output)", got[1], want[1])
  grads += 1
  print(f"VJP against the transposed model (axis size 1, 2, 4, 8; overlapping writes): {grads} trials pass")
  print(f"{1 + trials + two + 1 + grads} passed, 0 failed")


if __name__ == "__main__":
  main()
