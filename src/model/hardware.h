// The hardware a whole training step is fitted to: the chip table `fit` and `plan` read
// (src/model/hardware_table.yml, embedded: per device HBM, bandwidths and peak FLOP/s, each
// row citing its source; `--hardware FILE` replaces it) and MaxText's own table of compile
// topologies (src/model/maxtext_topologies.json, recorded from MaxText 0.2.5's
// accelerator_to_spec_map by tools/maxtext_oracle/export_topologies.py), which says how many
// devices `compile_topology=v5p-256` is (128: one megacore device per chip) and on which
// chip. A Target is the result: the chip, devices per slice and slices.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace shardtrace {

// One row of the chip table; figures per JAX device.
struct Chip {
  std::string name;  // "v5p", "h100", ...
  int64_t hbm_bytes = 0;
  double hbm_bandwidth = 0;       // bytes/s
  double peak_bf16_flops = 0;     // FLOP/s
  double ici_link_bandwidth = 0;  // bytes/s per link and direction
  int64_t ici_links = 0;
  int64_t torus = 0;  // torus dimensions; 0: a switch (GPUs)
  double dcn_bandwidth_per_host = 0;
  int64_t devices_per_host = 1;
  // The share of the peak MaxText's matmuls reach (fitted to one published run; 1: the peak).
  double matmul_efficiency = 1.0;
  // The share of hbm_bytes past which the compiler's scheduler trades latency for memory
  // (0: none modelled).
  double scheduler_memory_limit = 0;
  // TPU: the compiler relayouts the MoE combine's [tokens, k, emb] rows in the activation
  // dtype and widens them inside their reader (tpu7x), not widened to float32 first (false).
  bool narrow_combine_rows = false;
  // TPU: the compiler runs the dense dispatch's dropless expert einsums of the backward as
  // windowed einsums over a gather group of 8 or 16 on whole lane tiles (v6e), never gathering
  // the kernels whole; false: it gathers them (v5p).
  bool windowed_dense_backward = false;
  std::string source;
};

// One compile_topology of MaxText's table.
struct CompileTopology {
  std::string platform;  // "tpu" or "gpu"
  int64_t devices_per_slice = 0;
};

struct HardwareTable {
  std::string source_name;  // "embedded hardware_table.yml" or the user's file
  std::map<std::string, Chip, std::less<>> chips;
  std::map<std::string, std::string, std::less<>> topology_chips;  // topology prefix -> chip
  // MaxText's own topology table (embedded; a --hardware file does not replace it).
  std::map<std::string, CompileTopology, std::less<>> topologies;
  std::string topologies_source;  // where export_topologies.py read it
};

// A chip table a user gives (`--hardware FILE`): its text and where it came from. Empty text:
// the embedded table.
struct HardwareFile {
  std::string text;
  std::string source;
};

// Parses a chip table (the embedded one when `text` is empty). Throws Error naming the file
// and the field on a missing or non-positive figure.
HardwareTable LoadHardwareTable(std::string_view text = {}, std::string_view source_name = {});

// Where a step is fitted.
struct Target {
  std::string topology;  // MaxText's compile_topology ("v5p-256"); empty for --devices
  std::string platform;  // "tpu" or "gpu"
  Chip chip;
  int64_t devices_per_slice = 0;
  int64_t num_slices = 1;
  int64_t hbm_bytes = 0;  // per device: the chip's, or --hbm
  int64_t devices() const { return devices_per_slice * num_slices; }
  std::string ToString() const;  // "v5p-256 (128 devices, TPU v5p, 95.0 GiB HBM each)"
};

// compile_topology as MaxText's table names it, times `num_slices` slices. Throws Error naming
// compile_topology (with the nearest names) when MaxText's table lacks it.
Target ResolveTopology(const HardwareTable& table, std::string_view topology, int64_t num_slices);

// `--devices N --hbm GIB` with no topology (GPUs, or any machine): `chip` names a table row
// for the bandwidths when given (e.g. "h100"), else only the HBM is known.
Target DevicesTarget(const HardwareTable& table, int64_t devices, double hbm_gib,
                     std::optional<std::string> chip);

}  // namespace shardtrace
