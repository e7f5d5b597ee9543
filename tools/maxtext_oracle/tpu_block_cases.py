"""The block step cases compiled by the TPU compiler (export_tpu_block.py): cases.py's blocks at
TPU-realistic dims (multiples of 128) on the devices of a TPU topology with the case's device
count (v5p-8: 4 devices, v5p-16: 8). Activations bfloat16 unless a case says float32; weights
float32 (MaxText's default) unless a case says bfloat16. Every case is a training step
(value_and_grad) and its forward alone; remat as MaxText wraps an unscanned decoder layer.
"""

import cases as case_matrix

TOPOLOGY = {4: "v5p-8", 8: "v5p-16"}

TPU_DIMS = {
    "dtype": "bfloat16",
    "matmul_precision": "default",
    "base_emb_dim": 512,
    "base_mlp_dim": 1024,
    "base_moe_mlp_dim": 1024,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "max_target_length": 512,
    "per_device_batch_size": 2,
}


def tpu(name, devices, what, block="moe", mesh=None, remat=None, **overrides):
  """A TPU block step case: cases.case's SMALL keys, then TPU_DIMS, then the case's own."""
  over = dict(TPU_DIMS, **overrides)
  if block == "mlp":
    over.update(num_experts=1, num_experts_per_tok=1, decoder_block="llama2")
  c = case_matrix.case(f"tpu_{name}", devices, what, block=block, mesh=mesh, **over)
  if remat is not None:
    c["overrides"].update(remat_policy=remat, scan_layers=False)
  c.update(forward=None, remat=remat is not None, topology=TOPOLOGY[devices])
  return c


SPARSE = {"sparse_matmul": True}
DENSE = {"sparse_matmul": False}
BF16W = {"weight_dtype": "bfloat16"}
F32 = {"dtype": "float32"}

TPU_BLOCK_CASES = [
    # --- v5p-8, 4 devices.
    tpu("mlp_fsdp4", 4, "dense MlpBlock, fsdp=4", block="mlp"),
    tpu("mlp_fsdp4_remat_full", 4, "dense MlpBlock, fsdp=4, remat_policy=full", block="mlp", remat="full"),
    tpu("mlp_fsdp2_tp2", 4, "dense MlpBlock, fsdp=2 x tensor=2", block="mlp", mesh={"fsdp": 2, "tensor": 2}),
    tpu("sparse_fsdp4", 4, "sparse_matmul (ragged_dot), fsdp=4", **SPARSE),
    tpu("sparse_fsdp4_bf16w", 4, "sparse_matmul, fsdp=4, bfloat16 weights", **SPARSE, **BF16W),
    tpu("sparse_fsdp4_f32", 4, "sparse_matmul, fsdp=4, float32 activations", **SPARSE, **F32),
    tpu("sparse_fsdp4_remat_full", 4, "sparse_matmul, fsdp=4, remat_policy=full", remat="full", **SPARSE),
    tpu("sparse_fsdp4_remat_minimal", 4, "sparse_matmul, fsdp=4, remat_policy=minimal", remat="minimal", **SPARSE),
    tpu("sparse_fsdp2_tp2", 4, "sparse_matmul, fsdp=2 x tensor=2", mesh={"fsdp": 2, "tensor": 2}, **SPARSE),
    tpu("sparse_fsdp2_ep2", 4, "sparse_matmul, fsdp=2 x expert=2: ragged all-to-all", mesh={"fsdp": 2, "expert": 2},
        **SPARSE),
    tpu("sparse_fsdp2_ep2_remat_full", 4, "sparse_matmul, fsdp=2 x expert=2, remat_policy=full",
        mesh={"fsdp": 2, "expert": 2}, remat="full", **SPARSE),
    tpu("sparse_ep4", 4, "sparse_matmul, expert=4, 16 experts", mesh={"fsdp": 1, "expert": 4}, num_experts=16,
        **SPARSE),
    tpu("sparse_ep4_bf16w", 4, "sparse_matmul, expert=4, 16 experts, bfloat16 weights",
        mesh={"fsdp": 1, "expert": 4}, num_experts=16, **SPARSE, **BF16W),
    tpu("dense_fsdp4", 4, "dense_matmul dropless, fsdp=4", **DENSE),
    tpu("dense_fsdp4_bf16w", 4, "dense_matmul dropless, fsdp=4, bfloat16 weights", **DENSE, **BF16W),
    tpu("dense_fsdp4_remat_full", 4, "dense_matmul dropless, fsdp=4, remat_policy=full", remat="full", **DENSE),
    tpu("dense_fsdp4_remat_minimal", 4, "dense_matmul dropless, fsdp=4, remat_policy=minimal", remat="minimal",
        **DENSE),
    tpu("dense_drop_fsdp4", 4, "dense_matmul token dropping (capacity_factor=1), fsdp=4", capacity_factor=1.0,
        **DENSE),
    tpu("dense_fsdp2_tp2", 4, "dense_matmul dropless, fsdp=2 x tensor=2", mesh={"fsdp": 2, "tensor": 2}, **DENSE),
    tpu("dense_fsdp2_ep2", 4, "dense_matmul dropless, fsdp=2 x expert=2", mesh={"fsdp": 2, "expert": 2}, **DENSE),
    tpu("dense_ep4", 4, "dense_matmul dropless, expert=4, 16 experts", mesh={"fsdp": 1, "expert": 4},
        num_experts=16, **DENSE),
    # --- v5p-16, 8 devices.
    tpu("mlp_fsdp8", 8, "dense MlpBlock, fsdp=8", block="mlp"),
    tpu("sparse_fsdp8", 8, "sparse_matmul, fsdp=8", **SPARSE),
    tpu("sparse_fsdp4_tp2", 8, "sparse_matmul, fsdp=4 x tensor=2", mesh={"fsdp": 4, "tensor": 2}, **SPARSE),
    tpu("sparse_fsdp2_ep4", 8, "sparse_matmul, fsdp=2 x expert=4, 16 experts", mesh={"fsdp": 2, "expert": 4},
        num_experts=16, **SPARSE),
    tpu("dense_fsdp2_ep4", 8, "dense_matmul dropless, fsdp=2 x expert=4, 16 experts", mesh={"fsdp": 2, "expert": 4},
        num_experts=16, **DENSE),
]

if __name__ == "__main__":
  for c in TPU_BLOCK_CASES:
    print(c["devices"], c["name"])
