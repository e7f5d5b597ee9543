// Warnings: legal-but-suspicious input (a repeated YAML key, a parallelism key for an axis the
// mesh lacks, ...) as plain data. What finds one returns it with its result (Config,
// RunInputs, RunSetup); an Error thrown after a warning arose carries it too, since a warning
// must show even when a later check fails. The CLI prints a command's warnings once, each as
// the line "shardtrace: warning: <message>" (made printable, util/printable.h).
#pragma once

#include <string>
#include <vector>

namespace shardtrace {

enum class WarningKind {
  kRepeatedKey,        // a key given twice in one YAML file: the later value is used
  kSecondDocument,     // a second YAML document ('---'): only the first is read
  kUnusedParallelism,  // an ici_/dcn_<axis>_parallelism > 1 for an axis mesh_axes lack
  kUnknownRuleAxis,    // a logical rule naming a mesh axis mesh_axes lack
};

struct Warning {
  WarningKind kind = WarningKind::kRepeatedKey;
  std::string key;      // the config key it is about
  std::string message;  // the text after "shardtrace: warning: "

  friend bool operator==(const Warning&, const Warning&) = default;
};

// Appends `warning` unless `warnings` already holds the same one: a file parsed twice (a case
// file, the base of every variant a page traces) warns once.
void AddWarning(std::vector<Warning>& warnings, Warning warning);
void AddWarnings(std::vector<Warning>& warnings, const std::vector<Warning>& more);

// "shardtrace: warning: <message>\n" for each, in order.
std::string WarningLines(const std::vector<Warning>& warnings);

}  // namespace shardtrace
