#include "model/layouts.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "util/checked.h"
#include "util/error.h"

namespace shardtrace {

std::string_view MaxTextLayoutsText();  // embedded maxtext_layouts.json

namespace {

// The derived key MaxText reads where the layout names the base_* key it derives it from.
std::string DerivedKey(const std::string& key) {
  static constexpr std::pair<std::string_view, std::string_view> kDerived[] = {
      {"base_emb_dim", "emb_dim"},
      {"base_mlp_dim", "mlp_dim"},
      {"base_moe_mlp_dim", "moe_mlp_dim"},
      {"base_num_query_heads", "num_query_heads"},
      {"base_num_kv_heads", "num_kv_heads"},
      {"base_num_decoder_layers", "num_decoder_layers"},
  };
  for (const auto& [base, derived] : kDerived) {
    if (key == base) return std::string(derived);
  }
  return key;
}

// A recursive-descent evaluator for the layout's dim expressions: integers, config keys,
// + - * / and parentheses (what export_layouts.py writes).
class DimParser {
 public:
  DimParser(std::string_view text, const Config& config, const std::string& what)
      : text_(text), config_(config), what_(what) {}

  int64_t Parse() {
    const int64_t v = Sum();
    if (pos_ != text_.size()) Bad();
    return v;
  }

 private:
  int64_t Sum() {
    int64_t v = Product();
    while (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) {
      const char op = text_[pos_++];
      const int64_t rhs = Product();
      v = op == '+' ? CheckedAdd(v, rhs, what_) : CheckedAdd(v, -rhs, what_);
    }
    return v;
  }
  int64_t Product() {
    int64_t v = Atom();
    while (pos_ < text_.size() && (text_[pos_] == '*' || text_[pos_] == '/')) {
      const char op = text_[pos_++];
      const int64_t rhs = Atom();
      if (op == '*') {
        v = CheckedMul(v, rhs, what_);
      } else {
        if (rhs == 0) Fail("{}: {} divides by zero with this config", what_, text_);
        // The exporter found the dim a whole quotient on both probes; one that is not whole
        // here is a model MaxText builds otherwise (qwen3-next at 6 layers: one block of 4
        // scanned and the other 2 in a remainder block), which the layout does not describe.
        if (v % rhs != 0) {
          Fail(
              "{}: {} is {} / {} with this config, not a whole number: MaxText builds the model "
              "otherwise than its recorded layout (the layers past the last whole block go to a "
              "remainder block), which fit does not model",
              what_, text_, v, rhs);
        }
        v /= rhs;
      }
    }
    return v;
  }
  int64_t Atom() {
    if (pos_ < text_.size() && text_[pos_] == '(') {
      ++pos_;
      const int64_t v = Sum();
      if (pos_ >= text_.size() || text_[pos_] != ')') Bad();
      ++pos_;
      return v;
    }
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '_')) {
      ++pos_;
    }
    if (start == pos_) Bad();
    const std::string token(text_.substr(start, pos_ - start));
    if (std::isdigit(static_cast<unsigned char>(token[0]))) return std::stoll(token);
    return config_.Int(DerivedKey(token));
  }
  [[noreturn]] void Bad() const {
    Fail("internal: layout expression '{}' of {} does not parse", text_, what_);
  }

  std::string_view text_;
  const Config& config_;
  const std::string& what_;
  size_t pos_ = 0;
};

