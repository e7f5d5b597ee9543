// The flags and checks every subcommand shares: the positional CONFIG/key=value arguments,
// --devices, --format, -o, --maxtext-revision, --block and --max-memory, and validators that
// read a number as the text the user typed (CLI11 alone saturates or wraps: --seed -1 would
// become 2^64-1). Each <name>_command.cc adds its own flags with these; RunCli calls
// CheckOutputs once a command is parsed, before any work.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/hardware.h"

namespace shardtrace {

CLI::Validator DeviceCountValidator();
CLI::Validator SeedValidator();
CLI::Validator ThreadsValidator();
CLI::Validator ToleranceValidator();

// --max-memory GIB: a positive number of GiB (fractions allowed), at most 1 TiB.
CLI::Option* AddMaxMemory(CLI::App* cmd, int64_t& budget_bytes);
// --hardware FILE (fit, plan): a chip table of the user's, read as input.
CLI::Option* AddHardware(CLI::App* cmd, std::string& path);
// The file --hardware named, or the embedded table when `path` is empty.
HardwareFile ReadHardwareFile(const std::string& path);

// --block moe|mlp|shared.
CLI::Option* AddBlock(CLI::App* cmd, std::string& block);
// args, --devices, --format (when `formats` is not empty; the first is the default), -o and
// --maxtext-revision.
void AddCommon(CLI::App* cmd, CommonOptions& common, const std::vector<std::string>& formats);

// Every file a command may read, for refusing an -o that names one: the CONFIG files given
// (and the model and custom_mesh_and_rule files beside them), and in each golden case or dump
// directory (`dirs`) its config, arrays and JSON files.
std::vector<std::string> CommandInputs(const std::vector<std::string>& args,
                                       const std::vector<std::string>& dirs);

// Before any work: a --maxtext-revision is known (and joins the args), and -o is writable and
// names none of the command's inputs (its args and the directories `dirs` it reads).
void CheckOutputs(CommonOptions& common, const std::vector<std::string>& dirs);

}  // namespace shardtrace
