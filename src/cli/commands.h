// One function per subcommand, each a few lines of glue: load the config, build the mesh,
// run the tracer or resolver, hand the result to an emitter. The options structs are plain
// data filled by cli.cc, so no CLI11 type reaches here.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace shardtrace {

struct CommonOptions {
  std::vector<std::string> args;  // CONFIG.yml paths and key=value overrides, in order
  std::optional<int64_t> devices;
  std::string format;
  std::string output = "-";  // "-": stdout; an empty name is refused
  // --maxtext-revision: RunCli appends it to `args` as "--maxtext-revision=NAME"
  // (config/run_inputs.h); empty: recognised from the base.yml.
  std::string maxtext_revision;
};

struct ExplainOptions {
  CommonOptions common;
  std::string axes;
  std::string shape;
  std::string dtype;
};

struct TraceOptions {
  CommonOptions common;
  std::string block = "moe";  // moe | mlp | shared
  bool numeric = false;
  uint64_t seed = 0;
  std::string golden;         // a golden case directory to take inputs and weights from
  std::string path = "auto";  // auto (what RoutedMoE selects) | masked_loop
  int threads = 0;            // numeric: 0 = every core, 1 = serial
  bool quiet = false;         // no progress line on stderr
  int64_t budget_bytes = int64_t{2} << 30;  // numeric: what the run may hold (--max-memory)
};

struct CheckCommandOptions {
  CommonOptions common;  // args: golden case directories, then CONFIG.yml / key=value
  double atol = 1e-5;
  double rtol = 1e-4;
  int threads = 0;     // 0 = every core, 1 = serial
  bool quiet = false;  // no progress line on stderr
  int64_t budget_bytes = int64_t{2} << 30;  // what a case's run may hold (--max-memory)
};

struct GenerateOptions {
  std::string out = "visualizations";  // directory of the *.md files
  bool check = false;                  // compare with the files in `out`, write nothing
};

struct CompareDumpOptions {
  std::string dump_dir;  // a MaxText sharding_info directory
  CommonOptions common;  // args: CONFIG.yml / key=value over what the dump's name says
};

struct DiffOptions {
  CommonOptions common;        // args: up to two CONFIG files (A, B) and common key=value
  std::vector<std::string> a;  // key=value for side A only
  std::vector<std::string> b;  // key=value for side B only
  std::string block = "moe";
};

struct RenderOptions {
  CommonOptions common;  // args: CONFIG.yml / key=value; output: the page (.md)
  std::string block = "moe";
  std::vector<std::string> hbm;  // --hbm NAME=GIB: accelerators the summary fits the peak to
};

void RunConfigCommand(const CommonOptions& options, std::ostream& out);
void RunExplainCommand(const ExplainOptions& options, std::ostream& out);
void RunTraceCommand(const TraceOptions& options, std::ostream& out);
void RunDumpCommand(const CommonOptions& options, std::ostream& out);
// Returns false when a check failed (exit status 1).
bool RunCheckCommand(const CheckCommandOptions& options, std::ostream& out);

// Returns false when the dump and the trace differ (exit 1).
bool RunCompareDumpCommand(const CompareDumpOptions& options, std::ostream& out);

// Returns false when the two sides' sharding differs (exit 1).
bool RunDiffCommand(const DiffOptions& options, std::ostream& out);

// One visualization page for the config in options.common.args (see render_command.cc).
void RunRenderCommand(const RenderOptions& options, std::ostream& out);

// Renders visualizations/*.md (see generate_command.cc for the list). With `check`, writes
// nothing and returns false when a file in options.out is missing or differs (exit 1).
bool RunGenerateCommand(const GenerateOptions& options, std::ostream& out);

// Writes `text` to options.output atomically, or to `out` when no output file is given.
void WriteOutput(const CommonOptions& options, const std::string& text, std::ostream& out);

}  // namespace shardtrace