// What a parameter is part of, from its path and logical axes: experts carry 'exp', the
// router is the experts' block's `gate`, attention carries a heads axis (or is the attention
// module's, like gpt-oss's sinks), a dense MLP carries 'mlp'. Model files name their modules
// differently (MoeBlock_0, GptOssMlp, self_attention, GptOssAttention), so names alone do not
// decide.
ParamRole RoleOf(const std::string& path, const LogicalAxes& axes) {
  std::string lower = path;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto has = [&](std::string_view part) { return lower.find(part) != std::string::npos; };
  const auto axis = [&](std::string_view name) {
    return std::any_of(axes.begin(), axes.end(), [&](const auto& a) { return a && *a == name; });
  };
  if (has("token_embedder")) return ParamRole::kEmbedding;
  if (has("logits_dense")) return ParamRole::kOutputHead;
  if (has("norm/scale") || has("norm/bias")) return ParamRole::kNorm;
  if (has("shared_expert")) return ParamRole::kSharedExperts;
  if (axis("exp") || has("moeblock") || has("/gate/")) return ParamRole::kMoe;
  // Qwen3-Next's gated delta net: its fused projections, conv and decay parameters.
  if (has("attention") && (has("in_proj_qkvz") || has("in_proj_ba") || has("conv1d") ||
                           has("a_log") || has("dt_bias") || has("out_proj/"))) {
    return ParamRole::kLinearAttention;
  }
  if (has("attention") || has("attn") || axis("heads") || axis("q_heads") || axis("kv_heads") ||
      axis("q_lora") || axis("kv_lora")) {
    return ParamRole::kAttention;
  }
  if (has("mlp") || axis("mlp")) return ParamRole::kMlp;
  return ParamRole::kOther;
}

