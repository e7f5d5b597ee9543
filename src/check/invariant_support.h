// What the invariant checks share (check/*_invariants.cc): the Builder that appends one
// typed record per check, lookups of tensors, captures and facts by name, and the check
// groups trace_invariants.cc lists in its table. Internal to check/: nothing outside the
// folder includes it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "check/trace_invariants.h"
#include "config/moe_lines.h"
#include "ir/trace.h"
#include "numeric/array.h"
#include "shard/partition_spec.h"
#include "spmd/spmd_result.h"

namespace shardtrace::invariant_internal {

using S = MoeStatement;

// "moe.py:530, ..." for the statements in the moe.py of the revision the trace models.
inline std::string Ref(const Trace& trace, std::initializer_list<MoeStatement> statements) {
  return MoeRef(trace.revision, statements);
}

// Builds the invariants of one trace: each check appends its record.
class Builder {
 public:
  explicit Builder(std::vector<Invariant>& out) : out_(out) {}
  void Checked(InvariantKind kind, std::string source, std::string statement, std::string reason,
               bool holds, std::string detail) {
    out_.push_back(Invariant{kind, std::move(statement), std::move(reason),
                             (holds ? "holds: " : "VIOLATED: ") + detail, !holds, std::move(source),
                             ""});
  }
  void Unchecked(InvariantKind kind, std::string source, std::string statement, std::string reason,
                 std::string why_not) {
    out_.push_back(Invariant{kind, std::move(statement), std::move(reason),
                             "not evaluated: " + why_not, false, std::move(source), ""});
  }

 private:
  std::vector<Invariant>& out_;
};

// The size of dim `letter` of `t`, when its dims name it.
std::optional<int64_t> DimSize(const TensorRecord& t, char letter);

double Sum(const std::vector<double>& v);

// A [rows, cols] fact as a matrix; empty when the fact is not 2-D.
std::vector<std::vector<double>> Matrix(const Fact& f);

std::string Vector(const std::vector<double>& v);

std::string Number(double x);

// The numeric capture `name`, or nullptr.
const Array* Captured(const Captures* captures, Capture id);

// True when `scope` is `tail` or ends with "/<tail>".
bool ScopeEndsWith(std::string_view scope, std::string_view tail);

// The first tensor named `name` in a scope ending with `tail` (any scope when empty).
const TensorRecord* FindTensor(const Trace& trace, std::string_view name,
                               std::string_view tail = {});

PartitionSpec::Entry EntryAt(const PartitionSpec* spec, size_t dim);

// Row `r` of a [rows, cols] capture (or of its first two dims flattened past the first).
std::vector<float> Row(const Array& a, int64_t r);

// The check groups, each appending the invariants of the traces it applies to.
void ShapeInvariant(const Trace& trace, Builder& b);
void BytesInvariant(const Trace& trace, const SpmdResult& spmd, Builder& b);
void RoutingInvariant(const Trace& trace, Builder& b);
void ChoiceInvariants(const Trace& trace, const Captures* captures, Builder& b);
void RoutingVariantInvariants(const Trace& trace, const Captures* captures, Builder& b);
void CapacityInvariants(const Trace& trace, const Captures* captures, Builder& b);
void TrainingCombineInvariant(const Trace& trace, const Captures* captures, Builder& b);
void DroplessInvariants(const Trace& trace, const Captures* captures, Builder& b);
void SubgroupInvariants(const Trace& trace, const Captures* captures, Builder& b);
void AllToAllInvariants(const Trace& trace, Builder& b);
void SparseSortInvariants(const Trace& trace, const Captures* captures, Builder& b);
void DecodeInvariants(const Trace& trace, const Captures* captures, Builder& b);
void TensorParallelInvariants(const Trace& trace, const SpmdResult& spmd, Builder& b);
void TensorTransposeInvariants(const Trace& trace, Builder& b);
void RingInvariants(const Trace& trace, const Captures* captures, Builder& b);
void MlpInvariants(const Trace& trace, const SpmdResult& spmd, Builder& b);
void SharedInvariants(const Trace& trace, const Captures* captures, Builder& b);
void MatchesReference(const Captures* captures, const ReferenceRun* reference, InvariantKind kind,
                      const std::string& source, const std::string& other,
                      const std::string& reason, bool rounded_partials, Builder& b);
void MaskedLoopInvariants(const Trace& trace, const Captures* captures,
                          const ReferenceRun* reference, Builder& b);
void RingReferenceInvariant(const Trace& trace, const Captures* captures,
                            const ReferenceRun* reference, Builder& b);

}  // namespace shardtrace::invariant_internal
