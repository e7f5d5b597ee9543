// What tests/step_xla_test.cc (XLA:CPU's compiled steps) and tests/tpu_block_test.cc (the TPU
// compiler's) share: a compiled step's collectives and shardtrace's step model's as comparable
// keys "op gN bytesB" (HLO op, devices per group, result bytes per device), and the multiset
// difference. The two compilers differ in what the model predicts (Compiler): XLA:CPU widens
// 16-bit floats to float32 before a collective and writes GSPMD's gradient reduce-scatter as an
// all-reduce of the whole block (StepCollective::xla_cpu_*); what TPU's compiler writes is the
// product's lowering (spmd/tpu_collectives.h, LowerForTpu), which the TPU keys come from.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/collective_kind.h"
#include "numeric/dtype.h"
#include "run/run.h"
#include "spmd/tpu_collectives.h"
#include "spmd/xla_spmd.h"
#include "test_support.h"

namespace shardtrace::step_compare {

enum class Compiler { kXlaCpu, kTpu };

// The HLO op of a record: XLA:CPU's from its instruction name ("all-reduce.3" -> "all-reduce");
// TPU's from its op field (a TPU instruction may be named after the JAX op, "psum.36").
inline std::string HloOp(const nlohmann::json& c, Compiler compiler) {
  std::string name =
      compiler == Compiler::kTpu ? c["op"].get<std::string>() : c["name"].get<std::string>();
  name = name.substr(0, name.find('.'));
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// Bytes of an HLO result type: "f32[4,16,32]" -> 8192.
inline int64_t ResultBytes(const std::string& type) {
  const size_t open = type.find('[');
  const std::string dtype = type.substr(0, open);
  int64_t bytes = dtype == "f32" || dtype == "s32" || dtype == "u32" ? 4
                  : dtype == "bf16" || dtype == "f16"                ? 2
                                                                     : 1;
  std::string dims = type.substr(open + 1, type.find(']') - open - 1);
  size_t start = 0;
  while (start < dims.size()) {
    const size_t comma = dims.find(',', start);
    bytes *= std::stoll(dims.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return bytes;
}

inline std::string Key(const std::string& op, int64_t group, int64_t bytes) {
  return fmt::format("{} g{} {}B", op, group, bytes);
}

// The collectives of `records` (a step.json's "collectives" or "forward_collectives") whose
// pass is `pass` ("backward", or "forward"; a record without a pass counts as forward), over
// groups of more than one device. A combined all-reduce (several results) counts once per
// result; a combined op of both passes ("mixed") counts its parts of `pass`.
inline std::multiset<std::string> Compiled(const nlohmann::json& records, const std::string& pass,
                                           Compiler compiler) {
  std::multiset<std::string> out;
  for (const nlohmann::json& c : records) {
    const int64_t group = c["group_size"].is_number() ? c["group_size"].get<int64_t>() : 0;
    if (group == 1) continue;
    const std::string its = c.value("pass", std::string("forward"));
    const std::string op = HloOp(c, compiler);
    if (its == pass && !c.contains("parts")) {
      if (op == "all-reduce" && c["result"].size() > 1) {
        for (const nlohmann::json& r : c["result"])
          out.insert(Key(op, group, ResultBytes(r.get<std::string>())));
        continue;
      }
      out.insert(Key(op, group, c["result_bytes"].get<int64_t>()));
    } else if (c.contains("parts") && (its == pass || its == "mixed")) {
      for (const nlohmann::json& p : c["parts"])
        if (p["pass"] == pass) out.insert(Key(op, group, p["bytes"].get<int64_t>()));
    }
  }
  return out;
}

// GSPMD's reshards of a step argument (a parameter gathered whole), which XLA issues once
// where the argument enters the step and the export marks forward (argument_reshard).
inline std::multiset<std::string> ArgumentReshards(const nlohmann::json& step, Compiler compiler) {
  std::multiset<std::string> out;
  for (const nlohmann::json& c : step["collectives"])
    if (c["pass"] == "forward" && c.value("argument_reshard", false))
      out.insert(Key(HloOp(c, compiler), c["group_size"].get<int64_t>(),
                     c["result_bytes"].get<int64_t>()));
  return out;
}

// A model backward collective as XLA:CPU writes it: 16-bit floats widened to float32, a GSPMD
// reduce-scatter an all-reduce of the whole block. (TPU's view is the product's own,
// spmd/tpu_collectives.h: TpuModel below.)
inline std::string ModelKey(const StepCollective& c) {
  return Key(c.xla_cpu_op, c.participants, c.xla_cpu_result_bytes);
}

// The model's backward collectives as XLA:CPU compiles them; a parameter it gathers for a
// backward einsum (StepCollective::argument) counts as one of the compiler's argument reshards
// when it has one. An entry whose xla_cpu_op is "-" rides in the all-reduce before it (one XLA
// op for both).
inline std::multiset<std::string> ModelBackward(const StepResult& step,
                                                const nlohmann::json& compiled) {
  std::multiset<std::string> out, arguments = ArgumentReshards(compiled, Compiler::kXlaCpu);
  for (const StepCollective& c : step.backward) {
    if (c.xla_cpu_op == "-" || c.participants == 1) continue;
    const std::string key = ModelKey(c);
    if (c.argument && arguments.count(key)) {
      arguments.erase(arguments.find(key));
      continue;
    }
    out.insert(key);
  }
  return out;
}

// The model's forward and backward collectives as TPU's compiler writes them: the product's
// lowering (RunResult::tpu_step, LowerForTpu), keyed like the compiled ones. A parameter gathered
// for a backward einsum counts as one of the compiled step's argument reshards when it has one.
struct TpuModelKeys {
  std::multiset<std::string> forward, backward;
};
inline TpuModelKeys TpuModel(const RunResult& run, const nlohmann::json& compiled) {
  const TpuStepCollectives& lowered = run.tpu_step.value();
  TpuModelKeys out;
  for (const TpuCollective& t : lowered.forward)
    out.forward.insert(Key(t.op, t.group, t.result_bytes));
  std::multiset<std::string> arguments = ArgumentReshards(compiled, Compiler::kTpu);
  for (const TpuCollective& t : lowered.backward) {
    const std::string key = Key(t.op, t.group, t.result_bytes);
    if (t.argument && arguments.count(key)) {
      arguments.erase(arguments.find(key));
      continue;
    }
    out.backward.insert(key);
  }
  return out;
}

inline std::vector<std::string> Minus(const std::multiset<std::string>& a,
                                      const std::multiset<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// A compiled step fixture (a directory with config.yml and step.json) and shardtrace's
// symbolic step of the same block, run through the one pipeline.
struct StepFixture {
  std::string name;
  nlohmann::json step;
  RunResult run;
};

// Every fixture under `relative_dir` (below the source tree), by name. `devices_from_fixture`:
// the run takes step.json's "devices" (the TPU topology's count; a mesh axis of -1 takes what
// is left), else the config's own parallelism decides.
inline std::vector<StepFixture> LoadStepFixtures(const std::string& relative_dir,
                                                 bool devices_from_fixture) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(testing::SourcePath(relative_dir)))
    if (fs::exists(e.path() / "step.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  std::vector<StepFixture> fixtures;
  for (const fs::path& dir : dirs) {
    nlohmann::json step = nlohmann::json::parse(testing::ReadFile(dir / "step.json"));
    const Block block = step["block"] == "mlp" ? Block::kMlp : Block::kMoe;
    const std::optional<int64_t> devices =
        devices_from_fixture ? std::optional<int64_t>(step["devices"].get<int64_t>())
                             : std::nullopt;
    RunRequest request = SymbolicRequest({(dir / "config.yml").string()}, devices, block);
    // A case compiled without jax.checkpoint around the block keeps every residual.
    if (step["remat"].is_null()) request.args.push_back("remat_policy=none");
    request.step = true;
    fixtures.push_back({dir.filename().string(), std::move(step), Run(request)});
  }
  return fixtures;
}

}  // namespace shardtrace::step_compare
