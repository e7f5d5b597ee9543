#include "run/run_request.h"

#include "config/run_inputs.h"

namespace shardtrace {

RunRequest SymbolicRequest(std::vector<std::string> args, std::optional<int64_t> devices,
                           Block block) {
  RunRequest request;
  request.args = std::move(args);
  request.devices = devices;
  request.block = block;
  return request;
}

RunRequest WithOverrides(RunRequest request, const std::vector<std::string>& more) {
  request.args = WithOverrides(std::move(request.args), more);
  return request;
}

}  // namespace shardtrace
