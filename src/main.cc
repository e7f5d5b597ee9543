// shardtrace: trace, check and compare how tensors and their shardings flow through
// MaxText's Mixture-of-Experts layers. All logic lives in the library; see cli/cli.h.
#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) { return shardtrace::RunCli(argc, argv, std::cout, std::cerr); }
