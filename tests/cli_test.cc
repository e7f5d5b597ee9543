// Tests of the command line's documented contract (cli/cli.h): 0 on success, 2 and a single
// "shardtrace: error: ..." line on bad input, 1 when a check fails, atomic -o output. Most
// run in process through RunCli with captured streams; the ones marked [e2e] run the real
// binary in a shell to check main, the process exit status and the streams end to end.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

using testing::CommandResult;
using testing::ReadFile;
using testing::RunShardtrace;
using testing::TempDir;

std::string Describe(const std::vector<std::string>& args, const CommandResult& r) {
  std::string text = "shardtrace";
  for (const std::string& a : args) text += " " + a;
  return text + "\nstatus " + std::to_string(r.status) + "\nstdout:\n" + r.out + "\nstderr:\n" +
         r.err;
}

// A bad-input failure: status 2, nothing on stdout, one "shardtrace: error:" line on stderr.
CommandResult ExpectUserError(const std::vector<std::string>& args) {
  const CommandResult r = RunShardtrace(args);
  INFO(Describe(args, r));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("shardtrace: error: ", 0) == 0);
  REQUIRE_FALSE(r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(r.err.find('\n') == r.err.size() - 1);
  return r;
}

const std::vector<std::string> kExplainArgs = {"explain",
                                               "--axes",
                                               "exp,embed_moe,mlp_moe",
                                               "--shape",
                                               "64,2048,1408",
                                               "ici_expert_parallelism=2",
                                               "--devices",
                                               "8"};

TEST_CASE("explain --format json gives the resolved spec and local shape and bytes", "[cli]") {
  std::vector<std::string> args = kExplainArgs;
  args.insert(args.end(), {"--format", "json"});
  const CommandResult r = RunShardtrace(args);
  INFO(Describe(args, r));
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("logical_axes") == nlohmann::json({"exp", "embed_moe", "mlp_moe"}));
  CHECK(j.at("partition_spec") == nlohmann::json({"expert", "fsdp", nullptr}));
  CHECK(j.at("physical") == "P('expert', 'fsdp', None)");
  CHECK(j.at("mesh") == "mesh['fsdp'=4, 'expert'=2]");
  CHECK(j.at("local_shape") == nlohmann::json({32, 512, 1408}));
  CHECK(j.at("bytes_per_device") == int64_t{32} * 512 * 1408 * 2);  // bfloat16 (seed dtype)
  // Facts 2.4, seed rules, before size-1 removal.
  CHECK(j.at("before_size1_removal") ==
        nlohmann::json::parse(R"(["expert", ["fsdp", "tensor_transpose", "context"],
                                  ["fsdp_transpose", "tensor", "tensor_sequence", "autoregressive"]])"));
}

TEST_CASE("explain text output shows the blocked embed_moe variant", "[cli]") {
  const CommandResult r = RunShardtrace(kExplainArgs);
  INFO(Describe(kExplainArgs, r));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("P('expert', 'fsdp', None)"));
  CHECK_THAT(r.out, Catch::Contains("skipped: mesh axis"));
  bool embed_moe_skipped = false;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.find("embed_moe") != std::string::npos &&
        line.find("skipped: mesh axis 'fsdp_transpose'") != std::string::npos)
      embed_moe_skipped = true;
  CHECK(embed_moe_skipped);
}

TEST_CASE("An unknown config key exits 2 and suggests the right key", "[cli]") {
  const CommandResult r = ExpectUserError({"config", "num_expert=4"});
  CHECK_THAT(r.err, Catch::Contains("num_expert") && Catch::Contains("num_experts"));
}

TEST_CASE("A value of the wrong type exits 2 naming the key", "[cli]") {
  const CommandResult r = ExpectUserError({"config", "num_experts=abc"});
  CHECK_THAT(r.err, Catch::Contains("num_experts"));
}

TEST_CASE("A malformed YAML file exits 2 naming the file and a line:column", "[cli]") {
  TempDir dir;
  const fs::path bad = dir / "broken_config.yml";
  std::ofstream(bad) << "num_experts: 4\nmlp_activations: ['silu', 'linear'\nbase_emb_dim: 16\n";
  const CommandResult r = ExpectUserError({"config", bad.string()});
  CHECK_THAT(r.err, Catch::Contains("broken_config.yml"));
  CHECK(std::regex_search(r.err, std::regex(R"(\d+:\d+)")));
}

TEST_CASE("An impossible mesh exits 2", "[cli]") {
  const CommandResult r = ExpectUserError({"config", "ici_expert_parallelism=3", "--devices", "8"});
  CHECK_THAT(r.err, Catch::Contains("expert"));
}

TEST_CASE("An unknown command-line flag exits 2", "[cli]") {
  const CommandResult r = ExpectUserError({"config", "--no-such-flag"});
  CHECK_THAT(r.err, Catch::Contains("--no-such-flag"));
}

