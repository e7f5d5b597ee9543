#include "check/sharding_dump.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "config/case_config.h"
#include "io/input_file.h"
#include "util/checked.h"
#include "util/error.h"

namespace shardtrace {
namespace {

using Json = nlohmann::json;

// Deeper than any sharding_info file nests (an entry's mesh shape is at depth 4); the bound
// keeps a hostile file's nesting from costing stack or memory anywhere downstream.
constexpr int kMaxJsonDepth = 64;

// Through ReadInputFile: a directory, FIFO or /dev/zero in the dump's place is one error line,
// never an unbounded read or an escaping stream exception. nlohmann's parser stops at a NUL
// byte as if the text ended there, so a NUL (and whatever follows it) is refused first.
Json ReadJson(const std::filesystem::path& path) {
  const std::string text = ReadInputFile(path.string(), "MaxText sharding_info file");
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    Fail("{}: expected JSON text (a MaxText sharding_info file), found a NUL byte at byte {}",
         path.string(), nul);
  const Json::parser_callback_t depth_bound = [&path](int depth, Json::parse_event_t,
                                                      Json&) -> bool {
    if (depth > kMaxJsonDepth)
      Fail("{}: expected JSON nested at most {} deep (a MaxText sharding_info file), found deeper",
           path.string(), kMaxJsonDepth);
    return true;
  };
  try {
    Json json = Json::parse(text, depth_bound);
    if (!json.is_object())
      Fail("{}: expected a JSON object (a MaxText sharding_info file), found {}", path.string(),
           json.type_name());
    return json;
  } catch (const Json::parse_error& e) {
    Fail("{}: expected JSON (a MaxText sharding_info file), found a syntax error at byte {}",
         path.string(), e.byte);
  } catch (const Json::exception& e) {
    // A number too large for a double (id 406): the file's fault, never quoted (it may be
    // megabytes of digits).
    Fail("{}: expected JSON numbers a double can hold (a MaxText sharding_info file), found {}",
         path.string(), e.id == 406 ? "one that overflows" : "an invalid value");
  }
}

// What a JSON value is, for a message: a number as written, anything else by its type (a
// string or list may be megabytes, or nested thousands deep).
std::string Describe(const Json& value) {
  return value.is_number() || value.is_boolean() || value.is_null()
             ? value.dump()
             : std::string(value.type_name());
}

// A non-negative JSON integer: nlohmann would wrap 2^64-1 to -1 in get<int64_t>().
int64_t ReadCount(const Json& value, int64_t min, const std::string& file, const std::string& key,
                  std::string_view what) {
  const bool fits = value.is_number_unsigned()
                        ? value.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                        : value.is_number_integer();
  if (!fits || value.get<int64_t>() < min)
    Fail("{}: '{}': expected {} to be an integer >= {}, found {}", file, key, what, min,
         Describe(value));
  return value.get<int64_t>();
}

// ".params/['params']/['decoder']/['moe_layers']/['wi_0']" -> {"decoder", "moe_layers", "wi_0"}.
std::vector<std::string> ParamModules(const std::string& key) {
  std::vector<std::string> modules;
  size_t pos = 0;
  while ((pos = key.find("['", pos)) != std::string::npos) {
    const size_t end = key.find("']", pos + 2);
    if (end == std::string::npos) break;
    modules.push_back(key.substr(pos + 2, end - pos - 2));
    pos = end + 2;
  }
  if (!modules.empty() && modules.front() == "params") modules.erase(modules.begin());
  return modules;
}

Shape ReadShape(const Json& value, const std::string& file, const std::string& key) {
  if (!value.is_array()) Fail("{}: '{}': expected \"shape\" to be a list of ints", file, key);
  Shape shape;
  for (const Json& d : value) shape.push_back(ReadCount(d, 0, file, key, "each \"shape\" dim"));
  return shape;
}

const Json& Field(const Json& entry, const char* name, const std::string& file,
                  const std::string& key) {
  if (!entry.is_object() || !entry.contains(name))
    Fail("{}: '{}': expected a \"{}\" field", file, key, name);
  return entry.at(name);
}

// named_shardings.json's "mesh": axis_names and the size of each, the names distinct (jax's
// Mesh refuses a repeated axis name).
std::vector<MeshAxis> ReadMesh(const Json& mesh, const std::string& file, const std::string& key) {
  const Json& names = Field(mesh, "axis_names", file, key);
  const Json& sizes = Field(mesh, "shape", file, key);
  if (!names.is_array())
    Fail("{}: '{}': expected mesh axis_names to be a list, found {}", file, key, Describe(names));
  std::vector<MeshAxis> axes;
  for (const Json& name : names) {
    if (!name.is_string() || !sizes.is_object() || !sizes.contains(name.get<std::string>()))
      Fail("{}: '{}': mesh axis_names and shape do not match", file, key);
    MeshAxis axis;
    axis.name = name.get<std::string>();
    for (const MeshAxis& seen : axes)
      if (seen.name == axis.name)
        Fail("{}: '{}': expected distinct mesh axis names, found '{}' twice", file, key, axis.name);
    axis.size = axis.ici =
        ReadCount(sizes.at(axis.name), 1, file, key, fmt::format("mesh axis '{}'", axis.name));
    axes.push_back(axis);
  }
  return axes;
}

bool SameMesh(const std::vector<MeshAxis>& a, const std::vector<MeshAxis>& b) {
  return std::equal(
      a.begin(), a.end(), b.begin(), b.end(),
      [](const MeshAxis& x, const MeshAxis& y) { return x.name == y.name && x.size == y.size; });
}

std::string MeshText(const std::vector<MeshAxis>& axes) {
  std::string out;
  for (const MeshAxis& a : axes)
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", a.name, a.size);
  return out;
}

// named_shardings.json: per dim null, "axis" or ["axis", ...].
PartitionSpec ReadNamedSpec(const Json& value, const std::string& file, const std::string& key) {
  if (!value.is_array()) Fail("{}: '{}': expected \"partition_spec\" to be a list", file, key);
  std::vector<PartitionSpec::Entry> entries;
  for (const Json& d : value) {
    if (d.is_null()) {
      entries.emplace_back();
    } else if (d.is_string()) {
      entries.push_back({d.get<std::string>()});
    } else if (d.is_array()) {
      PartitionSpec::Entry entry;
      for (const Json& a : d) {
        if (!a.is_string()) Fail("{}: '{}': expected mesh axis names", file, key);
        entry.push_back(a.get<std::string>());
      }
      entries.push_back(entry);
    } else {
      Fail("{}: '{}': expected null, a mesh axis or a list of mesh axes per dim", file, key);
    }
  }
  return PartitionSpec(entries);
}

// logical_shardings.json: per dim null or a logical axis name.
LogicalAxes ReadLogical(const Json& value, const std::string& file, const std::string& key) {
  if (!value.is_array()) Fail("{}: '{}': expected \"partition_spec\" to be a list", file, key);
  LogicalAxes axes;
  for (const Json& d : value) {
    if (d.is_null())
      axes.push_back(std::nullopt);
    else if (d.is_string())
      axes.push_back(d.get<std::string>());
    else
      Fail("{}: '{}': expected null or a logical axis name per dim", file, key);
  }
  return axes;
}

// Splits "key=value_key2=value2" (or with '-' for '=') into "key=value" overrides. Values
// run to the next '_' and may start with the separator (a negative number: "--1").
std::vector<std::string> ParseOverrideRun(const std::string& text, char separator) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t sep = text.find(separator, pos);
    if (sep == std::string::npos || sep == pos) break;
    size_t value_end = text.find('_', sep + 2);
    if (value_end == std::string::npos) value_end = text.size();
    out.push_back(text.substr(pos, sep - pos) + "=" + text.substr(sep + 1, value_end - sep - 1));
    pos = value_end + 1;
  }
  return out;
}

}  // namespace

