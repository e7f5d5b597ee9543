#include "config/moe_lines.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <vector>

namespace shardtrace {

namespace {

struct StatementRow {
  std::string_view name;
  std::string_view what;
  // Indexed by RevisionId: the seed, e591f30, 0.2.5.
  std::array<LineSpan, 3> lines;
};

constexpr std::array kStatements = {
#define MOE_STATEMENT(id, what, s0, s1, m0, m1, r0, r1) \
  StatementRow{#id, what, {{{s0, s1}, {m0, m1}, {r0, r1}}}},
#include "config/moe_statements.inc"
#undef MOE_STATEMENT
};

constexpr std::array kAll = {
#define MOE_STATEMENT(id, ...) MoeStatement::k##id,
#include "config/moe_statements.inc"
#undef MOE_STATEMENT
};

const StatementRow& Row(MoeStatement statement) {
  return kStatements.at(static_cast<size_t>(statement));
}

std::string List(RevisionId revision, std::initializer_list<MoeStatement> statements,
                 bool first_only) {
  std::vector<std::string> present;
  std::vector<std::string_view> absent;
  for (const MoeStatement s : statements) {
    std::string lines = MoeLines(revision, s, first_only);
    if (lines.empty())
      absent.push_back(Row(s).what);
    else
      present.push_back(std::move(lines));
  }
  if (present.empty()) return NoSuchStatement(revision);
  std::string out = fmt::format("{}", fmt::join(present, ", "));
  if (!absent.empty())
    out += fmt::format(" (no counterpart of {} in MaxText {})", fmt::join(absent, ", "),
                       Revisions().at(static_cast<size_t>(revision)).name);
  return out;
}

std::string Ref(RevisionId revision, std::initializer_list<MoeStatement> statements,
                bool first_only) {
  const std::string list = List(revision, statements, first_only);
  // A list that starts with a parenthesis names no line at all.
  return list.starts_with('(') ? "moe.py " + list : "moe.py:" + list;
}

}  // namespace

std::span<const MoeStatement> AllMoeStatements() { return kAll; }

std::string_view MoeStatementName(MoeStatement statement) { return Row(statement).name; }

LineSpan MoeStatementLines(RevisionId revision, MoeStatement statement) {
  return Row(statement).lines.at(static_cast<size_t>(revision));
}

std::string MoeLines(RevisionId revision, MoeStatement statement, bool first_only) {
  const LineSpan span = MoeStatementLines(revision, statement);
  if (!span.present()) return "";
  if (first_only || span.first == span.last) return fmt::format("{}", span.first);
  return fmt::format("{}-{}", span.first, span.last);
}

std::string MoeRef(RevisionId revision, std::initializer_list<MoeStatement> statements) {
  return Ref(revision, statements, false);
}

std::string MoeLineList(RevisionId revision, std::initializer_list<MoeStatement> statements) {
  return List(revision, statements, false);
}

std::string MoeRefStart(RevisionId revision, std::initializer_list<MoeStatement> statements) {
  return Ref(revision, statements, true);
}

std::string NoSuchStatement(RevisionId revision) {
  return fmt::format("(no such statement in MaxText {})",
                     Revisions().at(static_cast<size_t>(revision)).name);
}

}  // namespace shardtrace