TEST_CASE("An unsupported --format exits 2", "[cli]") {
  const CommandResult r = ExpectUserError({"config", "--format", "xml"});
  CHECK_THAT(r.err, Catch::Contains("xml"));
}

TEST_CASE("The --version flag prints the version and exits 0", "[cli][e2e]") {
  const CommandResult r = testing::RunShardtraceBinary({"--version"});
  INFO(Describe({"--version"}, r));
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains(SHARDTRACE_VERSION));
  for (const char* revision : {"313890777", "e591f30", "0.2.5"})
    CHECK_THAT(r.out, Catch::Contains(revision));
}

TEST_CASE("The --help flag exits 0 and lists every subcommand", "[cli]") {
  const CommandResult r = RunShardtrace({"--help"});
  INFO(Describe({"--help"}, r));
  CHECK(r.status == 0);
  for (const char* command : {"config", "explain", "trace", "dump", "check"}) {
    INFO(command);
    CHECK(std::regex_search(r.out, std::regex(std::string(R"((^|\n)\s+)") + command + R"(\b)")));
  }
}

TEST_CASE("The -o flag writes the output to the file instead of stdout", "[cli][e2e]") {
  TempDir dir;
  const fs::path file = dir / "out.json";
  std::vector<std::string> args = kExplainArgs;
  args.insert(args.end(), {"--format", "json"});
  const CommandResult to_stdout = testing::RunShardtraceBinary(args);
  REQUIRE(to_stdout.status == 0);
  CHECK(to_stdout.out == RunShardtrace(args).out);  // the binary prints what RunCli writes
  args.insert(args.end(), {"-o", file.string()});
  const CommandResult r = testing::RunShardtraceBinary(args);
  INFO(Describe(args, r));
  CHECK(r.status == 0);
  CHECK(r.out.empty());
  REQUIRE(fs::exists(file));
  CHECK(ReadFile(file) == to_stdout.out);
  // Nothing else (no leftover temp file) in the directory.
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("The -o flag keeps the old file's mode, writes through a symlink, and '-' is stdout",
          "[cli]") {
  TempDir dir;
  std::vector<std::string> args = kExplainArgs;
  const CommandResult to_stdout = RunShardtrace(args);
  REQUIRE(to_stdout.status == 0);

  const fs::path file = dir / "private.txt";
  std::ofstream(file) << "old";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  const fs::path link = dir / "link.txt";
  fs::create_symlink(file, link);

  std::vector<std::string> via_link = args;
  via_link.insert(via_link.end(), {"-o", link.string()});
  const CommandResult r = RunShardtrace(via_link);
  INFO(Describe(via_link, r));
  CHECK(r.status == 0);
  CHECK(fs::is_symlink(link));  // the link survives; the file it names is replaced
  CHECK(ReadFile(file) == to_stdout.out);
  CHECK(fs::status(file).permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(dir.Entries().size() == 2);

  std::vector<std::string> dash = args;
  dash.insert(dash.end(), {"-o", "-"});
  const CommandResult d = RunShardtrace(dash);
  CHECK(d.status == 0);
  CHECK(d.out == to_stdout.out);
  CHECK_FALSE(fs::exists("-"));
}

TEST_CASE("A failing command with -o leaves no file behind", "[cli]") {
  TempDir dir;
  const fs::path file = dir / "out.txt";
  ExpectUserError({"config", "ici_expert_parallelism=3", "--devices", "8", "-o", file.string()});
  CHECK_FALSE(fs::exists(file));
  CHECK(fs::is_empty(dir.path()));
  ExpectUserError({"explain", "--axes", "exp,exp", "--devices", "8", "-o", file.string()});
  CHECK(fs::is_empty(dir.path()));
}

}  // namespace
}  // namespace shardtrace

