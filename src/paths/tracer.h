// Tracer: the recording engine every MaxText path runs on. Path code (routing.cc,
// dense_matmul.cc, sparse_matmul.cc, ...) calls Tracer methods instead of jnp: each call
// checks shapes, computes the result (numeric mode) or only its shape (symbolic mode), and
// appends the op and its output tensor to the Trace. The same path code therefore yields a
// full-size symbolic trace or a small numeric one.
//
// SPMD simulation: outside shard_map a Value holds one global array (GSPMD semantics:
// sharding constraints change placement, never values). ShardMapIn slices global arrays
// into per-device blocks; inside, a Value holds one array per virtual device (numeric) or
// one representative block (symbolic), ops run per device, and the collective methods move
// data between devices along named mesh axes. ShardMapOut reassembles global arrays.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/trace.h"
#include "numeric/array.h"
#include "numeric/tape.h"
#include "shard/axis_rules.h"
#include "shard/mesh.h"

namespace shardtrace {

class ThreadPool;
class Progress;

// A traced value: the id of the tensor record that last defined it, and its data.
struct Value {
  int tensor = -1;
  std::vector<Array> shards;  // 1 outside shard_map (or symbolic); one per device inside
  bool per_device = false;    // inside shard_map

  const Array& array() const { return shards.front(); }  // global or device 0
  const Shape& shape() const { return shards.front().shape; }
  DType dtype() const { return shards.front().dtype; }
  bool numeric() const { return shards.front().numeric(); }
  int64_t dim(int i) const { return shape()[i < 0 ? shape().size() + i : i]; }
};

// Drops `v`'s data once the path reads it no more; its record stays in the trace (shape,
// sharding, summary). Arrays share buffers, so a buffer is freed when its last reader lets go:
// the numeric engine then holds the activations later ops need, not every one of the block.
inline void ReleaseData(Value& v) {
  for (Array& shard : v.shards) shard = Array::Symbolic(shard.shape, shard.dtype);
}

// How to record an op's output tensor.
struct Out {
  std::string name;
  std::string dims;  // letters, see trace.h; must match the rank
  TensorKind kind = TensorKind::kAct;
};

// An op as recorded: kind plus optional einsum equation and attributes.
struct OpDesc {
  using Attrs = std::vector<std::pair<std::string, std::string>>;
  // Implicit on purpose: most ops are recorded by their kind alone (t.Apply(OpKind::kAdd, ...)).
  // NOLINTNEXTLINE(google-explicit-constructor)
  OpDesc(OpKind kind, std::string equation = "", Attrs attrs = {})
      : kind(kind), equation(std::move(equation)), attrs(std::move(attrs)) {}
  // An elementwise activation op named `function` ("silu").
  static OpDesc Activation(std::string function) {
    OpDesc op(OpKind::kActivation);
    op.function = std::move(function);
    return op;
  }

  OpKind kind;
  std::string equation;
  Attrs attrs;
  std::string function;                // kActivation only
  std::optional<ParsedEinsum> einsum;  // kEinsum: the parsed equation
};

class Tracer {
 public:
  Tracer(const Mesh& mesh, const AxisRules& rules, bool numeric);

  bool numeric() const { return numeric_; }
  // Numeric runs spread simulated devices (and one device's experts) over `pool`; null, the
  // default, runs serially. Results are bit-identical either way.
  void set_pool(ThreadPool* pool) { pool_ = pool; }
  ThreadPool* pool() const { return pool_; }
  // Whether numeric tensor records carry a values summary (min/max/mean); only the
  // outputs that print it (trace table/json, generated pages) need it, so `check` and the
  // equivalence tests run without. Default: on.
  void set_summaries(bool on) { summaries_ = on; }
  // Numeric runs allocate a ragged receive buffer (dims 'U...') with only the rows devices
  // actually receive; its records keep MaxText's get_ragged_buffer_size rows, so traces and
  // pages show the shape MaxText allocates while memory follows the routed counts.
  void set_ragged_buffer_rows(int64_t rows) { ragged_buffer_rows_ = rows; }
  // The row count a record (and an op attribute) shows for an array of `rows` rows whose
  // dims are `dims`: MaxText's buffer rows for a numeric ragged buffer, else `rows`.
  int64_t RecordedRows(const std::string& dims, int64_t rows) const {
    const bool ragged = numeric_ && ragged_buffer_rows_ > 0 && !dims.empty() && dims[0] == 'U';
    return ragged ? ragged_buffer_rows_ : rows;
  }
  // Numeric runs that take gradients record every op that reads a tracked value (one that
  // depends on a parameter or the input) onto `tape` with its backward rule
  // (paths/tracer_vjp.cc); null, the default, records nothing and keeps nothing alive.
  void set_tape(Tape* tape) { tape_ = tape; }
  Tape* tape() const { return tape_; }
  // Shows the op and device being computed (numeric runs); null for none.
  void set_progress(Progress* progress) { progress_ = progress; }
  const Mesh& mesh() const { return mesh_; }
  const AxisRules& rules() const { return rules_; }

