// What the tensors of moe.py are, in a reader's words, and where in moe.py (of the revision
// the trace models, through config/moe_lines.h) each traced function is: the documentation the
// visualization pages add beside what the trace measured. Keyed by the names the trace records
// (moe.py's variable names, MaxText's parameter names, the named scopes), so an unknown name simply
// gets no entry. Facts about moe.py, not computations: nothing here derives a shape or a
// sharding.
#pragma once

#include <string>
#include <string_view>

#include "ir/trace.h"

namespace shardtrace {

// "the (token, choice) rows sorted by expert", or "" for a name the glossary lacks.
std::string_view TensorMeaning(std::string_view name);

// What this record of a name is where it stands: a name moe.py or MaxText reuses gets the
// meaning of its place (`x` is the MLP's hidden state in MlpBlock, this device's tokens at
// the shard_map's entry, the routed rows after the sort; `wi_0` without an expert dim is
// MlpBlock's kernel), else TensorMeaning(t.name).
// A meaning that cites moe.py cites `revision`'s lines.
std::string TensorMeaning(const TensorRecord& t, RevisionId revision);

// "moe.py:637" (or "moe.py:1834 (dropping) / 1914 (dropless)"; the seed's lines) for a scope
// whose last segment is a moe.py function or named scope ("RoutedMoE/sparse_matmul/wrapper/
// permute" -> permute), in `revision`'s moe.py, or "" when it is none (linears.py's MlpBlock,
// ...). Only meaningful for traces of moe.py itself: the PR 3981 pipeline reuses names such as
// "dispatch" for its own stages.
std::string MoeLineRef(RevisionId revision, std::string_view scope);

// "moe.py:1689" (the seed's) for the statement of `revision`'s moe.py that constrains `tensor`
// in a scope whose last segment is `scope_last` ("dense_matmul", "wi_0", "generate_masks", ...),
// with the statement kind `constraint` ("maybe_shard_with_logical", ...); "" when the table has
// none. The algorithm cites it on each constraint step, beside its scope's first line.
std::string MoeStatementLine(RevisionId revision, std::string_view scope, std::string_view tensor,
                             std::string_view constraint);

// The scope path as pages print it: a segment shardtrace adds for its own grouping, which is
// no function or named scope of moe.py (its gmm calls have none),
// in brackets: "RoutedMoE/sparse_matmul/wrapper/[gmm_wi_0]".
std::string ScopeText(std::string_view scope);

}  // namespace shardtrace
