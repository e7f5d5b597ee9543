"""Every collective in a compiled XLA HLO module, as plain records.

The compiled module's text is the only thing read: one record per collective instruction
(all-gather, all-reduce, reduce-scatter, all-to-all, ragged-all-to-all, collective-permute and
their async -start forms; the -done halves carry no new information), with its replica groups,
operand and result shapes and bytes. shardtrace's collectives are compared with these.
"""

import re

COLLECTIVE_OPS = (
    "ragged-all-to-all",
    "all-gather",
    "all-reduce",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "collective-broadcast",
)

_DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
    "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1,
}
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128|f8e\w+)\[([\d,]*)\]")
_INSTR = re.compile(
    r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+(" + "|".join(re.escape(o) for o in COLLECTIVE_OPS) +
    r")(-start)?\((.*)$")


def _arrays(text):
  """[(dtype, [dims]), ...] for every array shape written in text."""
  out = []
  for dtype, dims in _ARRAY.findall(text):
    out.append((dtype, [int(d) for d in dims.split(",") if d]))
  return out


def _bytes(arrays):
  total = 0
  for dtype, dims in arrays:
    n = 1
    for d in dims:
      n *= d
    total += n * _DTYPE_BYTES.get(dtype, 4)
  return total


def _mesh_groups(attrs):
  """Mesh form replica_groups=mesh['a'=2,'b'=2] {'a'}: (axis sizes, the axes grouped over)."""
  m = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", attrs)
  if not m:
    return None
  sizes = {k: int(v) for k, v in re.findall(r"'([^']+)'=(\d+)", m.group(1))}
  axes = re.findall(r"'([^']+)'", m.group(2))
  return sizes, axes


def _replica_groups(attrs):
  """Explicit groups {{0,1},{2,3}} or iota form [2,2]<=[4] (with optional transpose T(1,0))."""
  m = re.search(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}", attrs)
  if m:
    return [[int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}", m.group(1))]
  m = re.search(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", attrs)
  if m:
    import numpy as np  # pylint: disable=import-outside-toplevel
    group_shape = [int(x) for x in m.group(1).split(",")]
    reshape = [int(x) for x in m.group(2).split(",")]
    ids = np.arange(int(np.prod(reshape))).reshape(reshape)
    if m.group(3):
      ids = ids.transpose([int(x) for x in m.group(3).split(",")])
    return ids.reshape(group_shape).tolist()
  m = re.search(r"source_target_pairs=\{((?:\{[\d,]*\},?)*)\}", attrs)
  if m:
    return [[int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}", m.group(1))]
  return None


def _axes_of_groups(groups, mesh_shape):
  """The mesh axes an explicit replica grouping spans: those along which a group's partition
  ids (positions in the mesh's device order, row-major over mesh_shape) differ."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  names, sizes = list(mesh_shape), list(mesh_shape.values())
  axes = set()
  for g in groups:
    coords = np.array(np.unravel_index(np.array(g), sizes)).T  # [len(g), len(names)]
    axes.update(names[a] for a in range(len(names)) if len(set(coords[:, a])) > 1)
  spanned = int(np.prod([mesh_shape[a] for a in axes])) if axes else 1
  if any(len(g) != spanned for g in groups):
    return None  # not a product of whole mesh axes
  return [a for a in names if a in axes]


def collectives_from_hlo(hlo_text, mesh_shape=None):
  """One dict per collective instruction of the compiled module, in text order.

  XLA prints most groups in mesh form (`mesh['expert'=2] {'expert'}`), which names the axes;
  some (ragged-all-to-all) it prints as explicit device lists. Given mesh_shape (axis name ->
  size, in the mesh's order) the axes of such a list are filled in from the partition ids.
  """
  records = []
  for line in hlo_text.splitlines():
    m = _INSTR.match(line)
    if not m:
      continue
    name, result_type, op, _, rest = m.groups()
    # Operands end at the first ')' that closes the call; attributes follow.
    depth, cut = 1, len(rest)
    for i, ch in enumerate(rest):
      depth += ch == "("
      depth -= ch == ")"
      if depth == 0:
        cut = i
        break
    operands, attrs = rest[:cut], rest[cut + 1:]
    result_arrays = _arrays(result_type)
    del operands  # printed as names only, without shapes
    groups = _replica_groups(attrs)
    mesh_groups = _mesh_groups(attrs)
    group_size = len(groups[0]) if groups else None
    if groups and not mesh_groups and mesh_shape and attrs.find("source_target_pairs") < 0:
      axes = _axes_of_groups(groups, mesh_shape)
      if axes is not None:
        mesh_groups = ({a: mesh_shape[a] for a in axes}, axes)
    if mesh_groups:
      group_size = 1
      for a in mesh_groups[1]:
        group_size *= mesh_groups[0][a]
    records.append({
        "name": name,
        "op": op.replace("-", "_"),
        "result": [f"{d}[{','.join(map(str, s))}]" for d, s in result_arrays],
        "result_bytes": _bytes(result_arrays),
        "replica_groups": groups,
        "mesh_axes": mesh_groups[1] if mesh_groups else None,
        "group_size": group_size,
        # GSPMD inserted it (sharding propagation), as opposed to an explicit collective of a
        # shard_map body.
        "spmd_generated": 'is_spmd_generated="true"' in attrs,
        "op_name": (re.search(r'op_name="([^"]*)"', attrs) or [None, None])[1],
        "dimensions": (re.search(r"dimensions=\{([\d,]*)\}", attrs) or [None, None])[1],
    })
  return records


_MEGASCALE_SEND = re.compile(
    r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*\((.*?)\)\s+send\((.*)$")


def megascale_sends_from_hlo(hlo_text):
  """The transfers between slices (DCN) of a multi-slice module, one dict per send.

  TPU does not write a collective across slices as an all-gather or all-reduce over their
  devices: it splits it into the collective inside each slice and host transfers between the
  slices, a send/recv pair with is_host_transfer=true handled by xla_megascale_runtime, whose
  frontend attributes name the kind (_xla_megascale_transfer_type, ALL_GATHER, ALL_REDUCE,
  REDUCE_SCATTER) and the collective it serves (_xla_host_transfer_rendezvous). The send's
  operand is what the device sends its peer slice."""
  records = []
  for line in hlo_text.splitlines():
    m = _MEGASCALE_SEND.match(line)
    if not m or "xla_megascale_runtime" not in line:
      continue
    name, result_tuple, _ = m.groups()
    payload = _arrays(result_tuple)[:1]  # (data, u32[] context, token[])
    kind = (re.search(r'_xla_megascale_transfer_type="(\w+)"', line) or [None, "UNKNOWN"])[1]
    records.append({
        "name": name,
        "op": "dcn_" + kind.lower(),
        "result": [f"{d}[{','.join(map(str, s))}]" for d, s in payload],
        "result_bytes": _bytes(payload),
        "rendezvous": (re.search(r'_xla_host_transfer_rendezvous="([^"]*)"', line) or [None, None])[1],
    })
  return records


_STABLEHLO = re.compile(r'"?stablehlo\.(all_gather|all_reduce|reduce_scatter|all_to_all|collective_permute)"?'
                        r'|stablehlo\.custom_call @(ragged_all_to_all)')


def collectives_from_stablehlo(text):
  """The collectives written explicitly in a lowered (not yet partitioned) module: those of
  shard_map bodies. GSPMD adds its own only when compiling."""
  records = []
  for line in text.splitlines():
    m = _STABLEHLO.search(line)
    if not m:
      continue
    op = m.group(1) or m.group(2)
    types = re.findall(r"tensor<((?:\d+x)*)(bf16|f32|f16|i32|i64|i1|ui32)>", line)
    records.append({"op": op, "types": [f"{t}[{d.rstrip('x').replace('x', ',')}]" for d, t in types]})
  return records
