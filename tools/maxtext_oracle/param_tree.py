"""The parameter tree MaxText builds for a config: path, shape, dtype, logical axes, spec.

Builds the model abstractly (model_creation_utils.create_nnx_abstract_model: nnx.eval_shape,
nothing allocated) on fake CPU devices and prints one JSON line per parameter, so a model
family's layout can be read without a compile. Used to write and check src/model/'s decoder
layouts; the TPU fixtures (export_tpu_step.py) record the same tree as MaxText shards it.
Usage: XLA_FLAGS=--xla_force_host_platform_device_count=N param_tree.py BASE.yml key=value...
"""

import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # pylint: disable=wrong-import-position
from flax import nnx  # pylint: disable=wrong-import-position

from maxtext.layers import moe as _moe  # noqa: F401  pylint: disable=wrong-import-position,unused-import
import oracle_stubs  # pylint: disable=wrong-import-position

oracle_stubs.stub_missing_modules()

from maxtext.configs import pyconfig  # pylint: disable=wrong-import-position
from maxtext.utils import maxtext_utils  # pylint: disable=wrong-import-position
from maxtext.utils import model_creation_utils  # pylint: disable=wrong-import-position


def main(argv):
  config = pyconfig.initialize(["param_tree.py"] + argv)
  devices = maxtext_utils.create_device_mesh(config)
  mesh = jax.sharding.Mesh(devices, config.mesh_axes)
  _, model = model_creation_utils.create_nnx_abstract_model(config, mesh)
  _, state, _ = nnx.split(model, nnx.Param, ...)
  for path, var in jax.tree_util.tree_flatten_with_path(state, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]:
    value = var.get_value() if hasattr(var, "get_value") else var.value
    meta = var.get_metadata() if hasattr(var, "get_metadata") else {}
    axes = meta.get("sharding") or meta.get("out_sharding") or meta.get("sharding_names")
    sh = getattr(value, "sharding", None)
    print(json.dumps({
        "path": "/".join(str(getattr(p, "key", p)) for p in path),
        "shape": list(value.shape),
        "dtype": str(value.dtype),
        "axes": list(axes) if axes else None,
        "spec": str(getattr(sh, "spec", None)),
    }))


if __name__ == "__main__":
  main(sys.argv[1:])
