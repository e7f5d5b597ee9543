"""NumPy+OpenBLAS peer of `shardtrace check` for the benchmarks (bench/run.sh).

  numpy_peer.py generate CASE_DIR --tokens T --emb M --hidden H --experts E --top-k K
      writes CASE_DIR/config.yml and CASE_DIR/tensors.npz (np.savez, float32): a
      Mixtral-style sparse (dropless, EP=1) golden case whose expected arrays this
      script computes; never committed.
  numpy_peer.py check CASE_DIR
      does the job `shardtrace check CASE_DIR` does on such a case: reads tensors.npz,
      runs the sparse path (gate logits, top-k, softmax over the chosen logits, sort by
      expert, one GEMM pair per expert, silu(x@wi_0)*(x@wi_1)@wo, unsort, weighted sum)
      and compares every expected array with shardtrace's rule (|a-b| <= atol + rtol*|b|
      for floats, ints exactly). Exit 0 when all pass.

Pure NumPy (its bundled OpenBLAS does the GEMMs); runs in the venv bench/run.sh makes.
"""
import argparse
import os
import sys

import numpy as np


def forward(x, gate_kernel, wi_0, wi_1, wo, k):
    b, s, m = x.shape
    e = gate_kernel.shape[1]
    tokens = x.reshape(-1, m)
    logits = tokens @ gate_kernel
    # jax.lax.top_k: largest first, the lower index first on ties.
    indices = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    chosen = np.take_along_axis(logits, indices, 1)
    weights = np.exp(chosen - chosen.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    flat = indices.reshape(-1)
    order = np.argsort(flat, kind="stable")
    rows = tokens[order // k]
    sizes = np.bincount(flat, minlength=e)
    out_rows = np.empty((rows.shape[0], m), np.float32)
    start = 0
    for expert in range(e):
        part = rows[start:start + sizes[expert]]
        h0 = part @ wi_0[expert]
        h1 = part @ wi_1[expert]
        out_rows[start:start + sizes[expert]] = (h0 / (1 + np.exp(-h0)) * h1) @ wo[expert]
        start += sizes[expert]
    unsorted = np.empty_like(out_rows)
    unsorted[order] = out_rows
    output = np.einsum("tkm,tk->tm", unsorted.reshape(-1, k, m), weights)
    return {
        "output": output.reshape(b, s, m).astype(np.float32),
        "gate_logits": logits.reshape(b, s, e).astype(np.float32),
        "top_k_weights": weights.reshape(b, s, k).astype(np.float32),
        "top_k_indices": indices.reshape(b, s, k).astype(np.int32),
        "group_sizes": sizes.astype(np.int32),
    }


def generate(args):
    os.makedirs(args.case, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    t, m, h, e, k = args.tokens, args.emb, args.hidden, args.experts, args.top_k

    def normal(shape, scale):
        a = rng.standard_normal(shape, dtype=np.float32)
        a *= np.float32(scale)
        return a

    arrays = {
        "inputs": normal((1, t, m), 1.0),
        "gate_kernel": normal((m, e), m ** -0.5),
        "wi_0": normal((e, m, h), m ** -0.5),
        "wi_1": normal((e, m, h), m ** -0.5),
        "wo": normal((e, h, m), h ** -0.5),
    }
    arrays.update(forward(arrays["inputs"], arrays["gate_kernel"], arrays["wi_0"],
                          arrays["wi_1"], arrays["wo"], k))
    np.savez(os.path.join(args.case, "tensors.npz"), **arrays)
    with open(os.path.join(args.case, "config.yml"), "w") as f:
        f.write(f"""# Benchmark case (bench/numpy_peer.py generate): sparse dropless EP=1, Mixtral-style
# routing; B=1, S={t}, M={m}, H={h}, E={e}, K={k}; generated, never committed.
dtype: "float32"
weight_dtype: "float32"
matmul_precision: "highest"
base_emb_dim: {m}
base_mlp_dim: {h}
base_moe_mlp_dim: {h}
num_experts: {e}
num_experts_per_tok: {k}
per_device_batch_size: 1.0
max_target_length: {t}
sparse_matmul: true
megablox: true
decoder_block: "mixtral"
mlp_activations: ["silu", "linear"]
load_balance_loss_weight: 0.0
""")


def check(args):
    with np.load(os.path.join(args.case, "tensors.npz")) as npz:
        arrays = {name: npz[name] for name in npz.files}
    k = arrays["top_k_indices"].shape[-1]
    actual = forward(arrays["inputs"], arrays["gate_kernel"], arrays["wi_0"], arrays["wi_1"],
                     arrays["wo"], k)
    failed = 0
    for name, value in actual.items():
        expected = arrays[name]
        if np.issubdtype(expected.dtype, np.integer):
            ok = np.array_equal(value, expected)
        else:
            ok = bool(np.all(np.abs(value.astype(np.float64) - expected) <=
                             args.atol + args.rtol * np.abs(expected.astype(np.float64))))
        print(f"{name}: {'PASS' if ok else 'FAIL'}")
        failed += not ok
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate")
    g.add_argument("case")
    g.add_argument("--tokens", type=int, default=4096)
    g.add_argument("--emb", type=int, default=1024)
    g.add_argument("--hidden", type=int, default=2048)
    g.add_argument("--experts", type=int, default=16)
    g.add_argument("--top-k", type=int, default=2)
    g.add_argument("--seed", type=int, default=13)
    c = sub.add_parser("check")
    c.add_argument("case")
    c.add_argument("--atol", type=float, default=1e-5)
    c.add_argument("--rtol", type=float, default=1e-4)
    args = parser.parse_args()
    if args.command == "generate":
        generate(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
