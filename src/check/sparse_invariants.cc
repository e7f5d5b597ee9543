// The invariants of sparse_matmul: the ragged all-to-all, per-device sorts, decode, tensor
// parallelism, the ring.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

#include "check/invariant_support.h"
#include "ir/fact_text.h"

namespace shardtrace::invariant_internal {

// ---------------------------------------------------------------------------------------
// ragged_all_to_all: every row one device sends is received once, and comes back. The
// send matrices are [device, peer]; with several expert-parallel groups (fsdp x expert)
// peer p of device d is a different device per group, so the per-device receive checks
// that need that mapping run only when the whole mesh is one group (a square matrix).

void AllToAllInvariants(const Trace& trace, Builder& b) {
  std::vector<const Fact*> forward;
  for (const Fact& f : trace.facts)
    if (f.kind == FactKind::kRowsSent && f.subject == "x" && f.shape.size() == 2)
      forward.push_back(&f);
  if (forward.empty()) return;
  const Fact& sent = *forward.front();
  const auto x = Matrix(sent);
  const size_t devices = x.size(), peers = x.front().size();
  const double total = Sum(sent.values);
  if (forward.size() > 1) {
    const bool same = std::all_of(forward.begin(), forward.end(),
                                  [&](const Fact* f) { return f->values == sent.values; });
    b.Checked(InvariantKind::kChunksRouteAlike, "",
              "every embedding chunk's rows_sent matrix is the same",
              "chunks split M, not tokens: each chunk routes the same rows", same,
              fmt::format("{} chunks", forward.size()));
  }
  const Fact* fill = trace.FindFact(FactKind::kRaggedBufferFill);
  if (fill && fill->values.size() == devices)
    b.Checked(InvariantKind::kSentEqualsBufferFill, Ref(trace, {S::kRaggedAllToAll}),
              "sum(rows_sent) == sum(ragged buffer fill)",
              "ragged_all_to_all writes every row a peer sends into the receiver's buffer, once",
              Sum(fill->values) == total,
              fmt::format("{} == {}", FactValueText(total), FactValueText(Sum(fill->values))));
  if (fill && fill->values.size() == devices && devices == peers) {
    std::vector<double> received(devices, 0.0);
    for (size_t d = 0; d < devices; ++d)
      for (size_t p = 0; p < peers; ++p) received[p] += x[d][p];
    b.Checked(InvariantKind::kBufferFillIsReceived, Ref(trace, {S::kRaggedAllToAll}),
              "ragged buffer fill[d] == sum over peers p of rows_sent[p, d]",
              "one expert-parallel group: peer p is device p", fill->values == received,
              fmt::format("{} == {}", Vector(fill->values), Vector(received)));
  }
  const Fact* rows = trace.FindFact(FactKind::kRaggedBufferRows);
  if (fill && rows && !rows->values.empty()) {
    const double most = *std::max_element(fill->values.begin(), fill->values.end());
    b.Checked(InvariantKind::kBufferFillWithinRows,
              Ref(trace, {S::kGetRaggedBufferSize, S::kBufferSizeCall}),
              "rows received by any device <= ragged buffer rows",
              "rows beyond the buffer would be lost (get_ragged_buffer_size)",
              most <= rows->values[0],
              fmt::format("max {} <= {}", FactValueText(most), FactValueText(rows->values[0])));
  }
  const Fact* groups = trace.FindFact(FactKind::kGroupSizesPerDevice);
  if (fill && groups && groups->shape.size() == 2 &&
      static_cast<size_t>(groups->shape[0]) == fill->values.size()) {
    std::vector<double> per_device;
    for (const auto& row : Matrix(*groups)) per_device.push_back(Sum(row));
    b.Checked(InvariantKind::kGroupSizesSumToFill, Ref(trace, {S::kLocalPermuteCall}),
              "sum over local experts of group_sizes[d, :] == ragged buffer fill[d]",
              "every received row belongs to exactly one local expert's gmm group",
              per_device == fill->values,
              fmt::format("{} == {}", Vector(per_device), Vector(fill->values)));
  }
  const Fact* back = trace.FindFact(FactKind::kRowsSent, "intermediate_output");
  if (!back) return;
  b.Checked(InvariantKind::kSentBackEqualsSent, Ref(trace, {S::kReturnAllToAll}),
            "sum(rows_sent_back) == sum(rows_sent)",
            "the return all-to-all sends every expert output row home", Sum(back->values) == total,
            fmt::format("{} == {}", FactValueText(Sum(back->values)), FactValueText(total)));
  const auto y = Matrix(*back);
  if (fill && y.size() == devices) {
    std::vector<double> returned;
    for (const auto& row : y) returned.push_back(Sum(row));
    b.Checked(InvariantKind::kSentBackIsFill, Ref(trace, {S::kReturnAllToAll}),
              "sum over peers of rows_sent_back[d, :] == ragged buffer fill[d]",
              "a device returns exactly the rows it received", returned == fill->values,
              fmt::format("{} == {}", Vector(returned), Vector(fill->values)));
  }
  if (devices == peers && y.size() == devices) {
    bool transposed = true;
    for (size_t d = 0; d < devices; ++d)
      for (size_t p = 0; p < peers; ++p) transposed &= y[d].size() == peers && y[d][p] == x[p][d];
    b.Checked(InvariantKind::kSentBackIsTranspose, Ref(trace, {S::kReturnAllToAll}),
              "rows_sent_back[d, p] == rows_sent[p, d]",
              "each row goes back to the device its token came from", transposed,
              fmt::format("{} x {} send matrices", devices, peers));
  }
}

// ---------------------------------------------------------------------------------------
// sparse_matmul inside shard_map: each device's sort of its (token, choice) rows.

bool HasWrittenCollective(const Trace& trace, CollectiveKind kind) {
  return std::any_of(trace.ops.begin(), trace.ops.end(), [&](const OpRecord& op) {
    return op.collective && op.collective->kind == kind;
  });
}

void SparseSortInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const bool ring = Captured(captures, Capture::kRingSortedExpertsPerDevice) != nullptr;
  const Array* sorted = Captured(
      captures, ring ? Capture::kRingSortedExpertsPerDevice : Capture::kSortedExpertsPerDevice);
  const Array* order = Captured(captures, ring ? Capture::kRingSortedSelectedExpertsPerDevice
                                               : Capture::kSortedSelectedExpertsPerDevice);
  if (!sorted || !order || sorted->rank() != 2 || order->shape != sorted->shape) {
    // A symbolic sparse trace still says which checks its path has.
    if (!trace.numeric && FindTensor(trace, "sorted_selected_experts"))
      b.Unchecked(InvariantKind::kUnsortInvertsSort,
                  Ref(trace, {S::kArgsortExperts, S::kUnsortArgsort}),
                  "unsort(sort(rows)) == rows: argsort(sorted_selected_experts) inverts the sort "
                  "on every device",
                  "sorted_selected_experts is a permutation of the device's R rows",
                  "no per-device values (symbolic trace)");
    return;
  }
  const Array* choices = ring ? nullptr : Captured(captures, Capture::kTopKIndicesPerDevice);
  const int64_t devices = sorted->shape[0], rows = sorted->shape[1];
  int64_t unsorted = 0, mismatched = 0, not_inverted = 0;
  for (int64_t d = 0; d < devices; ++d) {
    const std::vector<float> experts = Row(*sorted, d), perm = Row(*order, d);
    unsorted += !std::is_sorted(experts.begin(), experts.end());
    // unsort(sort(rows)) with unsort = argsort(sorted_selected_experts).
    std::vector<int64_t> inverse(static_cast<size_t>(rows), -1);
    bool permutation = true;
    for (int64_t r = 0; r < rows; ++r) {
      const auto p = static_cast<int64_t>(perm[static_cast<size_t>(r)]);
      if (p < 0 || p >= rows || inverse[static_cast<size_t>(p)] >= 0) {
        permutation = false;
        break;
      }
      inverse[static_cast<size_t>(p)] = r;
    }
    bool identity = permutation;
    for (int64_t r = 0; identity && r < rows; ++r)
      identity =
          static_cast<int64_t>(perm[static_cast<size_t>(inverse[static_cast<size_t>(r)])]) == r;
    not_inverted += !identity;
    if (choices && choices->size() == devices * rows && permutation) {
      const std::vector<float> flat = Row(*choices, d);
      for (int64_t r = 0; r < rows; ++r)
        mismatched += flat[static_cast<size_t>(perm[static_cast<size_t>(r)])] !=
                      experts[static_cast<size_t>(r)];
    }
  }
  b.Checked(InvariantKind::kSortedExpertsNonDecreasing, Ref(trace, {S::kPermuteSort}),
            ring ? "on every device, the rolled expert ids of the sorted rows are non-decreasing"
            : choices ? "on every device, sorted_experts is non-decreasing and sorted row r is a "
                        "choice of expert sorted_experts[r]"
                      : "on every device, sorted_experts is non-decreasing",
            "argsort of the (token, choice) rows by expert groups each expert's rows together, "
            "as the gmm's group_sizes expect",
            unsorted == 0 && mismatched == 0,
            choices ? fmt::format("{} of {} devices unsorted; {} of {} rows hold another "
                                  "expert's choice",
                                  unsorted, devices, mismatched, devices * rows)
                    : fmt::format("{} of {} devices unsorted", unsorted, devices));
  b.Checked(InvariantKind::kUnsortInvertsSort, Ref(trace, {S::kArgsortExperts, S::kUnsortArgsort}),
            "unsort(sort(rows)) == rows: argsort(sorted_selected_experts) inverts the sort on "
            "every device",
            "sorted_selected_experts is a permutation of the device's R rows, so its argsort "
            "puts every expert output back at its (token, choice) row",
            not_inverted == 0,
            fmt::format("{} of {} devices (R = {} rows each) fail", not_inverted, devices, rows));
  if (ring || HasWrittenCollective(trace, CollectiveKind::kRaggedAllToAll)) return;
  // Expert parallelism 1: each device keeps its own rows.
  const Fact* groups = trace.FindFact(FactKind::kGroupSizesPerDevice);
  if (groups && groups->shape.size() == 2 && groups->shape[0] == devices) {
    const int64_t experts = groups->shape[1];
    int64_t bad = 0;
    for (int64_t d = 0; d < devices; ++d) {
      const std::vector<float> row = Row(*sorted, d);
      double total = 0;
      for (int64_t e = 0; e < experts; ++e) {
        const double size = groups->values[static_cast<size_t>(d * experts + e)];
        total += size;
        bad +=
            size != static_cast<double>(std::count(row.begin(), row.end(), static_cast<float>(e)));
      }
      bad += total != static_cast<double>(rows);
    }
    b.Checked(
        InvariantKind::kGroupSizesCoverRows, Ref(trace, {S::kGroupSizeBincount}),
        "sum over experts of group_sizes[d, :] == R (= T_local*K) and group_sizes[d, e] "
        "== the rows sorted to expert e, on every device",
        "bincount of the flattened choices counts each (token, choice) row once", bad == 0,
        fmt::format("{} devices x {} experts, R = {}; {} mismatches", devices, experts, rows, bad));
  }
  // Gathering a weight (the chunked pipeline's wi chunks) moves no token.
  const bool moved = std::any_of(trace.ops.begin(), trace.ops.end(), [&](const OpRecord& op) {
    return op.collective && op.collective->kind == CollectiveKind::kAllGather &&
           !op.inputs.empty() && trace.tensors[op.inputs[0]].kind == TensorKind::kAct;
  });
  const int64_t own = choices ? choices->size() / devices : rows;
  b.Checked(InvariantKind::kNoRowsLeaveDevice, Ref(trace, {S::kPermuteNoEp}),
            "no token leaves its device: no all-to-all or all-gather of activations inside "
            "shard_map, and each device's R sorted rows are its own T_local*K choices",
            "with expert parallelism 1 every device holds every expert, so permute, gmm and "
            "unpermute run on local rows",
            !moved && own == rows,
            fmt::format("{} written all-to-all/all-gather; R = {}, T_local*K = {}",
                        moved ? "a" : "no", rows, own));
}

