#include "emit/dim_letters.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <map>
#include <optional>
#include <vector>

#include "config/moe_lines.h"

namespace shardtrace {
namespace {

struct Letter {
  char letter;
  std::string_view label;  // how pages write it; "" = the letter itself
  std::string_view meaning;
};

// The letters of trace.h in the order the Definitions table lists them (a folded or
// borrowed dim right after the letters it comes from).
constexpr std::array<Letter, 24> kLetters = {{
    {'B', "", "batch"},
    {'S', "", "sequence"},
    {'N', "", "context groups"},
    {'M', "", "model / embed"},
    {'Q', "Mc", "one embedding chunk of M (shardtrace_pr3981_emb_chunks)"},
    {'W', "P*M",
     "the expert-parallel group's gathered tokens folded into the last dim: unpermute reshapes "
     "with the batch of x from before the all_gather ({}); the wrapper unfolds it ({})"},
    {'E', "", "experts"},
    {'K', "", "top-k choices per token"},
    {'C', "", "expert capacity"},
    {'D', "C+1", "capacity slots and slot 0 = dropped, cut before the masks return ({})"},
    {'H', "", "expert hidden"},
    {'G', "", "routing groups"},
    {'g', "", "experts per routing group"},
    {'J', "g2", "the 2 best experts of a routing group, a fixed 2 ({})"},
    {'V', "Gk", "routing groups each token keeps (topk_routing_group, {})"},
    {'F', "", "dense / shared MLP hidden"},
    {'T', "", "tokens = B*S, flattened"},
    {'R', "", "routed rows = T*K, sorted by expert"},
    {'U', "", "ragged buffer rows"},
    {'P', "", "expert-parallel peers"},
    {'L', "P*E",
     "(peer, local expert) slots, flattened: local_sizes = all_shard_local_sizes.reshape(-1) "
     "({})"},
    {'A', "", "activations of a fused wi"},
    {'1', "", "broadcast dim of size 1"},
    {'-', "", "unnamed dim"},
}};

const Letter* Find(char letter) {
  for (const Letter& l : kLetters)
    if (l.letter == letter) return &l;
  return nullptr;
}

}  // namespace

std::string DimLabel(char letter) {
  const Letter* l = Find(letter);
  return l && !l->label.empty() ? std::string(l->label) : std::string(1, letter);
}

std::string DimsText(std::string_view dims) {
  std::vector<std::string> labels;
  bool multi = false;
  for (const char c : dims) {
    labels.push_back(DimLabel(c));
    multi |= labels.back().size() > 1;
  }
  return fmt::format("{}", fmt::join(labels, multi ? "," : ""));
}

std::string DimMeaning(char letter, RevisionId revision) {
  const Letter* l = Find(letter);
  if (!l) return "";
  // The moe.py statements a meaning cites, one `{}` each, in the trace's revision.
  using S = MoeStatement;
  switch (letter) {
    case 'W':
      return fmt::format(fmt::runtime(l->meaning),
                         MoeRef(revision, {S::kWrapperBatchShape, S::kRingGather}),
                         MoeRef(revision, {S::kRingUnfold}));
    case 'D':
      return fmt::format(fmt::runtime(l->meaning), MoeRef(revision, {S::kCombineMaskCut}));
    case 'J':
      return fmt::format(fmt::runtime(l->meaning), MoeRef(revision, {S::kTop2InGroup}));
    case 'V':
      return fmt::format(fmt::runtime(l->meaning), MoeRef(revision, {S::kGroupTopk}));
    case 'L':
      return fmt::format(fmt::runtime(l->meaning), MoeRef(revision, {S::kLocalSizesReshape}));
    default:
      return std::string(l->meaning);
  }
}

std::string_view DimLetterOrder() {
  static const std::string order = [] {
    std::string s;
    for (const Letter& l : kLetters) s += l.letter;
    return s;
  }();
  return order;
}

std::optional<ParsedEinsum> PageEinsum(const Trace& trace, const OpRecord& op) {
  if (!op.einsum) return std::nullopt;
  const ParsedEinsum& e = *op.einsum;
  if (op.inputs.size() < e.operands.size() || op.outputs.empty()) return std::nullopt;
  std::map<char, char> rename;  // moe.py's letter -> the page's
  const auto bind = [&](const std::string& letters, const std::string& dims) {
    if (letters.size() != dims.size()) return false;
    for (size_t i = 0; i < letters.size(); ++i) {
      if (dims[i] == '-' || dims[i] == '1') return false;  // only letters a reader can look up
      const auto [at, fresh] = rename.emplace(letters[i], dims[i]);
      if (!fresh && at->second != dims[i]) return false;
    }
    return true;
  };
  for (size_t i = 0; i < e.operands.size(); ++i)
    if (!bind(e.operands[i], trace.tensors[op.inputs[i]].dims)) return std::nullopt;
  if (!bind(e.output, trace.tensors[op.outputs.front()].dims)) return std::nullopt;
  std::map<char, char> inverse;
  for (const auto& [from, to] : rename)
    if (!inverse.emplace(to, from).second) return std::nullopt;  // two letters became one
  const auto spell = [&](const std::string& letters) {
    std::string out;
    for (const char c : letters) out += rename.at(c);
    return out;
  };
  std::vector<std::string> operands;
  for (const std::string& o : e.operands) operands.push_back(spell(o));
  return ParseEinsum(fmt::format("{}->{}", fmt::join(operands, ","), spell(e.output)));
}

std::string PageEquation(const Trace& trace, const OpRecord& op) {
  const std::optional<ParsedEinsum> page = PageEinsum(trace, op);
  if (!page) return op.equation;
  const auto labels = [](const std::string& letters) {
    std::string out;
    for (const char c : letters) out += DimLabel(c);
    return out;
  };
  std::vector<std::string> operands;
  for (const std::string& o : page->operands) operands.push_back(labels(o));
  return fmt::format("{}->{}", fmt::join(operands, ","), labels(page->output));
}

}  // namespace shardtrace
