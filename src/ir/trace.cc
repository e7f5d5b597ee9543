#include "ir/trace.h"

namespace shardtrace {

std::string ToString(TensorKind kind) { return kind == TensorKind::kWeight ? "weight" : "act"; }

std::string ToString(Constraint constraint) {
  switch (constraint) {
    case Constraint::kNone:
      return "";
    case Constraint::kKernelAxes:
      return "kernel_axes";
    case Constraint::kShardWithLogical:
      return "maybe_shard_with_logical";
    case Constraint::kShardWithPspec:
      return "maybe_shard_with_pspec";
    case Constraint::kShardMapIn:
      return "shard_map_in_specs";
    case Constraint::kShardMapOut:
      return "shard_map_out_specs";
  }
  return "";
}

std::string OpRecord::Name() const {
  return kind == OpKind::kActivation ? function : ToString(kind);
}

const TensorRecord* Trace::Find(std::string_view stable_id) const {
  for (const TensorRecord& t : tensors)
    if (t.stable_id == stable_id) return &t;
  return nullptr;
}

const TensorRecord* Trace::At(int index) const {
  return index >= 0 && index < static_cast<int>(tensors.size()) ? &tensors[index] : nullptr;
}

const Fact* Trace::FindFact(FactKind kind, std::string_view subject) const {
  for (const Fact& f : facts)
    if (f.kind == kind && f.subject == subject) return &f;
  return nullptr;
}

bool ScopeHasComponent(std::string_view scope, std::string_view component) {
  for (size_t at = scope.find(component); at != std::string_view::npos;
       at = scope.find(component, at + 1)) {
    const size_t end = at + component.size();
    if ((at == 0 || scope[at - 1] == '/') && (end == scope.size() || scope[end] == '/'))
      return true;
  }
  return false;
}

bool InSharedExperts(std::string_view scope) {
  return ScopeHasComponent(scope, "shared_experts") || ScopeHasComponent(scope, "shared_expert");
}

}  // namespace shardtrace
