"""Parameter layouts of MaxText's models, recorded from MaxText itself for shardtrace's `fit`.

For each model file this builds MaxText's model abstractly (param_tree's nnx.eval_shape, one
fake CPU device, nothing allocated) twice, with every size key the layout may depend on set to
distinct probe values (PROBES: A, then B), and records each parameter as
  {"path", "dims": [expression, ...], "axes": [logical axis or null, ...], "dtype"}
where each expression is the config key (or a sum, product or quotient of keys, or an integer
when no key explains it) that gives the dimension: found on probe A among the candidates the
keys' values allow, required to be the only candidate, and then checked on probe B, where it
must give MaxText's dimension again. `dtype` is "weight_dtype" when the parameter follows that
key (both probes differ in it) and the dtype otherwise. Also recorded: the structural keys the
layout was taken at (STRUCTURAL), which `fit` compares with the user's config.
Usage: export_layouts.py OUT.json BASE.yml MODEL_NAME...
"""

import itertools
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"

import jax  # pylint: disable=wrong-import-position
from flax import nnx  # pylint: disable=wrong-import-position

from maxtext.layers import moe as _moe  # noqa: F401  pylint: disable=wrong-import-position,unused-import
import oracle_stubs  # pylint: disable=wrong-import-position

oracle_stubs.stub_missing_modules()

from maxtext.configs import pyconfig  # pylint: disable=wrong-import-position
from maxtext.utils import maxtext_utils  # pylint: disable=wrong-import-position
from maxtext.utils import model_creation_utils  # pylint: disable=wrong-import-position

# Size keys set to probe values (A, B). A key the model file sets to 0 (an absent feature,
# e.g. q_lora_rank) is left alone.
PROBES = {
    "base_emb_dim": (160, 224),
    "base_mlp_dim": (184, 248),  # its halves and quarters are no L/k
    "base_moe_mlp_dim": (208, 272),
    "base_num_query_heads": (6, 10),
    "base_num_kv_heads": (2, 5),
    "head_dim": (48, 56),
    "vocab_size": (1000, 1256),
    "num_experts": (10, 12),
    "base_num_decoder_layers": (264, 360),  # L/k for k in 2..8 collides with no other probe value
    "first_num_dense_layers": (3, 5),
    "q_lora_rank": (56, 88),
    "kv_lora_rank": (72, 104),
    "qk_nope_head_dim": (20, 36),
    "qk_rope_head_dim": (14, 22),  # not 2 * gdn_num_value_heads on both probes (in_proj_ba)
    "v_head_dim": (28, 46),
    "gdn_key_head_dim": (26, 34),
    "gdn_value_head_dim": (30, 42),
    "gdn_num_key_heads": (4, 3),
    "gdn_num_value_heads": (8, 9),
    "shared_experts": (2, 3),  # only where the model has more than one (a width multiplier)
}
WEIGHT_DTYPES = ("float32", "bfloat16")
# Head counts and the head dims they multiply in a projection's width.
HEAD_WIDTHS = (("gdn_num_key_heads", "gdn_key_head_dim"), ("gdn_num_value_heads", "gdn_value_head_dim"),
               ("base_num_query_heads", "head_dim"), ("base_num_kv_heads", "head_dim"))
# Fixed keys a size may be multiplied by (DeepSeek-V4's hyper-connection copies).
MULTIPLIERS = ("mhc_expansion_rate",)

# Keys whose value changes which parameters exist (not only their sizes): fit refuses a
# config whose value differs from the one the layout was recorded at.
STRUCTURAL = ("decoder_block", "mlp_activations", "shared_experts", "logits_via_embedding", "use_qk_norm",
              "fused_qkv", "fused_mlp", "attention_type", "interleave_moe_layer_step",
              "inhomogeneous_layer_cycle_interval", "scan_layers", "param_scan_axis", "num_experts",
              "first_num_dense_layers", "q_lora_rank", "routed_bias", "use_bias_in_projections",
              "mlp_bias", "share_kv_projections", "engram_layers", "hidden_size_per_layer_input",
              "use_sinks", "attention_sink", "mhc_expansion_rate", "use_indexer", "norm_topk_prob")