  // RAII scope ("RoutedMoE", "dense_matmul", "dispatch") and condition ("mlp_bias").
  class ScopeGuard {
   public:
    ScopeGuard(std::vector<std::string>* stack, std::string name) : stack_(stack) {
      stack_->push_back(std::move(name));
    }
    ~ScopeGuard() { stack_->pop_back(); }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;

   private:
    std::vector<std::string>* stack_;
  };
  [[nodiscard]] ScopeGuard Scope(std::string name) { return ScopeGuard(&scopes_, std::move(name)); }
  // Iteration `index` of `count` of a loop over `loop`: the scope "<loop>_<index>", recorded
  // as a Trace::LoopIteration so renderers know the iterations repeat one body.
  [[nodiscard]] ScopeGuard Iteration(const std::string& loop, int64_t index, int64_t count);
  [[nodiscard]] ScopeGuard Condition(std::string condition) {
    return ScopeGuard(&conditions_, std::move(condition));
  }
  // Sets the reader's note of the tensor `v` holds (TensorRecord::note): a fact about the
  // value, such as who reads it, that is not a condition under which it is computed.
  void Annotate(const Value& v, std::string note) {
    trace_.tensors[v.tensor].note = std::move(note);
  }
  // Brackets the body of a shard_map: every tensor recorded in between is a per-device
  // block, including constants the body creates.
  void EnterShardMapBody() { ++shard_map_depth_; }
  void ExitShardMapBody() { --shard_map_depth_; }
  // The file stem MaxText's debug dump uses for constraints from here on: "moe", "linears".
  void SetDumpFile(std::string stem) { dump_file_ = std::move(stem); }

  // A parameter with its kernel axes (resolved to a PartitionSpec). `param` is the
  // golden-format name of the array it holds ("wi_0", "shared_wo"), listed in
  // Trace::parameters; gradients are taken with respect to it.
  Value Weight(const Out& out, Array value, const LogicalAxes& kernel_axes,
               const std::string& param);
  // An input activation (no constraint).
  Value Input(const Out& out, Array value);

  // Runs `fn` on every device's shard of the inputs (inputs with one shard are broadcast
  // to every device) and records one op with one output per returned array.
  using Fn = std::function<std::vector<Array>(const std::vector<const Array*>&)>;
  // The vector-Jacobian product of one device's op, for the tape: the op's input arrays,
  // its output arrays and the cotangents of its outputs (zeros where none reached a floating
  // output; a non-numeric Array for an integer or bool output) in; the cotangent of each
  // input out (a non-numeric Array where none flows). It runs after the forward pass, so it
  // must capture by value. An op given none that a cotangent reaches is an internal error.
  using Args = std::vector<const Array*>;
  using Vjp = std::function<std::vector<Array>(const Args& inputs, const Args& outputs,
                                               const Args& cotangents)>;
  std::vector<Value> ApplyN(const OpDesc& op, const std::vector<const Value*>& inputs,
                            const std::vector<Out>& outs, const Fn& fn, Vjp vjp = nullptr);
  Value Apply(const OpDesc& op, const std::vector<const Value*>& inputs, const Out& out,
              const std::function<Array(const std::vector<const Array*>&)>& fn, Vjp vjp = nullptr);
  // The VJP of an op whose output is its first input's value (markers, constraints).
  static Vjp IdentityVjp();

  // _maybe_shard_with_logical(x, axes): resolves with the rules, records the constrained
  // tensor under `name` and a debug-dump entry "<file>/<name>" (MaxText's naming).
  // `dump_variable` is the local variable MaxText's frame inspection finds when it differs
  // from `name` (e.g. "kernel" inside maybe_all_gather_kernel_weight_in_expert_parallelism);
  // an empty string means none does (a temporary) and the dump says "Unknown".
  Value ShardWithLogical(const Value& x, const std::string& name, const std::string& dims,
                         const LogicalAxes& axes,
                         const std::optional<std::string>& dump_variable = std::nullopt);
  // _maybe_shard_with_pspec(x, spec): dump entry logical "Unknown"; `dump_variable` as above.
  Value ShardWithPspec(const Value& x, const std::string& name, const std::string& dims,
                       const PartitionSpec& spec,
                       const std::optional<std::string>& dump_variable = std::nullopt);
  // A fixed point XLA may not fuse across (jax.lax.optimization_barrier).
  Value OptimizationBarrier(const Value& x);

  // shard_map boundary. In: slices each global value by its spec (dims must divide).
  Value ShardMapIn(const Value& x, const std::string& name, const std::string& dims,
                   const PartitionSpec& spec);
  // Out: reassembles per-device blocks into the global value of `spec`; axes not in the
  // spec are replicated, and device 0 of each replica group provides the block (as
  // check_vma=False lets MaxText declare per-shard values replicated).
  Value ShardMapOut(const Value& x, const std::string& name, const std::string& dims,
                    const PartitionSpec& spec);

