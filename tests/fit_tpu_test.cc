// `fit` through the CLI against the whole training steps the TPU compiler compiled
// (testdata/maxtext-tpu/steps/*.json, tools/maxtext_oracle/export_tpu_step.py): MaxText 0.2.5's
// own train step, compiled by libtpu for the fixture's compile_topology. Held to issue 34's
// bounds: the verdict equals the compiler's on every fixture (no false fits),
// argument_size_in_bytes within 3% and temp_size_in_bytes within 10% on at least 90% of them
// and within 20% on all, every parameter's shape, sharding and bytes equal to MaxText's. A
// fixture may be listed in testdata/maxtext-tpu/fit_differences.json with the reason it
// misses a bound ('verdict', 'argument 3%', 'temp 10%', 'temp 20%', 'host temp 3%', or 'refused':
// fit refuses a config MaxText compiles, with one line naming the key); the listing is checked too
// (a listed fixture that meets the bound fails, so the file stays true).
// SHARDTRACE_PRINT_FIT_TABLE=1 prints the comparison.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "model/whole_step.h"
#include "step_compare.h"
#include "test_support.h"
#include "tpu_fixtures.h"

namespace shardtrace::testing {
namespace {

using nlohmann::json;

double RelativeError(int64_t mine, int64_t theirs) {
  return theirs == 0 ? 0.0 : static_cast<double>(mine - theirs) / static_cast<double>(theirs);
}

// "['model']['decoder']['layers']['MoeBlock_0']['wi_0'].value" -> "decoder/layers/MoeBlock_0/wi_0"
std::string LayoutPath(const std::string& state_path) {
  std::string out;
  const std::regex part(R"(\['([^']*)'\])");
  bool first = true;
  for (auto it = std::sregex_iterator(state_path.begin(), state_path.end(), part);
       it != std::sregex_iterator(); ++it) {
    if (first) {
      first = false;  // 'model'
      continue;
    }
    if (!out.empty()) out += "/";
    out += (*it)[1].str();
  }
  return out;
}

TEST_CASE("fit against the TPU compiler's whole training steps", "[fit][tpu]") {
  const std::vector<Fixture> fixtures = TpuFixtures();
  REQUIRE(fixtures.size() >= 3);
  const json diffs = Differences();
  const bool print = std::getenv("SHARDTRACE_PRINT_FIT_TABLE") != nullptr;
  int compiled = 0, listed_over_10 = 0;
  for (const Fixture& f : fixtures) {
    INFO("fixture " << f.name);
    const CommandResult r = RunShardtrace(FitArgs(f.tpu));
    if (Listed(diffs, f.name, "refused")) {
      // A config MaxText compiles and fit refuses, by name (listed with the reason).
      CHECK(r.status == 2);
      CHECK(r.err.rfind("shardtrace: error: ", 0) == 0);
      continue;
    }
    REQUIRE(r.err.empty() == (r.status == 0));
    REQUIRE(r.status == 0);
    const json fit = json::parse(r.out);
    const bool tpu_fits = f.tpu.at("status") == "compiled";
    if (!Listed(diffs, f.name, "verdict")) {
      CHECK(fit.at("fits").get<bool>() == tpu_fits);
    } else {
      CHECK(fit.at("fits").get<bool>() != tpu_fits);
    }
    CHECK(fit.at("devices") == f.tpu.at("devices"));
    // fit's peak against the compiler's (its peak, or the HBM its OOM says it needed) stays in
    // the band the verdict's "near the line" names, and a wrong verdict is flagged near it.
    const int64_t tpu_peak = tpu_fits ? f.tpu.at("memory").at("peak_memory_in_bytes").get<int64_t>()
                                      : f.tpu.at("oom").value("used_bytes", int64_t{0});
    const double hbm = fit.at("hbm_bytes").get<double>();
    const double band = (fit.at("peak_memory_in_bytes").get<double>() - tpu_peak) / hbm;
    CHECK((band >= -kFitPeakUnderHbm && band <= kFitPeakOverHbm) !=
          Listed(diffs, f.name, "peak band"));
    if (Listed(diffs, f.name, "verdict") && !Listed(diffs, f.name, "peak band")) {
      CHECK(fit.at("near_line").get<bool>());
    }
    // A false fit outside the band is flagged by what fit does not model there
    // (model/unmodelled.h); so is a temp past 20%, unless the miss is the compiler heap's
    // packing alone: fit's temp within 10% of the bytes the compiler's own buffers cover at its
    // fullest moment (peak_buffers), the rest its heap's holes, which fit never counts.
    if (Listed(diffs, f.name, "verdict") && fit.at("fits").get<bool>() && !fit.at("near_line")) {
      CHECK(!fit.at("unmodelled").empty());
    }
    if (Listed(diffs, f.name, "temp 20%") && fit.at("unmodelled").empty()) {
      const json& peak = f.tpu.at("peak_buffers");
      CHECK(std::abs(RelativeError(fit["temp_size_in_bytes"], peak.at("unique_temp_bytes"))) <=
            0.10);
    }
    if (!fit.at("unmodelled").empty()) {
      // And the text's first line, the answer, says it beside the verdict.
      const CommandResult t = RunShardtrace(FitTextArgs(f.tpu));
      CHECK_THAT(t.out.substr(0, t.out.find('\n')),
                 Catch::Contains("not modelled, compile to be sure"));
    }
    if (!tpu_fits) {
      if (print) {
        std::cout << fmt::format("{:40s} TPU: does not fit (used {} of {}), fit peak {}\n", f.name,
                                 f.tpu["oom"].value("used_bytes", int64_t{0}),
                                 f.tpu["oom"].value("capacity_bytes", int64_t{0}),
                                 fit["peak_memory_in_bytes"].get<int64_t>());
      }
      continue;
    }
    ++compiled;
    const json& mem = f.tpu.at("memory");
    const double arg = RelativeError(fit["argument_size_in_bytes"], mem["argument_size_in_bytes"]);
    const double temp = RelativeError(fit["temp_size_in_bytes"], mem["temp_size_in_bytes"]);
    if (print) {
      // Beside temp: fit's temp against the bytes the compiler's buffers cover at its fullest
      // moment, and the heap's packing over those (peak_buffers, docs/fit.md).
      std::string live;
      const json& peak = f.tpu.value("peak_buffers", json());
      if (peak.is_object() && peak.contains("heap_bytes")) {
        const int64_t covered = peak.at("unique_temp_bytes");
        live = fmt::format("  live {:+6.1f}%  packing {:5.1f}%",
                           100 * RelativeError(fit["temp_size_in_bytes"], covered),
                           100 * RelativeError(peak.at("heap_bytes"), covered));
      }
      std::cout << fmt::format("{:40s} argument {:+6.1f}%  temp {:+6.1f}%{}\n", f.name, 100 * arg,
                               100 * temp, live);
    }
    CHECK((std::abs(arg) <= 0.03) != Listed(diffs, f.name, "argument 3%"));
    // Tighter than the issue's 3%: with the state in TPU's tiled layouts (model/tpu_tiles.h)
    // the arguments are the compiler's to 0.1% (gpt-oss's 2880-wide dims are 3.3% over their
    // elements at full depth).
    CHECK(std::abs(arg) <= 0.001);
    // What the policy offloads is the compiler's host_temp_size_in_bytes: each decoder layer's
    // input (and the other names) a layer, times the layers.
    const int64_t host = mem.value("host_temp_size_in_bytes", int64_t{0});
    const bool host_close =
        host == 0 ? fit["host_temp_size_in_bytes"].get<int64_t>() == 0
                  : std::abs(RelativeError(fit["host_temp_size_in_bytes"], host)) <= 0.03;
    CHECK(host_close != Listed(diffs, f.name, "host temp 3%"));
    CHECK((std::abs(temp) <= 0.20) != Listed(diffs, f.name, "temp 20%"));
    CHECK((std::abs(temp) <= 0.10) != Listed(diffs, f.name, "temp 10%"));
    listed_over_10 += Listed(diffs, f.name, "temp 10%");

    // Every parameter exactly as MaxText shards it.
    std::map<std::string, json> params;
    for (const auto& p : fit.at("params")) params[p.at("path").get<std::string>()] = p;
    int checked = 0;
    for (const auto& s : f.tpu.at("state")) {
      const std::string path = s.at("path").get<std::string>();
      if (path.rfind("['model']", 0) != 0 || path.find("['rngs']") != std::string::npos) continue;
      const std::string mine = LayoutPath(path);
      INFO("parameter " << mine);
      REQUIRE(params.count(mine) == 1);
      CHECK(params[mine].at("shape") == s.at("shape"));
      CHECK(params[mine].at("spec").get<std::string>() == s.at("spec").get<std::string>());
      CHECK(params[mine].at("bytes_per_device") == s.at("device_bytes"));
      ++checked;
    }
    CHECK(checked == static_cast<int>(params.size()));
    // The parameters' tile padding is what their HBM bytes add to their elements, which are
    // MaxText's own (above).
    int64_t elements_bytes = 0;
    for (const auto& [path, p] : params) elements_bytes += p.at("bytes_per_device").get<int64_t>();
    CHECK(fit.at("components").at("parameters").get<int64_t>() - elements_bytes ==
          fit.at("parameter_tile_padding_bytes").get<int64_t>());
  }
  // Every fixture not listed is within 10% of the compiler's temporaries. Issue 34 asks for
  // 90% of them; how many miss today is stated in the differences file (and docs/fit.md), and
  // held to it here, so neither an improvement nor a regression goes unnoticed.
  CHECK(fmt::format("{} of {}", listed_over_10, compiled) ==
        diffs.at("temp_10_percent_missed").get<std::string>());
}

// Issue 35's bound on plan: every config it calls a fit among the compiled fixtures compiled.
// Each fixture as a space of one (its mesh's four searched ICI axes, remat policy and matmul
// pinned to what MaxText resolved; its batch is its own): plan's verdict is fit's, and a "fits"
// is a compile that did not run out of HBM.
TEST_CASE("the differences file quotes fit's verdicts as fit prints them", "[fit][tpu]") {
  // A listing's "fit" text that quotes a verdict ("does not fit by 5.2 GiB", "fits with ... to
  // spare") is fit's first line today, so the file cannot go stale while fit moves.
  const json diffs = Differences();
  std::map<std::string, json> tpu;
  for (const Fixture& f : TpuFixtures()) tpu[f.name] = f.tpu;
  const std::regex verdict(R"((does not fit by|fits with) [0-9.]+ [KMGT]?i?B)");
  int quoted = 0;
  for (const json& d : diffs.at("differences")) {
    const std::string text = d.at("fit");
    std::smatch m;
    if (!std::regex_search(text, m, verdict)) continue;
    INFO("fixture " << d.at("fixture").get<std::string>() << ", bound " << d.at("bound"));
    REQUIRE(tpu.count(d.at("fixture")) == 1);
    const CommandResult r = RunShardtrace(FitTextArgs(tpu.at(d.at("fixture"))));
    CHECK_THAT(r.out.substr(0, r.out.find('\n')), Catch::Contains(m.str()));
    ++quoted;
  }
  CHECK(quoted >= 4);
}

TEST_CASE("plan calls a compiled fixture a fit only where the TPU compiler compiled it", "[plan][tpu]") {
  int planned = 0;
  for (const Fixture& f : TpuFixtures()) {
    INFO("fixture " << f.name);
    std::vector<std::string> args = FitTextArgs(f.tpu);
    args.front() = "plan";
    const json& mesh = f.tpu.at("mesh");
    const json& resolved = f.tpu.at("resolved");
    for (const char* axis : {"data", "fsdp", "tensor", "expert"}) {
      int64_t dcn = 1;
      for (const std::string& a : args) {
        const std::string key = fmt::format("dcn_{}_parallelism=", axis);
        if (a.rfind(key, 0) == 0) dcn = std::stoll(a.substr(key.size()));
      }
      args.push_back(fmt::format("ici_{}_parallelism={}", axis, mesh.at(axis).get<int64_t>() / dcn));
    }
    args.push_back("remat_policy=" + resolved.at("remat_policy").get<std::string>());
    args.push_back(std::string("sparse_matmul=") + (resolved.at("sparse_matmul").get<bool>() ? "true" : "false"));
    for (const char* flag : {"--format", "json", "--quiet"}) args.push_back(flag);
    const CommandResult r = RunShardtrace(args);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const json plan = json::parse(r.out);
    REQUIRE(plan.at("evaluated") == 1);
    if (!plan.at("excluded").empty()) continue;  // fit refuses it (listed in fit_differences.json)
    ++planned;
    std::vector<std::string> fit_args = FitArgs(f.tpu);
    const CommandResult fit = RunShardtrace(fit_args);
    REQUIRE(fit.status == 0);
    const bool plan_fits = plan.at("fitting").get<int>() == 1;
    CHECK(plan_fits == json::parse(fit.out).at("fits").get<bool>());
    // A false fit only where fit's is (listed, with the reason), and flagged in the output:
    // near the line, or by a note naming what fit does not model there.
    if (plan_fits && f.tpu.contains("oom") && !f.tpu.at("oom").is_null()) {
      CHECK(Listed(Differences(), f.name, "verdict"));
      bool named = false;
      const json fitted = json::parse(fit.out);
      for (const json& n : fitted.at("notes")) {
        named |= n.get<std::string>().rfind("not modelled: the policy offloads", 0) == 0;
      }
      CHECK(named == (fitted.at("unmodelled") == json::array({"offload_staging"})));
      const json& row = plan.at("configs").at(0);
      CHECK(row.at("unmodelled") == fitted.at("unmodelled"));
      CHECK((row.at("near_line").get<bool>() || !row.at("unmodelled").empty()));
    }
  }
  CHECK(planned >= 30);
}

// fit's two rules read from the compiler's buffers (docs/fit.md, "The backward's phases"),
// checked against the buffers each fixture records live at TPU's peak (peak_buffers,
// tools/maxtext_oracle/tpu_peak_buffers.py):
//  - the output head's backward leaves one buffer live through the layers' backward (the
//    logits, their cotangent or the head's gradient): where the compiler's peak is inside a
//    layer's backward, it holds such a buffer exactly when fit keeps the logits there, and one
//    no larger than fit's (or the fixture is listed with bound 'peak logits' and its reason);
//  - a one-layer stack is inlined and keeps its forward-gathered weights: each of its expert
//    arrays large enough to be recorded is a buffer of exactly fit's gathered bytes at the
//    compiler's peak (the forward's gathered copy, or later in the backward that copy's whole
//    gradient, as in gpt-oss-120b, whose reduction TPU does not fuse), or the fixture is listed
//    with bound 'inlined gathers' and its reason.
TEST_CASE("fit's kept logits and inlined gathered experts are buffers at TPU's peak",
          "[fit][tpu]") {
  const json diffs = Differences();
  int read = 0, with_logits = 0, with_inlined = 0;
  for (const Fixture& f : TpuFixtures()) {
    if (!f.tpu.contains("peak_buffers") || f.tpu.at("peak_buffers").is_null()) continue;
    if (Listed(diffs, f.name, "refused") || Listed(diffs, f.name, "verdict")) continue;
    INFO("fixture " << f.name);
    ++read;
    const CommandResult r = RunShardtrace(FitArgs(f.tpu));
    REQUIRE(r.status == 0);
    const json fit = json::parse(r.out);
    const json& buffers = f.tpu.at("peak_buffers").at("buffers");
    REQUIRE(!buffers.empty());
    bool in_layer_backward = false;
    // A buffer's array bytes, from its shape: peak_buffers records the buffer TPU pads to (8, 128)
    // tiles (gpt-oss-20b's bf16[32,1,2880,2880]: 517.5 MiB for an array of 506.25 MiB). fit
    // counts the logits as arrays, and a gathered expert kernel as the gmm takes it, its minor
    // dim on whole lanes: that one is compared with the buffer's own bytes.
    const auto array_bytes = [](const json& b) { return step_compare::ResultBytes(b.at("shape")); };
    int64_t head = 0, smallest = array_bytes(buffers.back());
    std::vector<int64_t> gathered;  // buffers of the forward or the backward (not compiler-made)
    for (const json& b : buffers) {
      const std::string source = b.at("source");
      const int64_t bytes = array_bytes(b);
      // A layer's backward proper, not the rematerialized forward an inlined layer runs beside
      // the logits' backward (llama4-17b-16e at sequence 8192 on v5p-8).
      in_layer_backward |= source.rfind("transpose(jvp())/while/body", 0) == 0 &&
                           source.find("rematted_computation") == std::string::npos;
      // The logits (their dot, or the reductions fused with it), their cotangent (the
      // transpose of the cast to float32, of the scale where the logits are float32, or of
      // gemma4's soft cap's division) or the head's gradient (the transpose of its dot).
      if (source == "jvp()/dot_general" || source == "jvp()/reduce_sum" ||
          source == "transpose(jvp())/convert_element_type" ||
          source == "transpose(jvp())/mul" || source == "transpose(jvp())/div" ||
          source == "transpose(jvp())/dot_general") {
        head = std::max(head, bytes);
      }
      if (b.at("phase") != "other") gathered.push_back(b.at("bytes").get<int64_t>());
      smallest = std::min(smallest, bytes);
    }
    const int64_t kept = fit.at("components").at("logits_kept");
    if (in_layer_backward) {
      // A fixture listed with bound 'peak logits' must miss it (the list stays true).
      const bool agrees = (head > 0) == (kept > 0) && head <= kept;
      CHECK(agrees != Listed(diffs, f.name, "peak logits"));
      with_logits += agrees && kept > 0;
    }
    std::map<std::string, std::string> roles;
    for (const json& p : fit.at("params")) roles[p.at("path")] = p.at("role");
    int unmatched = 0;
    for (const json& stack : fit.at("stacks")) {
      if (!stack.at("inlined").get<bool>()) continue;
      for (const json& g : stack.at("gathered")) {
        const int64_t bytes = g.at("bytes");
        if (roles[g.at("path")] != "routed experts" || bytes < smallest) continue;
        const auto match = std::find(gathered.begin(), gathered.end(), bytes);
        if (match != gathered.end()) {
          gathered.erase(match);
        } else {
          ++unmatched;
        }
        ++with_inlined;
      }
    }
    // A fixture listed with bound 'inlined gathers' must miss it (the list stays true).
    CHECK((unmatched == 0) != Listed(diffs, f.name, "inlined gathers"));
  }
  CHECK(read >= 25);
  CHECK(with_logits >= 8);
  CHECK(with_inlined >= 12);
}

// The collectives per step, by kind, against those the compiled step's HLO runs (the fixture's
// "collectives": each op with its replica-group size, result bytes, count and the trip count of
// the loop it runs in). Bytes are sent per device: an all-gather sends result x (g-1)/g; TPU
// writes each gradient's reduce-scatter as an all-reduce whose only user slices the device's
// share (all-reduce-scatter fusion), counted as that reduce-scatter, result x (g-1)/g; a
// reduce-scatter sends result x (g-1); an all-to-all result x (g-1)/g. Bounds: all-gathers and
// reductions within 10% of TPU's bytes ('collectives gather', 'collectives reduce'), the
// all-to-alls equal in count and within 1% in bytes ('collectives all-to-all'), the ragged
// all-to-alls equal in count ('collectives ragged': their bytes are the send buffer fit counts
// and the worst-case receive buffer the HLO allocates, not comparable). TPU's
// collective-permutes (its own decomposition of gathers and reductions on some topologies)
// are not compared; a fixture whose sums miss for them is listed with that reason. Between
// slices TPU writes no collective but megascale host transfers (the fixture's dcn_* ops, each
// result what a device sends its peer slice once): fit's collectives between slices (`dcn`)
// are held to their sum within 25% ('collectives dcn'), the rest to the HLO's collectives.
TEST_CASE("fit's collectives per step are the compiled step's", "[fit][tpu]") {
  const json diffs = Differences();
  const bool print = std::getenv("SHARDTRACE_PRINT_FIT_TABLE") != nullptr;
  int compared = 0;
  for (const Fixture& f : TpuFixtures()) {
    if (f.tpu.at("status") != "compiled" || Listed(diffs, f.name, "refused")) continue;
    INFO("fixture " << f.name);
    const CommandResult r = RunShardtrace(FitArgs(f.tpu));
    REQUIRE(r.status == 0);
    const json fit = json::parse(r.out);
    std::map<std::string, double> tpu_bytes, fit_bytes;
    std::map<std::string, int64_t> tpu_count, fit_count;
    for (const json& c : f.tpu.at("collectives")) {
      const std::string op = c.at("op");
      const double g = c.at("group_size").get<double>();
      const int64_t n = c.at("count").get<int64_t>() * c.at("trip_count").get<int64_t>();
      const double result = c.at("result_bytes").get<double>();
      if (g < 2) continue;
      // Between slices: what each megascale send carries, once.
      if (op.rfind("dcn_", 0) == 0) {
        tpu_bytes["dcn"] += result * static_cast<double>(n);
        tpu_count["dcn"] += n;
        continue;
      }
      const auto add = [&](const std::string& kind, double sent) {
        tpu_bytes[kind] += sent * static_cast<double>(n);
        tpu_count[kind] += n;
      };
      if (op == "all_gather") add("gather", result * (g - 1) / g);
      if (op == "all_reduce") add("reduce", result * (g - 1) / g);
      if (op == "reduce_scatter") add("reduce", result * (g - 1));
      if (op == "all_to_all") add("all-to-all", result * (g - 1) / g);
      if (op == "ragged_all_to_all") add("ragged", 0);
    }
    for (const json& c : fit.at("collectives")) {
      const std::string kind = c.at("kind");
      const std::string mine = kind == "all_gather"                       ? "gather"
                               : kind == "psum_scatter" || kind == "psum" ? "reduce"
                               : kind == "all_to_all"                     ? "all-to-all"
                               : kind == "ragged_all_to_all"              ? "ragged"
                                                                          : kind;
      if (c.at("dcn").get<bool>()) {  // between slices: against the HLO's megascale sends
        fit_bytes["dcn"] += c.at("bytes_per_device").get<double>();
        continue;
      }
      fit_bytes[mine] += c.at("bytes_per_device").get<double>();
      fit_count[mine] += c.at("count").get<int64_t>();
    }
    ++compared;
    const auto within = [&](const std::string& kind, double bound) {
      const double theirs = tpu_bytes[kind], mine = fit_bytes[kind];
      if (theirs == 0) return mine == 0;
      return std::abs(mine - theirs) <= bound * theirs;
    };
    const bool gather = within("gather", 0.10);
    const bool reduce = within("reduce", 0.10);
    const bool all_to_all =
        fit_count["all-to-all"] == tpu_count["all-to-all"] && within("all-to-all", 0.01);
    const bool ragged = fit_count["ragged"] == tpu_count["ragged"];
    const bool dcn = within("dcn", 0.25);
    if (print) {
      std::cout << fmt::format(
          "{:40s} gather {:+6.1f}%  reduce {:+6.1f}%  all-to-all {}/{}  ragged {}/{}  dcn "
          "{:+6.1f}%\n",
          f.name,
          100 * RelativeError(static_cast<int64_t>(fit_bytes["gather"]),
                              static_cast<int64_t>(tpu_bytes["gather"])),
          100 * RelativeError(static_cast<int64_t>(fit_bytes["reduce"]),
                              static_cast<int64_t>(tpu_bytes["reduce"])),
          fit_count["all-to-all"], tpu_count["all-to-all"], fit_count["ragged"],
          tpu_count["ragged"],
          100 * RelativeError(static_cast<int64_t>(fit_bytes["dcn"]),
                              static_cast<int64_t>(tpu_bytes["dcn"])));
    }
    CHECK(gather != Listed(diffs, f.name, "collectives gather"));
    CHECK(reduce != Listed(diffs, f.name, "collectives reduce"));
    CHECK(all_to_all != Listed(diffs, f.name, "collectives all-to-all"));
    CHECK(ragged != Listed(diffs, f.name, "collectives ragged"));
    CHECK(dcn != Listed(diffs, f.name, "collectives dcn"));
  }
  CHECK(compared >= 25);
}

}  // namespace
}  // namespace shardtrace::testing