def _params(argv):
  config = pyconfig.initialize(["export_layouts.py"] + argv)
  mesh = jax.sharding.Mesh(maxtext_utils.create_device_mesh(config), config.mesh_axes)
  _, model = model_creation_utils.create_nnx_abstract_model(config, mesh)
  _, params, rest = nnx.split(model, nnx.Param, ...)
  out = {}
  for trainable, state in ((True, params), (False, rest)):
    for path, var in jax.tree_util.tree_flatten_with_path(state, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]:
      if isinstance(var, (nnx.RngState, nnx.RngKey, nnx.RngCount)) or "rngs" in str(path):
        continue
      value = var.get_value() if hasattr(var, "get_value") else var.value
      meta = var.get_metadata() if hasattr(var, "get_metadata") else {}
      axes = meta.get("sharding") or meta.get("out_sharding") or meta.get("sharding_names")
      key = "/".join(str(getattr(p, "key", p)) for p in path)
      # A variable that is not an nnx.Param (DeepSeek's loss-free routing bias) is state the
      # optimizer does not update: no gradient, no optimizer moments.
      out[key] = {"shape": [int(d) for d in value.shape], "dtype": str(value.dtype), "trainable": trainable,
                  # No sharding metadata: no axes (JAX's P(), not P(None, ...)).
                  "axes": [a if a is None else str(a) for a in axes] if axes else []}
  return config, out