  // The global array a per-device value amounts to under `spec` (no record): how
  // captures for golden checks are read out of shard_map. Symbolic: shape only.
  Array Assemble(const Value& x, const PartitionSpec& spec) const;

  // Collectives over mesh `axes` inside shard_map (paths/collectives.cc).
  Value AxisIndex(const std::vector<std::string>& axes, const Out& out);
  Value AllGather(const Value& x, const std::vector<std::string>& axes, int axis, bool tiled,
                  const Out& out);
  Value Psum(const Value& x, const std::vector<std::string>& axes, const Out& out);
  Value PsumScatter(const Value& x, const std::vector<std::string>& axes, int scatter_dimension,
                    bool tiled, const Out& out);
  // jax.lax.ragged_all_to_all: rows operand[input_offsets[j] : +send_sizes[j]] go to peer
  // j's output at output_offsets[j]; recv_sizes[j] is what this device receives from j.
  // Rows that would land past the receiver's buffer are dropped and reported as a fact.
  // `row_sources` (numeric runs, may be null) receives, per device, what each row of its
  // result holds: sender device * operand rows + the sender's row, or -1 for a row nothing
  // was written to, so the pages can show which rows travelled where.
  Value RaggedAllToAll(const Value& operand, const Value& output, const Value& input_offsets,
                       const Value& send_sizes, const Value& output_offsets,
                       const Value& recv_sizes, const std::vector<std::string>& axes,
                       const Out& out, std::vector<Array>* row_sources = nullptr);

  void AddFact(Fact fact);
  void Note(std::string note) { trace_.notes.push_back(std::move(note)); }
  void Warn(std::string warning) { trace_.warnings.push_back(std::move(warning)); }
  std::string CurrentScope() const;

  Trace& trace() { return trace_; }
  Trace Finish() &&;

 private:
  // Appends a tensor record for `shards` (shape from shard 0) and returns its id.
  int Record(const Out& out, const std::vector<Array>& shards, bool per_device);
  int RecordOp(OpDesc op, std::vector<int> inputs, std::vector<int> outputs);
  // Records a collective op over `axes` with the bytes each device sends and receives.
  int RecordCollective(CollectiveKind kind, std::vector<std::pair<std::string, std::string>> attrs,
                       const std::vector<int>& inputs, int output,
                       const std::vector<std::string>& axes, std::vector<int64_t> sent,
                       std::vector<int64_t> received);
  // Records the op that made `outputs` from `inputs` on the tape (when one is set and an
  // input is tracked), running `vjp` per device (paths/tracer_vjp.cc).
  void RecordVjp(const OpDesc& op, const std::vector<const Value*>& inputs,
                 const std::vector<const Value*>& outputs, Vjp vjp);
  // shard_map's transpose as JAX defines it (check_vma=False): the cotangent of an input is
  // psummed over the mesh axes its spec leaves out, and an output's is divided by the
  // devices its spec replicates it over.
  void RecordShardMapInVjp(const Value& x, const Value& v, const PartitionSpec& spec);
  void RecordShardMapOutVjp(const Value& x, const Value& v, const PartitionSpec& spec);
  // ragged_all_to_all's transpose: `sources` says, per receiving device and buffer row,
  // which sender's row it holds (sender * operand rows + row, or -1).
  void RecordRaggedTranspose(const Value& operand, const Value& output, const Value& input_offsets,
                             const Value& send_sizes, const Value& output_offsets,
                             const Value& recv_sizes, const Value& result,
                             std::vector<std::vector<float>> sources);
  // Records a rule over whole per-device values (collectives, shard_map boundaries).
  void RecordRule(const std::vector<const Value*>& inputs, const Value& output, Tape::Rule rule,
                  const std::string& what);
  void Dump(const std::string& name, const Array& value, const std::string& logical,
            const PartitionSpec& spec);
  Value Constrain(const Value& x, const std::string& name, const std::string& dims,
                  const std::optional<LogicalAxes>& axes, const PartitionSpec& spec,
                  Constraint constraint);
  int64_t num_shards() const;

  const Mesh& mesh_;
  const AxisRules& rules_;
  const bool numeric_;
  ThreadPool* pool_ = nullptr;
  bool summaries_ = true;
  int64_t ragged_buffer_rows_ = 0;  // 0: records keep the arrays' own row count
  Progress* progress_ = nullptr;
  Tape* tape_ = nullptr;
  std::vector<std::string> scopes_;
  std::vector<std::string> conditions_;
  std::string dump_file_ = "moe";
  int shard_map_depth_ = 0;
  std::map<std::string, int> occurrences_;     // "<scope>/<name>" -> tensors recorded so far
  std::map<std::string, int> op_occurrences_;  // the same for ops' stable ids
  Trace trace_;
};

// Summary statistics over every shard (numeric mode).
NumericSummary Summarize(const std::vector<Array>& shards);

}  // namespace shardtrace
