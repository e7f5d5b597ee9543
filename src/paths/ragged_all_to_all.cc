// jax.lax.ragged_all_to_all in the SPMD simulator (a Tracer member), in three steps:
// validation of the operands (shapes; negative offsets are found while moving), the data
// movement between the virtual devices (numeric) or the balanced-routing byte estimate
// (symbolic), and the facts it reports: the send matrix and, only when they happened,
// dropped rows, rows missing at the sender and disagreeing recv_sizes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "paths/tracer.h"
#include "util/error.h"

namespace shardtrace {
namespace {

std::string AxesText(const std::vector<std::string>& axes) {
  if (axes.size() == 1) return fmt::format("'{}'", axes[0]);
  std::vector<std::string> quoted;
  for (const std::string& a : axes) quoted.push_back(fmt::format("'{}'", a));
  return fmt::format("({})", fmt::join(quoted, ", "));
}

// The operands of one ragged_all_to_all, by role.
struct RaggedOperands {
  const Value& operand;
  const Value& output;
  const Value& input_offsets;
  const Value& send_sizes;
  const Value& output_offsets;
  const Value& recv_sizes;
};

// What the exchange did: the per-device result blocks, the bytes each device sent and
// received (to and from other devices), and what the facts report.
struct RaggedExchange {
  std::vector<Array> shards;
  std::vector<int64_t> sent, received;
  std::vector<double> matrix;      // [device, peer] rows sent (send_sizes)
  std::vector<double> dropped;     // per receiving device: rows past its buffer
  std::vector<double> unsent;      // per sender: rows past its operand
  std::vector<double> mismatched;  // per receiver: recv_sizes entries that disagree
  // Per receiver, one entry per result row: sender * operand rows + sender's row, or -1.
  std::vector<std::vector<float>> sources;
};

void Validate(const RaggedOperands& in, const std::string& name,
              const std::vector<std::string>& axes, int64_t n, const Trace& trace) {
  for (const Value* p : {&in.input_offsets, &in.send_sizes, &in.output_offsets, &in.recv_sizes})
    if (p->shape() != Shape{n})
      Fail("ragged_all_to_all of '{}' over {}: '{}' has shape {}, expected [{}] (one per peer)",
           name, AxesText(axes), trace.tensors[p->tensor].name, ShapeToString(p->shape()), n);
  const Shape& out = in.output.shape();
  const Shape& op = in.operand.shape();
  if (out.size() != op.size() || !std::equal(out.begin() + 1, out.end(), op.begin() + 1))
    Fail("ragged_all_to_all of '{}': output {} and operand {} differ past dim 0", name,
         ShapeToString(out), ShapeToString(op));
}

// Symbolic: sizes are data-dependent, so estimate balanced routing, where the real rows (the
// smaller of operand and buffer) spread evenly over the n peers and (n-1)/n leave the device.
RaggedExchange EstimateBalanced(const RaggedOperands& in, int64_t n, int64_t devices,
                                int64_t row_bytes) {
  RaggedExchange x;
  x.shards.push_back(in.output.shards[0]);
  const int64_t rows = std::min(in.operand.shape()[0], in.output.shape()[0]);
  x.sent.assign(devices, rows * row_bytes * (n - 1) / n);
  x.received = x.sent;
  return x;
}

// Numeric: moves rows operand[input_offsets[j] : +send_sizes[j]] of every device to peer j's
// output at output_offsets[j], dropping what does not fit.
RaggedExchange MoveRows(const RaggedOperands& in, const std::string& name, const Mesh& mesh,
                        const std::vector<std::string>& axes, int64_t row, int64_t row_bytes) {
  const int64_t n = mesh.Size(axes);
  const int64_t devices = mesh.num_devices();
  RaggedExchange x;
  x.sent.assign(devices, 0);
  x.received.assign(devices, 0);
  x.matrix.assign(devices * n, 0.0);
  x.dropped.assign(devices, 0.0);
  x.unsent.assign(devices, 0.0);
  x.mismatched.assign(devices, 0.0);
  for (int64_t d = 0; d < devices; ++d)
    x.shards.push_back(in.output.shards[in.output.shards.size() == 1 ? 0 : d]);
  const int64_t capacity = in.output.shape()[0];
  const int64_t operand_rows = in.operand.shape()[0];
  x.sources.assign(devices, std::vector<float>(static_cast<size_t>(capacity), -1.0f));
  for (int64_t src = 0; src < devices; ++src) {
    const std::vector<int64_t> group = mesh.Group(src, axes);
    const int64_t self = mesh.AxisIndex(src, axes);
    const std::vector<float>& data = in.operand.shards[src].values();
    for (int64_t j = 0; j < n; ++j) {
      const auto in_off = static_cast<int64_t>(in.input_offsets.shards[src].values()[j]);
      const auto count = static_cast<int64_t>(in.send_sizes.shards[src].values()[j]);
      const auto out_off = static_cast<int64_t>(in.output_offsets.shards[src].values()[j]);
      if (in_off < 0 || count < 0 || out_off < 0)
        Fail("ragged_all_to_all of '{}': device {} has a negative offset or size for peer {}", name,
             src, j);
      const int64_t dst = group[j];
      // Rows past the sender's operand were never received (an earlier buffer overflowed);
      // rows past the receiver's buffer do not fit. Both are dropped and reported.
      const int64_t available = std::clamp<int64_t>(in.operand.shape()[0] - in_off, 0, count);
      const int64_t fits = std::clamp<int64_t>(capacity - out_off, 0, available);
      std::vector<float>& target = x.shards[dst].mutable_values();
      std::copy(data.begin() + in_off * row, data.begin() + (in_off + fits) * row,
                target.begin() + out_off * row);
      for (int64_t r = 0; r < fits; ++r)
        x.sources[dst][out_off + r] = static_cast<float>(src * operand_rows + in_off + r);
      x.dropped[dst] += static_cast<double>(count - fits);
      if (count > available) x.unsent[src] += static_cast<double>(count - available);
      x.matrix[src * n + j] = static_cast<double>(count);
      if (j != self) {
        x.sent[src] += count * row_bytes;
        x.received[dst] += count * row_bytes;
      }
      // The receiver's recv_sizes entry for this sender must agree with what was sent.
      const int64_t expected = static_cast<int64_t>(in.recv_sizes.shards[dst].values()[self]);
      if (expected != count) x.mismatched[dst] += 1;
    }
  }
  return x;
}

void ReportFacts(Tracer& t, const RaggedExchange& x, const std::string& out_name, int64_t devices,
                 int64_t n, int64_t capacity) {
  t.AddFact({FactKind::kRowsSent, out_name, "", {devices, n}, x.matrix, {}});
  // Problems are facts only when they happened: a per-device count with a nonzero total.
  auto report = [&](FactKind kind, const std::vector<double>& per_device,
                    std::vector<FactInput> inputs) {
    double total = 0;
    for (const double v : per_device) total += v;
    if (total > 0) t.AddFact({kind, out_name, "", {devices}, per_device, std::move(inputs)});
  };
  report(FactKind::kRowsDropped, x.dropped, {{"buffer_rows", static_cast<double>(capacity)}});
  report(FactKind::kRowsMissing, x.unsent, {});
  report(FactKind::kRecvSizesMismatched, x.mismatched, {});
}

}  // namespace

void Tracer::RecordRaggedTranspose(const Value& operand, const Value& output,
                                   const Value& input_offsets, const Value& send_sizes,
                                   const Value& output_offsets, const Value& recv_sizes,
                                   const Value& result, std::vector<std::vector<float>> sources) {
  const Shape operand_shape = operand.shape(), buffer_shape = result.shape();
  const DType dtype = result.dtype();
  RecordRule(
      {&operand, &output, &input_offsets, &send_sizes, &output_offsets, &recv_sizes}, result,
      [operand_shape, buffer_shape, dtype,
       sources = std::move(sources)](const std::vector<Shards>& g) {
        // The exchange reversed (JAX's transpose is a ragged_all_to_all with the offsets
        // swapped): each received row's cotangent goes back to the sender's row it came from;
        // the buffer keeps the cotangent of the rows nothing was written to.
        const int64_t rows = operand_shape[0];
        const int64_t row = rows > 0 ? NumElements(operand_shape) / rows : 0;
        const size_t devices = sources.size();
        std::vector<std::vector<float>> operand_ct(
            devices, std::vector<float>(static_cast<size_t>(NumElements(operand_shape)), 0.0f));
        Shards output_ct;
        for (size_t dst = 0; dst < devices; ++dst) {
          if (!g[0][dst].numeric()) {
            output_ct.push_back(Array::Symbolic(buffer_shape, dtype));
            continue;
          }
          std::vector<float> kept = g[0][dst].values();
          for (size_t r = 0; r < sources[dst].size(); ++r) {
            if (sources[dst][r] < 0) continue;
            const auto source = static_cast<int64_t>(sources[dst][r]);
            const int64_t src = source / rows, src_row = source % rows;
            for (int64_t i = 0; i < row; ++i) {
              operand_ct[src][src_row * row + i] += kept[r * row + i];
              kept[r * row + i] = 0.0f;
            }
          }
          output_ct.push_back(Array::FromData(buffer_shape, dtype, std::move(kept)));
        }
        Shards operand_shards;
        for (std::vector<float>& ct : operand_ct) {
          for (float& value : ct) value = RoundTo(dtype, value);
          operand_shards.push_back(Array::FromData(operand_shape, dtype, std::move(ct)));
        }
        return std::vector<Shards>{std::move(operand_shards), std::move(output_ct), {}, {}, {}, {}};
      },
      "ragged_all_to_all");
}

Value Tracer::RaggedAllToAll(const Value& operand, const Value& output, const Value& input_offsets,
                             const Value& send_sizes, const Value& output_offsets,
                             const Value& recv_sizes, const std::vector<std::string>& axes,
                             const Out& out, std::vector<Array>* row_sources) {
  SHARDTRACE_CHECK(operand.per_device);
  const RaggedOperands in{operand, output, input_offsets, send_sizes, output_offsets, recv_sizes};
  const int64_t n = mesh_.Size(axes);
  const std::string& name = trace_.tensors[operand.tensor].name;
  Validate(in, name, axes, n, trace_);
  int64_t row = 1;
  for (size_t i = 1; i < operand.shape().size(); ++i) row *= operand.shape()[i];
  const int64_t row_bytes = row * ByteSize(operand.dtype());
  const int64_t devices = mesh_.num_devices();
  RaggedExchange exchange;
  std::vector<std::vector<float>> sources;  // what the transpose sends back
  if (numeric_) {
    exchange = MoveRows(in, name, mesh_, axes, row, row_bytes);
    ReportFacts(*this, exchange, out.name, devices, n, output.shape()[0]);
    if (tape_) sources = exchange.sources;
    if (row_sources) {
      row_sources->clear();
      for (std::vector<float>& rows : exchange.sources) {
        // The whole buffer MaxText allocates: rows past a routed-size buffer were not received.
        const int64_t size = RecordedRows(out.dims, static_cast<int64_t>(rows.size()));
        rows.resize(static_cast<size_t>(size), -1.0f);
        row_sources->push_back(Array::FromData({size}, DType::kInt32, std::move(rows)));
      }
    }
  } else {
    exchange = EstimateBalanced(in, n, devices, row_bytes);
  }
  Value v;
  v.per_device = true;
  v.shards = std::move(exchange.shards);
  v.tensor = Record(out, v.shards, true);
  RecordCollective(CollectiveKind::kRaggedAllToAll, {},
                   {operand.tensor, output.tensor, input_offsets.tensor, send_sizes.tensor,
                    output_offsets.tensor, recv_sizes.tensor},
                   v.tensor, axes, std::move(exchange.sent), std::move(exchange.received));
  if (tape_)
    RecordRaggedTranspose(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, v,
                          std::move(sources));
  return v;
}

}  // namespace shardtrace