std::string PythonValue(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// An enum's repr (DecoderBlockType.DEEPSEEK) compared with the config's 'deepseek'.
std::string Normalized(std::string text) {
  if (const size_t dot = text.rfind('.'); dot != std::string::npos && text.find('[') == std::string::npos &&
                                          !text.empty() && std::isalpha(static_cast<unsigned char>(text[0]))) {
    text = text.substr(dot + 1);
  }
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string ConfigStructural(const Config& config, const std::string& key) {
  if (key.size() > 2 && key.substr(key.size() - 2) == ">0") {
    const std::string base = key.substr(0, key.size() - 2);
    return config.Int(DerivedKey(base)) > 0 ? "True" : "False";
  }
  const ConfigValue& v = config.Get(key);
  if (v.type == ConfigValue::Type::kBool) return v.b ? "True" : "False";
  if (v.type == ConfigValue::Type::kString) return v.s;
  return v.ToString();
}

bool ConfigHas(const Config& config, const std::string& key) {
  if (key.size() > 2 && key.substr(key.size() - 2) == ">0") {
    return config.Has(DerivedKey(key.substr(0, key.size() - 2)));
  }
  return config.Has(key);
}

// Each parameter's stack (its innermost layer axis) and loop (its outermost). The nesting is
// read from the parameters whose axes name every dim, in the order the scans stack them
// ("layers" before "local_layers"); a parameter with fewer axes takes it from them.
void AssignStacks(std::vector<ParamLayout>& params) {
  std::map<std::string, size_t> depth;
  for (const ParamLayout& p : params) {
    if (!p.axes_complete) continue;
    size_t d = 0;
    for (const auto& a : p.axes) {
      if (!IsLayerAxis(a)) continue;
      depth[*a] = std::max(depth[*a], d++);
    }
  }
  for (ParamLayout& p : params) {
    for (const auto& a : p.axes) {
      if (!IsLayerAxis(a)) continue;
      const size_t d = depth.count(*a) ? depth.at(*a) : 0;
      if (p.stack.empty() || d > depth[p.stack]) p.stack = *a;
      if (p.loop.empty() || d < depth[p.loop]) p.loop = *a;
    }
  }
}

}  // namespace

bool IsLayerAxis(const std::optional<std::string>& axis) {
  return axis && axis->size() >= 6 && axis->substr(axis->size() - 6) == "layers";
}

const ParamLayout& ModelLayout::Find(const std::string& path) const {
  const auto it = std::find_if(params.begin(), params.end(),
                               [&](const ParamLayout& p) { return p.path == path; });
  SHARDTRACE_CHECK(it != params.end());
  return *it;
}

std::string ToString(ParamRole role) {
  switch (role) {
    case ParamRole::kEmbedding: return "embedding";
    case ParamRole::kOutputHead: return "output head";
    case ParamRole::kNorm: return "norms";
    case ParamRole::kAttention: return "attention";
    case ParamRole::kLinearAttention:
      return "linear attention";
    case ParamRole::kMoe: return "routed experts";
    case ParamRole::kSharedExperts: return "shared experts";
    case ParamRole::kMlp: return "dense MLP";
    case ParamRole::kOther: return "other";
  }
  return "other";
}

LayoutTable LayoutTable::Embedded() {
  LayoutTable table;
  const nlohmann::json all = nlohmann::json::parse(MaxTextLayoutsText());
  for (const auto& [model, record] : all.items()) {
    Recorded& r = table.models_[model];
    for (const auto& p : record.at("problems")) r.problems.push_back(p.get<std::string>());
    if (!r.problems.empty()) continue;  // refused by name; its dims may be unexplained (null)
    ModelLayout& layout = r.layout;
    layout.model_name = model;
    layout.decoder_block = record.at("decoder_block").get<std::string>();
    for (const auto& [key, value] : record.at("structural").items()) {
      layout.structural.emplace_back(key, PythonValue(value));
    }
    for (const auto& p : record.at("params")) {
      ParamLayout param;
      param.path = p.at("path").get<std::string>();
      for (const auto& d : p.at("dims")) {
        param.dims.push_back(d.is_string() ? d.get<std::string>() : std::to_string(d.get<int64_t>()));
      }
      for (const auto& a : p.at("axes")) {
        param.axes.push_back(a.is_null() ? std::nullopt
                                         : std::optional<std::string>(a.get<std::string>()));
      }
      param.axes_complete = param.axes.size() == param.dims.size();
      param.dtype = p.at("dtype").get<std::string>();
      param.trainable = p.value("trainable", true);
      param.role = RoleOf(param.path, param.axes);
      layout.params.push_back(std::move(param));
    }
    AssignStacks(layout.params);
  }
  return table;
}

std::vector<std::string> LayoutTable::Models() const {
  std::vector<std::string> names;
  for (const auto& [model, record] : models_) {
    if (record.problems.empty()) names.push_back(model);
  }
  return names;
}

ModelLayout LayoutTable::For(const Config& config) const {
  const std::string model = config.Str("model_name");
  const auto it = models_.find(model);
  if (it != models_.end() && !it->second.problems.empty()) {
    Fail("model_name '{}': fit does not model this model: export_layouts.py could not explain "
         "every dimension of its MaxText layout by config keys ({}, and {} more)",
         model, it->second.problems.front(), it->second.problems.size() - 1);
  }
  if (it == models_.end()) {
    Fail("model_name '{}': fit knows the whole-model layout of MaxText 0.2.5's MoE model files "
         "only ({}); a dense or other model is not modelled",
         model, fmt::join(Models(), ", "));
  }
  ModelLayout layout = it->second.layout;
  layout.structural.clear();
  for (const auto& [key, recorded] : it->second.layout.structural) {
    if (!ConfigHas(config, key)) continue;  // an older base.yml without the feature
    const std::string mine = ConfigStructural(config, key);
    if (Normalized(recorded) != Normalized(mine)) {
      Fail("{} is {} but fit's layout of model_name '{}' was recorded at {} = {} (it changes "
           "which parameters exist); fit models that model file's structure only",
           key, mine, model, key, recorded);
    }
    layout.structural.emplace_back(key, recorded);
  }
  return layout;
}

int64_t EvaluateDim(const std::string& expression, const Config& config, const std::string& what) {
  const int64_t v = DimParser(expression, config, what).Parse();
  if (v < 1) {
    Fail("{}: its dim {} is {} with this config, expected a positive size", what, expression, v);
  }
  return v;
}

}  // namespace shardtrace