// ---------------------------------------------------------------------------------------
// sparse_matmul with the batch replicated over expert (decode): no forward all-to-all; the
// return all-to-all broadcasts every device's expert outputs.

void DecodeInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const Fact* back = trace.FindFact(FactKind::kRowsSent, "intermediate_output");
  if (!back || trace.FindFact(FactKind::kRowsSent, "x")) return;
  const TensorRecord* in = trace.At(trace.input);
  const TensorRecord* indices = trace.At(trace.top_k_indices);
  const auto m = Matrix(*back);
  if (!in || !indices || m.empty()) return;
  const auto bs = DimSize(*in, 'B'), s = DimSize(*in, 'S'), k = DimSize(*indices, 'K');
  if (!bs || !s || !k) return;
  const double rows = static_cast<double>(*bs * *s * *k);
  std::vector<double> received(m.front().size(), 0.0);
  bool broadcast = true;
  for (const auto& row : m) {
    for (size_t p = 0; p < row.size() && p < received.size(); ++p) received[p] += row[p];
    broadcast &= std::all_of(row.begin(), row.end(), [&](double v) { return v == row.front(); });
  }
  b.Checked(InvariantKind::kDecodeReceivesAllRows,
            Ref(trace, {S::kRecvSizeStrategy, S::kDecodeReturnRaggedAllToAll}),
            "every device receives all R = B*S*K rows: sum over senders d of "
            "rows_sent[d, p] == R for every peer p",
            "recv_sizes is the whole group_sizes array when the batch is replicated: each device "
            "gets every expert's outputs back",
            std::all_of(received.begin(), received.end(), [&](double v) { return v == rows; }),
            fmt::format("received {} == R = {}*{}*{} = {}", Vector(received), *bs, *s, *k,
                        FactValueText(rows)));
  b.Checked(InvariantKind::kDecodeSendSizesBroadcast, Ref(trace, {S::kSendSizeStrategy}),
            "send_sizes[d, p] is the same for every peer p",
            "SEND_SIZE repeats the rows of the sender's own experts to every peer: a broadcast",
            broadcast, fmt::format("rows sent [device, peer] = {}", FactValuesText(*back)));
  const Array* outputs = Captured(captures, Capture::kOutputPerDevice);
  if (!outputs || outputs->shape.empty()) return;
  const int64_t devices = outputs->shape[0];
  int64_t differ = 0;
  const std::vector<float> first = Row(*outputs, 0);
  for (int64_t d = 1; d < devices; ++d) differ += Row(*outputs, d) != first;
  b.Checked(InvariantKind::kDecodeOutputReplicated,
            Ref(trace, {S::kDecodeBatchAxis, S::kShardMapOutSpecs}),
            "the output is bit-identical on every device",
            "every device routes the same replicated tokens and sums the same returned rows; "
            "out_specs declare the batch unsharded (decode_batch_moe)",
            differ == 0, fmt::format("{} of {} devices differ from device 0", differ, devices));
}