ShardingDump ReadShardingDump(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(dir, error))
    Fail(
        "{}: not a directory (expected a MaxText sharding_info directory with "
        "named_shardings.json, logical_shardings.json and input_shardings.json, found {})",
        dir, PathKind(dir));
  ShardingDump dump;
  dump.dir = dir;
  const fs::path named_path = fs::path(dir) / "named_shardings.json";
  const fs::path logical_path = fs::path(dir) / "logical_shardings.json";
  const fs::path input_path = fs::path(dir) / "input_shardings.json";
  const Json named = ReadJson(named_path);
  const Json logical = ReadJson(logical_path);
  const Json input = ReadJson(input_path);
  std::string mesh_key;  // the first entry that carries a mesh

  for (const auto& [key, entry] : named.items()) {
    if (entry.is_object() && entry.contains("mesh")) {
      // One run has one mesh: every entry must carry the same one.
      std::vector<MeshAxis> mesh = ReadMesh(entry.at("mesh"), named_path.string(), key);
      if (mesh_key.empty()) {
        dump.mesh = std::move(mesh);
        mesh_key = key;
      } else if (!SameMesh(mesh, dump.mesh)) {
        Fail("{}: '{}': expected the mesh of '{}' ({}), found another ({})", named_path.string(),
             key, mesh_key, MeshText(dump.mesh), MeshText(mesh));
      }
    }
    if (key.rfind(".params/", 0) != 0) continue;
    DumpParam p;
    p.modules = ParamModules(key);
    p.path = fmt::format("{}", fmt::join(p.modules, "/"));
    p.flax_spec = ReadNamedSpec(Field(entry, "partition_spec", named_path.string(), key),
                                named_path.string(), key);
    if (!logical.contains(key))
      Fail("{}: no entry '{}' (named_shardings.json has it)", logical_path.string(), key);
    const Json& l = logical.at(key);
    p.logical = ReadLogical(Field(l, "partition_spec", logical_path.string(), key),
                            logical_path.string(), key);
    p.shape = ReadShape(Field(l, "shape", logical_path.string(), key), logical_path.string(), key);
    if (p.logical.size() != p.shape.size() || p.flax_spec.rank() != p.shape.size())
      Fail("{}: '{}': logical axes, PartitionSpec and shape have different ranks", dir, key);
    dump.params.push_back(std::move(p));
  }
  if (dump.mesh.empty()) Fail("{}: no entry carries a \"mesh\"", named_path.string());

  const char* kList = "Activation Sharding Dump";
  if (!input.contains(kList) || !input.at(kList).is_array())
    Fail("{}: expected a \"{}\" list", input_path.string(), kList);
  for (const Json& item : input.at(kList)) {
    if (!item.is_object() || item.size() != 1)
      Fail("{}: expected one {{\"name: type\": {{...}}}} object per entry", input_path.string());
    const std::string key = item.begin().key();
    const size_t colon = key.find(": ");
    const Json& value = item.begin().value();
    const Json& la = Field(value, "logic_axes", input_path.string(), key);
    const Json& ps = Field(value, "PartitionSpec", input_path.string(), key);
    if (colon == std::string::npos || !la.is_string() || !ps.is_string())
      Fail("{}: '{}': expected \"name: dtype[shape]\" with string logic_axes and PartitionSpec",
           input_path.string(), key);
    dump.activations.push_back({key.substr(0, colon), key.substr(colon + 2), la.get<std::string>(),
                                ps.get<std::string>()});
  }
  return dump;
}