def _candidates(symbols, passive=None):
  """[{value: [expression, ...]}, ...] by level: a key, a key over a small integer, two keys
  (+ - * /), then a key times a sum of two, then a sum of two products. The simplest level that explains a dimension wins."""
  levels = [{}, {}, {}, {}, {}]

  def add(level, v, e):
    if isinstance(v, int) and v > 0:
      levels[level].setdefault(v, []).append(e)

  items = list(symbols.items())  # PROBES order: ties between equal keys resolve to the first
  for k, v in items:
    add(0, v, k)
    for d in (2, 3, 4, 6, 8):
      if v % d == 0:
        add(1, v // d, f"{k}/{d}")
      add(1, v * d, f"{k}*{d}")
    for p, pv in sorted((passive or {}).items()):  # a size times a fixed key (mhc_expansion_rate)
      add(2, v * pv, f"{k}*{p}")
  for (a, va), (b, vb) in itertools.combinations(items, 2):
    add(2, va + vb, f"{a}+{b}")
    add(2, va * vb, f"{a}*{b}")
    if va > vb:
      add(2, va - vb, f"{a}-{b}")
    elif vb > va:
      add(2, vb - va, f"{b}-{a}")
    if vb and va % vb == 0:
      add(2, va // vb, f"{a}/{b}")
    if va and vb % va == 0:
      add(2, vb // va, f"{b}/{a}")
  for (a, va), (b, vb), (c, vc) in itertools.permutations(items, 3):
    if b < c:
      add(3, va * (vb + vc), f"{a}*({b}+{c})")
  # Sums of two projection widths (heads times head dim, once or twice): the gated delta net's
  # fused projections (2 * key heads * key head dim + value heads * value head dim). Only
  # such pairs: sums of any two products explain sizes by coincidence.
  terms = []
  for heads, dim in HEAD_WIDTHS:
    if heads in symbols and dim in symbols:
      for k in (1, 2):
        v = k * symbols[heads] * symbols[dim]
        terms.append((v, f"{heads}*{dim}" if k == 1 else f"2*{heads}*{dim}"))
  for (v1, e1), (v2, e2) in itertools.combinations(terms, 2):
    add(4, v1 + v2, f"{e1}+{e2}")
  return levels


def evaluate(expr, symbols, passive=None):
  """The expression's value, or None where a quotient is not whole (no dimension)."""
  v = eval(expr, {"__builtins__": {}}, {**(passive or {}), **symbols})  # pylint: disable=eval-used
  return int(v) if float(v).is_integer() else None


def _symbols(config, probed):
  """The size symbols of a resolved config: the probed keys (emb_dim etc. as MaxText derives
  them from base_*) and every other positive integer key (passive: explains constants)."""
  out = {}
  for key in probed:
    v = getattr(config, key, None)
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
      out[key] = v
  return out


def _holds_head_dim(config):
  """Qwen3.5's text decoder takes its rope from mrope_section, which must describe
  head_dim * partial_rotary_factor / 2 frequencies: head_dim cannot be probed alone."""
  return str(config.decoder_block) == "DecoderBlockType.QWEN3_5"


def layout(base, model):
  probe = {}
  for name in ("a", "b"):
    i = 0 if name == "a" else 1
    args = [base, f"model_name={model}", "override_model_config=true", "skip_jax_distributed_system=true",
            "enable_checkpointing=false", "run_name=layout", f"weight_dtype={WEIGHT_DTYPES[i]}",
            "ici_fsdp_parallelism=1", "attention=dot_product"]
    own = pyconfig.initialize(["x", base, f"model_name={model}", "skip_jax_distributed_system=true",
                               "enable_checkpointing=false", "run_name=layout", "attention=dot_product"])
    for key, values in PROBES.items():
      v = getattr(own, key, None)
      if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        continue
      if key == "shared_experts" and v < 2:
        continue
      # Qwen3.5's multimodal rope ties head_dim to mrope_section (rotary_dim / 2 frequencies):
      # left at the model's value, it is named as a key both probes hold equal.
      if key == "head_dim" and _holds_head_dim(own):
        continue
      if key == "base_num_kv_heads" and own.base_num_kv_heads == own.base_num_query_heads:
        args.append(f"{key}={PROBES['base_num_query_heads'][i]}")
        continue
      if key == "base_moe_mlp_dim" and own.num_experts > 1 and own.base_moe_mlp_dim == own.base_mlp_dim:
        args.append(f"{key}={PROBES['base_mlp_dim'][i]}")  # a fully MoE model requires them equal
        continue
      args.append(f"{key}={values[i]}")
    config, params = _params(args)
    probe[name] = (config, params, args, own)
  (ca, pa, args_a, own), (cb, pb, _, _) = probe["a"], probe["b"]
  sym_a, sym_b = _symbols(ca, PROBES), _symbols(cb, PROBES)
  passive = {k: getattr(ca, k) for k in dir(ca) if not k.startswith("_")}
  passive = {k: v for k, v in passive.items()
             if isinstance(v, int) and not isinstance(v, bool) and v > 1 and k not in sym_a and
             getattr(cb, k, None) == v}
  cands = _candidates(sym_a, {k: v for k, v in passive.items() if k in MULTIPLIERS})
  # Only where the probes left it alone (the same condition as in the probe loop above).
  held = {"head_dim"} if _holds_head_dim(own) and "head_dim" in sym_a else set()
  records, problems = [], []
  for path in sorted(pa):
    a, b = pa[path], pb.get(path)
    if b is None or len(a["shape"]) != len(b["shape"]):
      problems.append(f"{path}: not in probe B alike")
      continue
    dims = []
    for da, db in zip(a["shape"], b["shape"]):
      if da == db:
        # A dim of a key held at the model's value (Qwen3.5's head_dim): the simplest
        # expression of it alone, where one is unique.
        held_found = []
        for level in cands:
          held_found = [e for e in level.get(da, []) if any(k in e for k in held) and
                        all(k in held for k in sym_a if k in e.replace("*", " ").replace("/", " ").split())]
          if held_found:
            break
        if len(held_found) == 1:
          dims.append(held_found[0])
          continue
        names = [k for k, v in sorted(passive.items()) if v == da]
        dims.append(names[0] if len(names) == 1 else da)
        continue
      found = []
      for level in cands:
        found = [e for e in level.get(da, []) if evaluate(e, sym_b, passive) == db]
        # Keys equal on both probes (tied by the model, e.g. heads and kv heads under MLA) are
        # one value: the first in PROBES order stands for it.
        if len(found) > 1 and len({sym_a[e] for e in found if e in sym_a} | {sym_b[e] for e in found if e in sym_b}) == 2 \
            and all(e in sym_a for e in found):
          found = found[:1]
        if found:
          break
      if len(found) != 1:
        problems.append(f"{path}: dim {da}/{db} has candidates {found}")
        dims.append(None)
      else:
        dims.append(found[0])
    dtype = "weight_dtype" if a["dtype"] == WEIGHT_DTYPES[0] and b["dtype"] == WEIGHT_DTYPES[1] else a["dtype"]
    records.append({"path": path, "dims": dims, "axes": a["axes"], "dtype": dtype, "trainable": a["trainable"]})
  structural = {}
  for key in STRUCTURAL:
    v = getattr(own, key, None)
    if key in PROBES:  # a probed size: only whether the feature is there is structural
      structural[key + ">0"] = bool(v and v > 0)
    elif v is not None:
      structural[key] = v if isinstance(v, (bool, int, float, str)) else str(v)
  return {"model_name": model, "decoder_block": str(own.decoder_block), "structural": structural,
          "passive": sorted({d for r in records for d in r["dims"] if isinstance(d, str) and d in passive}),
          "params": records, "problems": problems}


def main():
  out, base, models = sys.argv[1], sys.argv[2], sys.argv[3:]
  result = {}
  if os.path.exists(out):
    with open(out, encoding="utf-8") as f:
      result = json.load(f)
  for model in models:
    try:
      result[model] = layout(base, model)
      print(f"{model}: {len(result[model]['params'])} params, problems: {result[model]['problems']}", flush=True)
    except Exception as e:  # pylint: disable=broad-except
      print(f"{model}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
  with open(out + ".tmp", "w", encoding="utf-8") as f:
    json.dump(result, f, indent=0, sort_keys=True)
    f.write("\n")
  os.replace(out + ".tmp", out)


if __name__ == "__main__":
  main()