// ---------------------------------------------------------------------------------------
// sparse_matmul with tensor parallelism: gmm_wo's partial sums scattered over M.

void TensorParallelInvariants(const Trace& trace, const SpmdResult& spmd, Builder& b) {
  const TensorRecord* in = trace.At(trace.input);
  if (!in) return;
  const auto m = DimSize(*in, 'M');
  for (const OpRecord& op : trace.ops) {
    if (!op.collective || op.collective->kind != CollectiveKind::kPsumScatter ||
        op.inputs.empty() || op.outputs.empty())
      continue;
    const TensorRecord& from = trace.tensors[op.inputs[0]];
    const TensorRecord& to = trace.tensors[op.outputs[0]];
    if (to.name != "intermediate_output" || from.shape.size() != 2 || to.shape.size() != 2)
      continue;
    const int64_t tp = op.collective->participants;
    // The partial sums come from wo's H dim being split over the scatter's axes.
    const TensorRecord* wo = nullptr;
    for (const TensorRecord& t : trace.tensors)
      if (t.constraint == Constraint::kShardMapIn && t.name == "wo") wo = &t;
    const PartitionSpec::Entry h = wo ? EntryAt(spmd.SpecOf(*wo), 1) : PartitionSpec::Entry{};
    const bool h_split = std::all_of(
        op.collective->axes.begin(), op.collective->axes.end(),
        [&](const std::string& a) { return std::find(h.begin(), h.end(), a) != h.end(); });
    b.Checked(InvariantKind::kTensorScatteredOutput, Ref(trace, {S::kWoTensorPsumScatter}),
              "intermediate_output is [R, M/TP] after the psum_scatter over tensor",
              "wo's H dim is sharded over tensor, so gmm_wo gives partial sums of [R, M]; the "
              "reduce-scatter sums them and leaves each device one M/TP slice",
              h_split && m && from.shape[1] == *m && to.shape[0] == from.shape[0] &&
                  to.shape[1] * tp == *m,
              fmt::format("wo in_spec {} (H over {}); {} -> {} over '{}' ({} devices), M = {}",
                          wo && spmd.SpecOf(*wo) ? spmd.SpecOf(*wo)->ToString() : "?",
                          PartitionSpec::EntryToString(h), ShapeToString(from.shape),
                          ShapeToString(to.shape), fmt::join(op.collective->axes, "', '"), tp,
                          m ? *m : 0));
    const TensorRecord* out = nullptr;
    for (const TensorRecord& t : trace.tensors)
      if (t.constraint == Constraint::kShardMapOut && t.name == "output") out = &t;
    const Shape* local = out ? &spmd.tensor(out->id).local_shape : nullptr;
    if (local && local->size() == 3) {
      const PartitionSpec::Entry entry = EntryAt(spmd.SpecOf(*out), 2);
      const bool named = std::all_of(
          op.collective->axes.begin(), op.collective->axes.end(), [&](const std::string& a) {
            return std::find(entry.begin(), entry.end(), a) != entry.end();
          });
      b.Checked(InvariantKind::kTensorOutSpecMatches, Ref(trace, {S::kShardMapOutSpecs}),
                "the out_specs' M entry shards over the scatter's axes, and the per-device "
                "output M == intermediate_output's M/TP",
                "shard_map reassembles the output from the slices the psum_scatter left",
                named && (*local)[2] == to.shape[1],
                fmt::format("output {} (per device {}) against [R, {}]",
                            spmd.SpecOf(*out) ? spmd.SpecOf(*out)->ToString() : "unplaced",
                            ShapeToString(*local), to.shape[1]));
    }
    return;
  }
}

