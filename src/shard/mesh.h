// Mesh: the named device mesh MaxText builds from `mesh_axes` and the ici_*/dcn_*
// parallelism keys (maxtext_utils.create_device_mesh). Axis order is mesh_axes order; each
// axis size is ici x dcn. Devices are numbered row-major over that shape (last axis
// fastest), as create_device_mesh reshapes jax.devices() on CPU/GPU. On multi-slice meshes
// create_hybrid_device_mesh places physical devices differently; that only relabels
// devices and changes no sharding, so shardtrace keeps the row-major numbering. Printed XLA-style:
// mesh['fsdp'=4, 'expert'=2] (axes of size 1 omitted; ToFullString lists all).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardtrace {

// The parallelism values a mesh is built from: MaxText's mesh_axes and, per axis, its
// ici_*/dcn_*_parallelism value (-1: the one axis filled with the remaining devices).
// config/mesh_config.h reads them from a Config; the mesh never sees the config.
struct MeshParallelism {
  std::vector<std::string> axes;  // mesh_axes order
  std::vector<int64_t> ici;       // one per axis
  std::vector<int64_t> dcn;       // one per axis
  int64_t num_slices = 1;
};

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  int64_t ici = 1;
  int64_t dcn = 1;
};

class Mesh {
 public:
  // Every device is simulated (numerically, or as per-device blocks), so a mesh larger than
  // any real TPU/GPU system is refused before anything is allocated for it.
  static constexpr int64_t kMaxDevices = int64_t{1} << 20;

  Mesh() = default;
  explicit Mesh(std::vector<MeshAxis> axes);

  // Builds the mesh as MaxText's create_device_mesh does. `devices` is --devices; without
  // it the device count is the product of the explicit ICI values times num_slices (a -1
  // then counts as 1). Throws Error naming the axes and the arithmetic when the mesh is
  // impossible.
  static Mesh Build(const MeshParallelism& parallelism, std::optional<int64_t> devices);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  int64_t num_devices() const;
  int64_t num_slices() const { return num_slices_; }
  // Size of `axis`, 1 when the mesh has no such axis.
  int64_t Size(std::string_view axis) const;
  bool HasAxis(std::string_view axis) const;
  // Product of the sizes of `axes`.
  int64_t Size(const std::vector<std::string>& axes) const;

  // Coordinates of device `id` (one per axis, mesh_axes order) and back.
  std::vector<int64_t> Coords(int64_t device) const;
  int64_t DeviceAt(const std::vector<int64_t>& coords) const;
  // Index of `device` along the combined `axes` (major first), as jax.lax.axis_index
  // computes it for a tuple of axis names.
  int64_t AxisIndex(int64_t device, const std::vector<std::string>& axes) const;
  // Devices that share every coordinate of `device` except along `axes`, ordered by their
  // AxisIndex over `axes`: the participants of a collective over `axes`.
  std::vector<int64_t> Group(int64_t device, const std::vector<std::string>& axes) const;

  std::string ToString() const;      // mesh['fsdp'=4, 'expert'=2]
  std::string ToFullString() const;  // every axis, including size 1

 private:
  std::vector<MeshAxis> axes_;
  int64_t num_slices_ = 1;
};

}  // namespace shardtrace