namespace shardtrace {
namespace {

using testing::CommandResult;

}  // namespace

TEST_CASE("The numeric budget counts the BSEH activation only on the dense dropless path",
          "[cli]") {
  // E=64 experts, K=2, B=4 S=256 on 4 devices: dense dropless computes "BSM,EMH -> BSEH"
  // (16777216 floats); sparse_matmul never does (its routed rows are B*S*K), and its run holds
  // about 6 MiB per device. The sparse run used to be refused for that activation.
  const std::vector<std::string> args = {"trace",
                                         "base_emb_dim=64",
                                         "base_mlp_dim=256",
                                         "base_moe_mlp_dim=256",
                                         "num_experts=64",
                                         "num_experts_per_tok=2",
                                         "max_target_length=256",
                                         "per_device_batch_size=1",
                                         "decoder_block=mixtral",
                                         "ici_expert_parallelism=4",
                                         "--devices",
                                         "4",
                                         "--numeric",
                                         "--quiet",
                                         "--max-memory",
                                         "0.25"};
  const CommandResult sparse = RunShardtrace(args);
  INFO(sparse.err);
  CHECK(sparse.status == 0);
  CHECK_THAT(sparse.out, Catch::Contains("path   sparse_matmul/ragged_all_to_all"));
  std::vector<std::string> dense = args;
  dense.push_back("sparse_matmul=false");
  CHECK_THAT(ExpectUserError(dense).err,
             Catch::Contains("largest: a [B,S,E,H] activation, 16777216 floats"));
}

TEST_CASE("Impossible MoE runs are one-line errors with exit status 2", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {{"trace", "model_name=mixtral-8x7b", "--numeric"},
       "the budget is 2048 MiB (--max-memory GIB raises it)"},
      {{"trace", "num_experts=8", "num_experts_per_tok=2", "base_moe_mlp_dim=16", "base_mlp_dim=16",
        "base_emb_dim=16", "max_target_length=8", "per_device_batch_size=1",
        "use_random_routing=true", "--numeric"},
       "use_random_routing"},
      {{"trace", "model_name=mixtral-8x7b", "ici_expert_parallelism=3", "--devices", "3"},
       "not divisible by the expert-parallel size 3"},
      {{"trace", "--devices", "0"}, "expected a device count from 1 to 1048576, found '0'"},
      {{"explain", "--axes", ""}, "--axes"},
      {{"trace"}, "no MoE layers"},
      {{"trace", "model_name=mixtral-8x7b", "--block", "shared"}, "no shared experts"},
      {{"trace", "--golden", "/nonexistent/case"}, "/nonexistent/case/config.yml"},
      {{"check", "/tmp"}, "config.yml"},
  };
  for (const Case& c : cases) {
    const CommandResult r = ExpectUserError(c.args);
    CHECK_THAT(r.err, Catch::Contains(c.mentions));
  }
}

TEST_CASE("A warning about the user's file is printed once per command", "[cli]") {
  // render traces its config a dozen times (the knobs, the variant table, the reduced run) and
  // diff twice or more: each load parses the file again, and the repeated-key warning used to
  // be printed 18 times by render and 4 times by diff.
  const TempDir dir;
  const std::string config = dir.Write(
      "dup.yml",
      "base_config: \"" + testing::SourcePath("testdata/maxtext-moe-models/configs/base.yml") +
          "\"\nmodel_name: mixtral-8x7b\nici_expert_parallelism: 2\nici_expert_parallelism: 4\n");
  const std::string warning = "shardtrace: warning: " + config +
                              ":4: key 'ici_expert_parallelism' repeats the one on line 3; the "
                              "later value is used, as MaxText's loader does\n";
  const std::vector<std::vector<std::string>> commands = {
      {"render", config, "--devices", "8", "-o", dir.File("page.md")},
      {"diff", config, "--devices", "8", "--a", "sparse_matmul=false"},
      {"render", config, "--devices", "8", "-o", dir.File("page.md")},  // the next command warns
  };
  for (const std::vector<std::string>& args : commands) {
    const CommandResult r = RunShardtrace(args);
    INFO(Describe(args, r));
    CHECK(r.status == (args[0] == "diff" ? 1 : 0));
    CHECK(r.err == warning);
  }
}

TEST_CASE("A golden case's config.yml warnings are printed once by check and trace --golden",
          "[cli]") {
  // The case's keys arrive as overrides (config/override_file.h): its own parse warnings ride
  // with the run (RunRequest::case_config) to the command's one print.
  const TempDir dir;
  const std::string golden = testing::SourcePath("testdata/goldens/sparse_ep2_mixtral");
  const std::string config =
      dir.Write("case/config.yml", testing::ReadFile(golden + "/config.yml") + "num_experts: 8\n");
  std::filesystem::copy_file(golden + "/tensors.npz", dir.File("case/tensors.npz"));
  const std::string warning = "shardtrace: warning: " + config +
                              ":25: key 'num_experts' repeats the one on line 12; the later "
                              "value is used, as MaxText's loader does\n";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"check", dir.File("case"), dir.File("case"), "--quiet"},
        std::vector<std::string>{"trace", "--golden", dir.File("case"), "--quiet"}}) {
    const CommandResult r = RunShardtrace(args);
    INFO(Describe(args, r));
    CHECK(r.status == 0);
    CHECK(r.err == warning);
  }
}

TEST_CASE("The binary exits 2 with one error line on stderr for bad input", "[cli][e2e]") {
  const std::vector<std::string> args = {"trace", "model_name=mixtral-8x7b", "--block", "shared"};
  const CommandResult r = testing::RunShardtraceBinary(args);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == testing::RunShardtrace(args).err);
  CHECK_THAT(r.err,
             Catch::StartsWith("shardtrace: error: ") && Catch::Contains("no shared experts"));
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

TEST_CASE("check exits 1 when a golden case does not match", "[cli][e2e]") {
  const CommandResult r = testing::RunShardtraceBinary(
      {"check", testing::SourcePath("testdata/goldens/dense_dropless_mixtral"),
       "capacity_factor=0.5", "sparse_matmul=false"});
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Catch::Contains("FAIL") && Catch::Contains("0 passed, 1 failed"));
}

}  // namespace shardtrace