InferredRun InferRun(const ShardingDump& dump) {
  namespace fs = std::filesystem;
  InferredRun run;
  int64_t devices = 1;
  for (const MeshAxis& a : dump.mesh)
    devices = CheckedMul(devices, a.size, fmt::format("{}: mesh size", dump.dir));
  run.devices = devices;
  fs::path path = fs::path(dump.dir);
  if (path.filename().empty()) path = path.parent_path();
  const std::string name = path.filename().string();
  if (const fs::path beside = path.parent_path() / "config.yml"; IsCaseConfig(beside.string()))
    run.case_config = beside.string();
  if (name.rfind("rule_", 0) == 0) {
    // MaxText's own layout: <model>/<topology>/slice_<n>/rule_<rule>_<key>=<value>_...
    const std::string rest = name.substr(5);
    const size_t us = rest.find('_');
    run.rule = rest.substr(0, us);
    if (us != std::string::npos) run.overrides = ParseOverrideRun(rest.substr(us + 1), '=');
    const fs::path slice = path.parent_path();
    if (slice.filename().string().rfind("slice_", 0) == 0) {
      run.topology = slice.parent_path().filename().string();
      run.model_name = slice.parent_path().parent_path().filename().string();
    }
  } else {
    // The flattened copy: <model>_<topology>_<rule>_<key>-<value>_...
    std::vector<std::string> head;
    size_t pos = 0;
    while (head.size() < 3 && pos <= name.size()) {
      const size_t us = name.find('_', pos);
      head.push_back(name.substr(pos, us == std::string::npos ? std::string::npos : us - pos));
      if (us == std::string::npos) {
        pos = name.size() + 1;
        break;
      }
      pos = us + 1;
    }
    if (head.size() == 3) {
      run.model_name = head[0];
      run.topology = head[1];
      run.rule = head[2];
      if (pos < name.size()) run.overrides = ParseOverrideRun(name.substr(pos), '-');
    }
  }
  return run;
}

std::string DumpMeshString(const ShardingDump& dump) {
  std::vector<MeshAxis> axes;
  for (const MeshAxis& a : dump.mesh)
    if (a.size > 1) axes.push_back(a);
  return Mesh(axes).ToString();
}

}  // namespace shardtrace