// With tensor_transpose the kernels' M dim is sliced: each wi gmm contracts one slice of M
// and is psum'ed over tensor_transpose, right after it.
void TensorTransposeInvariants(const Trace& trace, Builder& b) {
  const TensorRecord* w0 = nullptr;
  for (const TensorRecord& t : trace.tensors)
    if (t.constraint == Constraint::kShardMapIn && t.name == "w0") w0 = &t;
  if (!w0) return;
  // A shard_map in_spec is always written.
  const PartitionSpec* spec = w0->partition_spec ? &*w0->partition_spec : nullptr;
  const PartitionSpec::Entry m = EntryAt(spec, 1);
  if (std::find(m.begin(), m.end(), "tensor_transpose") == m.end()) return;
  std::vector<std::string> summed;
  bool same_shape = true;
  for (const OpRecord& op : trace.ops) {
    if (!op.collective || op.collective->kind != CollectiveKind::kPsum || op.inputs.empty() ||
        op.outputs.empty())
      continue;
    const std::vector<std::string>& axes = op.collective->axes;
    if (std::find(axes.begin(), axes.end(), "tensor_transpose") == axes.end()) continue;
    const TensorRecord& from = trace.tensors[op.inputs[0]];
    const TensorRecord& to = trace.tensors[op.outputs[0]];
    summed.push_back(to.name);
    same_shape &= from.shape == to.shape;
  }
  const bool both = std::count(summed.begin(), summed.end(), "layer_w0") == 1 &&
                    std::count(summed.begin(), summed.end(), "layer_w1") == 1;
  b.Checked(InvariantKind::kTensorTransposePsum,
            Ref(trace, {S::kWi0TensorTransposePsum, S::kWi1TensorTransposePsum}),
            "layer_w0 and layer_w1 are each psum'ed over tensor_transpose, keeping their shape",
            "the wi kernels' M dim is sharded over tensor_transpose, so each device's gmm "
            "contracts one slice of M: a partial sum of the whole",
            both && same_shape,
            fmt::format(
                "w0 in_spec {} (M over {}); psum'ed: {}", spec ? spec->ToString() : "?",
                PartitionSpec::EntryToString(m),
                summed.empty() ? std::string("none") : fmt::format("{}", fmt::join(summed, ", "))));
}

