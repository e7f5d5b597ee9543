#include "shard/mesh.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/checked.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// Fills the single -1 of `sizes` so that their product is `target`, as MaxText's
// fill_unspecified_mesh_axes does; `what` names the list in errors ("ICI", "DCN").
void FillUnspecified(std::vector<int64_t>& sizes, const std::vector<std::string>& names,
                     int64_t target, std::string_view what, std::string_view target_desc) {
  int unspecified = -1;
  int64_t product = 1;
  std::vector<std::string> explicit_terms;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (unspecified != -1)
        Fail("{} parallelism: both '{}' and '{}' are -1; at most one axis may be -1", what,
             names[unspecified], names[i]);
      unspecified = static_cast<int>(i);
    } else if (sizes[i] <= 0) {
      Fail("{}_{}_parallelism is {}; expected a positive size or -1", what == "ICI" ? "ici" : "dcn",
           names[i], sizes[i]);
    } else {
      product = CheckedMul(product, sizes[i], fmt::format("{} parallelism product", what));
      if (sizes[i] > 1) explicit_terms.push_back(fmt::format("{}={}", names[i], sizes[i]));
    }
  }
  const std::string terms =
      explicit_terms.empty() ? "1" : fmt::format("{}", fmt::join(explicit_terms, " x "));
  if (unspecified != -1) {
    if (target % product != 0)
      Fail("{} parallelism: {} {} is not divisible by {} = {}, so '{}' (-1) cannot be filled", what,
           target, target_desc, terms, product, names[unspecified]);
    sizes[unspecified] = target / product;
    product = target;
  }
  if (product != target)
    Fail(
        "{} parallelism: {} = {} but there are {} {}; set --devices {} or change the *_parallelism "
        "keys",
        what, terms, product, target, target_desc, product);
}

}  // namespace

Mesh::Mesh(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {}

Mesh Mesh::Build(const MeshParallelism& parallelism, std::optional<int64_t> devices) {
  const std::vector<std::string>& names = parallelism.axes;
  std::vector<int64_t> ici = parallelism.ici;
  std::vector<int64_t> dcn = parallelism.dcn;
  SHARDTRACE_CHECK(ici.size() == names.size() && dcn.size() == names.size());
  const int64_t num_slices = parallelism.num_slices > 0 ? parallelism.num_slices : 1;
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (names[i] == names[j])
        Fail("mesh_axes: axis '{}' appears twice (positions {} and {}); expected distinct names",
             names[i], j, i);

  int64_t total = 0;
  if (devices) {
    if (*devices <= 0) Fail("--devices {}: expected a positive device count", *devices);
    total = *devices;
  } else {
    total = num_slices;
    for (const int64_t s : ici) total = CheckedMul(total, s > 0 ? s : 1, "ICI parallelism product");
  }
  if (total > kMaxDevices)
    Fail("mesh of {} devices: at most {} devices are supported (every device is simulated)", total,
         kMaxDevices);
  if (total % num_slices != 0)
    Fail("num_slices {} does not divide the {} devices", num_slices, total);
  const int64_t per_slice = total / num_slices;
  FillUnspecified(ici, names, per_slice, "ICI", "devices per slice");
  if (num_slices == 1) {
    dcn.assign(names.size(), 1);  // single slice: MaxText ignores the DCN keys
  } else {
    FillUnspecified(dcn, names, num_slices, "DCN", "slices");
  }
  std::vector<MeshAxis> axes;
  for (size_t i = 0; i < names.size(); ++i)
    axes.push_back({names[i], CheckedMul(ici[i], dcn[i], names[i] + " axis size (ICI x DCN)"),
                    ici[i], dcn[i]});
  Mesh mesh(std::move(axes));
  mesh.num_slices_ = num_slices;
  return mesh;
}

int64_t Mesh::num_devices() const {
  int64_t n = 1;
  for (const MeshAxis& a : axes_) n = CheckedMul(n, a.size, "mesh device count");
  return n;
}

bool Mesh::HasAxis(std::string_view axis) const {
  for (const MeshAxis& a : axes_)
    if (a.name == axis) return true;
  return false;
}

int64_t Mesh::Size(std::string_view axis) const {
  for (const MeshAxis& a : axes_)
    if (a.name == axis) return a.size;
  return 1;
}

int64_t Mesh::Size(const std::vector<std::string>& axes) const {
  int64_t n = 1;
  for (const std::string& a : axes) n = CheckedMul(n, Size(a), "mesh axes product");
  return n;
}

std::vector<int64_t> Mesh::Coords(int64_t device) const {
  std::vector<int64_t> coords(axes_.size());
  for (int i = static_cast<int>(axes_.size()) - 1; i >= 0; --i) {
    coords[i] = device % axes_[i].size;
    device /= axes_[i].size;
  }
  return coords;
}

int64_t Mesh::DeviceAt(const std::vector<int64_t>& coords) const {
  int64_t device = 0;
  for (size_t i = 0; i < axes_.size(); ++i) device = device * axes_[i].size + coords[i];
  return device;
}

int64_t Mesh::AxisIndex(int64_t device, const std::vector<std::string>& axes) const {
  const std::vector<int64_t> coords = Coords(device);
  int64_t index = 0;
  for (const std::string& name : axes) {
    for (size_t i = 0; i < axes_.size(); ++i)
      if (axes_[i].name == name) index = index * axes_[i].size + coords[i];
  }
  return index;
}

std::vector<int64_t> Mesh::Group(int64_t device, const std::vector<std::string>& axes) const {
  const int64_t n = Size(axes);
  std::vector<int64_t> group(static_cast<size_t>(n));
  const std::vector<int64_t> base = Coords(device);
  for (int64_t k = 0; k < n; ++k) {
    std::vector<int64_t> coords = base;
    int64_t rest = k;
    for (int j = static_cast<int>(axes.size()) - 1; j >= 0; --j) {
      for (size_t i = 0; i < axes_.size(); ++i) {
        if (axes_[i].name != axes[j]) continue;
        coords[i] = rest % axes_[i].size;
        rest /= axes_[i].size;
      }
    }
    group[k] = DeviceAt(coords);
  }
  return group;
}

std::string Mesh::ToString() const {
  std::vector<std::string> parts;
  for (const MeshAxis& a : axes_)
    if (a.size > 1) parts.push_back(fmt::format("'{}'={}", a.name, a.size));
  return fmt::format("mesh[{}]", fmt::join(parts, ", "));
}

std::string Mesh::ToFullString() const {
  std::vector<std::string> parts;
  for (const MeshAxis& a : axes_) parts.push_back(fmt::format("'{}'={}", a.name, a.size));
  return fmt::format("mesh[{}]", fmt::join(parts, ", "));
}

}  // namespace shardtrace