// ---------------------------------------------------------------------------------------
// Ring of experts: rolled ids, the row mask, each expert-parallel group's coverage.

void RingInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const Array* sorted = Captured(captures, Capture::kRingSortedExpertsPerDevice);
  const Array* sizes = Captured(captures, Capture::kRingGroupSizesPerDevice);
  if (!sorted || !sizes || sorted->rank() != 2 || sizes->rank() != 2) {
    if (!trace.numeric && FindTensor(trace, "roll_to_expert_id"))
      b.Unchecked(InvariantKind::kRingMaskKeepsLocalExperts,
                  Ref(trace, {S::kRingLocalMask, S::kRingOutputMask}),
                  "on every device the rows kept by arange(R) < sum(group_sizes) are exactly the "
                  "rows whose rolled expert id < E_local; the rest are zeroed",
                  "rolling by E_local*shard puts the device's own experts first in the sort",
                  "no per-device values (symbolic trace)");
    return;
  }
  const int64_t devices = sorted->shape[0], rows = sorted->shape[1], local = sizes->shape[1];
  // Per-row max |value| of the masked gmm output, when the run kept it.
  const Array* magnitudes = Captured(captures, Capture::kRingIntermediateOutputRowMaxPerDevice);
  if (magnitudes && magnitudes->shape != sorted->shape) magnitudes = nullptr;
  std::vector<std::string> per_device;
  int64_t bad = 0, unzeroed = 0;
  for (int64_t d = 0; d < devices; ++d) {
    const std::vector<float> ids = Row(*sorted, d), g = Row(*sizes, d);
    const auto kept = static_cast<int64_t>(std::accumulate(g.begin(), g.end(), 0.0));
    if (magnitudes)
      for (int64_t r = kept; r < rows; ++r)
        unzeroed += magnitudes->values()[static_cast<size_t>(d * rows + r)] != 0.0f;
    int64_t local_rows = 0;
    bool prefix = true;
    for (int64_t r = 0; r < rows; ++r) {
      const bool mine = ids[static_cast<size_t>(r)] < static_cast<float>(local);
      local_rows += mine;
      prefix &= mine == (r < kept);
    }
    bad += local_rows != kept || !prefix;
    per_device.push_back(fmt::format("{}/{}", kept, rows));
  }
  b.Checked(InvariantKind::kRingMaskKeepsLocalExperts,
            Ref(trace, {S::kRingLocalMask, S::kRingOutputMask}),
            "on every device the rows kept by arange(R) < sum(group_sizes) are exactly the rows "
            "whose rolled expert id < E_local; the rest are zeroed",
            "rolling by E_local*shard puts the device's own experts first in the sort, so the "
            "count of its rows is a prefix length",
            bad == 0 && unzeroed == 0,
            fmt::format("rows kept per device [{}] (E_local = {}); {} devices differ; {}",
                        fmt::join(per_device, ", "), local, bad,
                        magnitudes
                            ? fmt::format("{} masked rows of intermediate_output nonzero", unzeroed)
                            : std::string("row values not captured")));
  const Array* sources = Captured(captures, Capture::kRingTokenSourcesPerDevice);
  const Array* roll = Captured(captures, Capture::kRingRollToExpertIdPerDevice);
  const TensorRecord* indices = trace.At(trace.top_k_indices);
  const auto k = indices ? DimSize(*indices, 'K') : std::nullopt;
  if (!sources || !roll || !k || sources->shape[0] != devices || roll->size() != devices) return;
  // Devices that gathered the same tokens form one expert-parallel group; devices of a group
  // with the same roll (tensor replicas) hold the same experts and count once.
  std::map<std::vector<float>, std::map<float, double>> groups;
  for (int64_t d = 0; d < devices; ++d) {
    const std::vector<float> g = Row(*sizes, d);
    groups[Row(*sources, d)].emplace(roll->values()[static_cast<size_t>(d)],
                                     std::accumulate(g.begin(), g.end(), 0.0));
  }
  std::vector<std::string> covered;
  int64_t short_groups = 0;
  for (const auto& [tokens, by_roll] : groups) {
    double total = 0;
    for (const auto& [r, n] : by_roll) total += n;
    const auto gathered = static_cast<int64_t>(tokens.size() / 2);  // (device, row) pairs
    const double want = static_cast<double>(gathered) * static_cast<double>(*k);
    short_groups += total != want;
    covered.push_back(fmt::format("{}/{}", FactValueText(total), FactValueText(want)));
  }
  b.Checked(InvariantKind::kRingGroupSizesCoverGroup, Ref(trace, {S::kRingRoute}),
            "per expert-parallel group, sum over its devices of sum(group_sizes) == the "
            "gathered tokens x K",
            "every device sees the whole group's tokens and keeps the choices of its own "
            "experts: together the group's devices take each (token, choice) once",
            short_groups == 0,
            fmt::format("{} groups, rows taken / (tokens x K) = [{}]", groups.size(),
                        fmt::join(covered, ", ")));
}

}  // namespace shardtrace::invariant_internal
