// The trees of sorted rows around the experts (emit/expert_rows_tree.h) on small hand-built
// captures, exact text; the real runs' arrays are checked in sparse_row_captures_test.cc and
// the pages in visualization_test.cc.
#include "emit/expert_rows_tree.h"

#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "pages/visualization_pages.h"

namespace shardtrace {
namespace {

Array Ints(Shape shape, std::vector<float> values) {
  return Array::FromData(std::move(shape), DType::kInt32, std::move(values));
}

std::string Page(const std::string& file) {
  for (const VisualizationPage& v : VisualizationPages())
    if (v.file == file) return RenderPage(v).text;
  FAIL("no page " << file);
  return "";
}

// The code block of the page section headed `heading`, split per "Device d (" paragraph.
std::vector<std::string> DeviceBlocks(const std::string& page, const std::string& heading) {
  const size_t at = page.find("## " + heading + "\n");
  REQUIRE(at != std::string::npos);
  const size_t open = page.find("```text\n", at), close = page.find("\n```", open + 8);
  const std::string block = page.substr(open, close - open);
  std::vector<std::string> out;
  for (size_t d = block.find("\nDevice "); d != std::string::npos;) {
    const size_t next = block.find("\nDevice ", d + 1);
    out.push_back(block.substr(d, next == std::string::npos ? next : next - d));
    d = next;
  }
  return out;
}

// Every (device.)token-choice item of `text` ("D1.T3 k=0" with `devices`, else "T3 k=0").
std::multiset<std::string> Items(const std::string& text, bool devices) {
  const std::regex item(devices ? "D[0-9]+\\.T[0-9]+ k=[0-9]+"
                                : "(^|[^.0-9A-Z])(T[0-9]+ k=[0-9]+)");
  std::multiset<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), item); it != std::sregex_iterator();
       ++it)
    out.insert(devices ? it->str() : (*it)[2].str());
  return out;
}

}  // namespace

// Two devices of one expert group, one token each, K=2, E=4, L=2: D0.T0 chose experts 0
// and 2, D1.T0 experts 3 and 1. Device 1 rolls by 2, so experts 2-3 sort first.
TEST_CASE("ring rows tree names rolled ids, real experts and gathered tokens", "[viz]") {
  const Array sel = Ints({2, 4}, {0, 3, 1, 2, 1, 2, 0, 3});
  const Array rolled = Ints({2, 4}, {0, 1, 2, 3, 0, 1, 2, 3});
  const Array roll = Ints({2}, {0, 2});
  const Array sizes = Ints({2, 2}, {1, 1, 1, 1});
  const Array sources = Ints({2, 2, 2}, {0, 0, 1, 0, 0, 0, 1, 0});
  CHECK(RingRowsTree(sel, rolled, roll, sizes, sources, 4, 2) ==
        "sorted_inputs per device under the ring of experts as Device → local/masked rows → "
        "rolled id → rows\n"
        "(of [D=2] x [R=4,M] all-gathered rows; K=2, E=4, L=2; rolled id = (expert - "
        "roll_to_expert_id) mod E;\n"
        "Dd.Tt = device d's token t):\n"
        "\n"
        "Device 0 (roll_to_expert_id 0: experts 0-1 local; tokens of devices 0, 1; 4 rows, 2 "
        "local):\n"
        "├── rows 0-1: computed here (sum(group_sizes) = 2)\n"
        "│   ├── rolled 0 = expert 0: row 0 ← D0.T0 k=0\n"
        "│   └── rolled 1 = expert 1: row 1 ← D1.T0 k=1\n"
        "└── rows 2-3: masked to 0 (other devices' experts)\n"
        "    ├── rolled 2 = expert 2: row 2 ← D0.T0 k=1\n"
        "    └── rolled 3 = expert 3: row 3 ← D1.T0 k=0\n"
        "\n"
        "Device 1 (roll_to_expert_id 2: experts 2-3 local; tokens of devices 0, 1; 4 rows, 2 "
        "local):\n"
        "├── rows 0-1: computed here (sum(group_sizes) = 2)\n"
        "│   ├── rolled 0 = expert 2: row 0 ← D0.T0 k=1\n"
        "│   └── rolled 1 = expert 3: row 1 ← D1.T0 k=0\n"
        "└── rows 2-3: masked to 0 (other devices' experts)\n"
        "    ├── rolled 2 = expert 0: row 2 ← D0.T0 k=0\n"
        "    └── rolled 3 = expert 1: row 3 ← D1.T0 k=1\n");
  CHECK_THROWS_WITH(
      RingRowsTree(sel, rolled, roll, sizes, Ints({2, 3, 2}, std::vector<float>(12)), 4, 2),
      Catch::Contains("token_sources [2,2,2], got [2,3,2]"));
}

// Two devices, K=1, E=4, L=2. Device 0's tokens chose experts 3 and 0, device 1's 1 and 2;
// the forward exchange filled two of four buffer rows on each device, and the numeric run
// sorted three of them (the fourth is the buffer's untouched tail).
TEST_CASE("local_permute tree and the return tree invert the forward exchange", "[viz]") {
  const Array sel = Ints({2, 2}, {1, 0, 0, 1});
  const Array experts = Ints({2, 2}, {0, 3, 1, 2});
  const Array forward = Ints({2, 4}, {0, 2, -1, -1, 1, 3, -1, -1});
  const Array order = Ints({2, 3}, {0, 1, 2, 1, 0, 2});
  const Array ids = Ints({2, 3}, {0, 1, 1, 0, 1, 1});
  const Array sizes = Ints({2, 2}, {1, 1, 1, 1});
  const Array shard = Ints({2}, {0, 1});
  CHECK(LocalPermuteTree(order, ids, sizes, shard, forward, sel, experts, 1) ==
        "sorted_inputs after local_permute per device as Device → local expert → sorted rows ← "
        "buffer rows\n"
        "(of [D=2] x [U=4,M]; L=2; Dd.Tt = device d's token t):\n"
        "\n"
        "Device 0 (expert shard 0: experts 0-1; buffer of 4 rows, 2 received):\n"
        "├── local expert 0 = expert 0 (group size 1)\n"
        "│   └── row 0 ← buffer row 0 (device 0): D0.T1 k=0\n"
        "├── local expert 1 = expert 1 (group size 1)\n"
        "│   └── row 1 ← buffer row 1 (device 1): D1.T0 k=0\n"
        "└── rows 2-3 ← buffer rows 2-3: empty, in no group\n"
        "\n"
        "Device 1 (expert shard 1: experts 2-3; buffer of 4 rows, 2 received):\n"
        "├── local expert 0 = expert 2 (group size 1)\n"
        "│   └── row 0 ← buffer row 1 (device 1): D1.T1 k=0\n"
        "├── local expert 1 = expert 3 (group size 1)\n"
        "│   └── row 1 ← buffer row 0 (device 0): D0.T0 k=0\n"
        "└── rows 2-3 ← buffer rows 2-3: empty, in no group\n");
  // Each device's sorted row r comes back from the buffer row that received it (the
  // senders' operand is their 3-row buffer); device 1's row 1 got nothing here.
  const Array back = Ints({2, 2}, {0, 3, 1, -1});
  CHECK(ReturnRowsTree(back, 3, "buffer row", sel, experts, 1) ==
        "intermediate_output per device after the return ragged_all_to_all as Device → its "
        "sorted rows ← sender → expert\n"
        "(of [D=2] x [R=2,M]; rows in the device's own permute order, T = its token b*S+s):\n"
        "\n"
        "Device 0 (2 rows, 2 returned):\n"
        "├── row 0 ← device 0, its buffer row 0\n"
        "│   └── expert 0: T1 k=0\n"
        "└── row 1 ← device 1, its buffer row 0\n"
        "    └── expert 3: T0 k=0\n"
        "\n"
        "Device 1 (2 rows, 1 returned):\n"
        "├── row 0 ← device 0, its buffer row 1\n"
        "│   └── expert 1: T0 k=0\n"
        "└── row 1: nothing returned\n");
  CHECK_THROWS_WITH(LocalPermuteTree(order, Ints({2, 3}, {0, 1, 1, 0, 5, 1}), sizes, shard, forward,
                                     sel, experts, 1),
                    Catch::Contains("local id 5"));
}

// Decode: one token chose experts 1 (k=0) and 2 (k=1); both devices hold the same sorted
// rows. Device 0 (experts 0-1) keeps row 0, device 1 (experts 2-3) row 1; the other row gets
// the out-of-range id L=2.
TEST_CASE("local selection tree keeps a shard's experts and names the masked rows", "[viz]") {
  const Array sel = Ints({2, 2}, {0, 1, 0, 1});
  const Array experts = Ints({2, 2}, {1, 2, 1, 2});
  const Array order = Ints({2, 2}, {0, 1, 1, 0});
  const Array ids = Ints({2, 2}, {1, 2, 0, 2});
  const Array sizes = Ints({2, 2}, {0, 1, 1, 0});
  const Array shard = Ints({2}, {0, 1});
  CHECK(LocalSelectionTree(order, ids, sizes, shard, sel, experts, 2) ==
        "sorted_inputs after local_permute(is_offset=True) per device as Device → local expert "
        "→ rows ← sorted rows\n"
        "(of [D=2] x [R=2,M]; K=2, L=2; T = the token b*S+s, the same rows on every device):\n"
        "\n"
        "Device 0 (expert shard 0: experts 0-1; keeps 1 of 2 rows):\n"
        "├── local expert 0 = expert 0: no rows\n"
        "├── local expert 1 = expert 1: row 0 ← sorted row 0: T0 k=0\n"
        "└── id 2 (other shards' experts, masked out): row 1 ← sorted row 1\n"
        "    └── expert 2: T0 k=1\n"
        "\n"
        "Device 1 (expert shard 1: experts 2-3; keeps 1 of 2 rows):\n"
        "├── local expert 0 = expert 2: row 0 ← sorted row 1: T0 k=1\n"
        "├── local expert 1 = expert 3: no rows\n"
        "└── id 2 (other shards' experts, masked out): row 1 ← sorted row 0\n"
        "    └── expert 1: T0 k=0\n");
  // On a big mesh the first devices are drawn and the rest counted; idle experts fold.
  // (experts 4 and 5: no shard keeps a row)
  const std::string first = LocalSelectionTree(
      Ints({2, 2}, {0, 1, 0, 1}), Ints({2, 2}, {2, 2, 2, 2}), Ints({2, 2}, {0, 0, 0, 0}), shard,
      sel, Ints({2, 2}, {4, 5, 4, 5}), 2, {.max_devices = 1});
  CHECK(first.find("├── local experts 0-1 = experts 0-1: no rows\n"
                   "└── id 2 (other shards' experts, masked out): rows 0-1 ← sorted rows 0-1\n"
                   "    ├── expert 4: T0 k=0\n"
                   "    └── expert 5: T0 k=1\n") != std::string::npos);
  CHECK(first.find("Device 1") == std::string::npos);
  CHECK(first.find("\n(device 1 not shown: the first 1 of 2 devices are drawn.)\n") !=
        std::string::npos);
  CHECK_THROWS_WITH(LocalSelectionTree(order, ids, sizes, shard, sel, experts, 0),
                    Catch::Contains("top_k 0"));
}

// A local expert fed by more than 4 senders (a big mesh) lists its rows as one leaf, each
// row's sender in its D prefix. Six devices with one expert each, every token on expert 0.
TEST_CASE("local_permute tree folds many senders into one leaf", "[viz]") {
  const Array zeros = Ints({6, 1}, std::vector<float>(6, 0.0f));
  std::vector<float> forward(36, -1.0f), order(36), sizes(6, 0.0f), shard(6);
  for (int64_t d = 0; d < 6; ++d) {
    forward[d] = static_cast<float>(d);  // device 0's buffer row d <- device d's sorted row 0
    shard[d] = static_cast<float>(d);
    for (int64_t u = 0; u < 6; ++u) order[d * 6 + u] = static_cast<float>(u);
  }
  sizes[0] = 6;
  const std::string text = LocalPermuteTree(
      Ints({6, 6}, order), Ints({6, 6}, std::vector<float>(36, 0.0f)), Ints({6, 1}, sizes),
      Ints({6}, shard), Ints({6, 6}, forward), zeros, zeros, 1, {.max_devices = 1});
  CHECK(text ==
        "sorted_inputs after local_permute per device as Device → local expert → sorted rows ← "
        "buffer rows\n"
        "(of [D=6] x [U=6,M]; L=1; Dd.Tt = device d's token t):\n"
        "\n"
        "Device 0 (expert shard 0: expert 0; buffer of 6 rows, 6 received):\n"
        "└── local expert 0 = expert 0 (group size 6)\n"
        "    └── rows 0-5 ← buffer rows 0-5 (6 senders): D0.T0 k=0, D1.T0 k=0, D2.T0 k=0, D3.T0 "
        "k=0, D4.T0 k=0, D5.T0 k=0\n"
        "\n"
        "(devices 1-5 not shown: the first 1 of 6 devices are drawn.)\n");
}

// Rows back from more than 8 runs (a big mesh): one line per run. Ten devices, one row each,
// device 0's row r computed by device r at its buffer row 0.
TEST_CASE("return rows tree puts each run on one line when there are many", "[viz]") {
  std::vector<float> back(10 * 10, -1.0f), sel(10 * 10), experts(10 * 10);
  for (int64_t r = 0; r < 10; ++r) {
    back[r] = static_cast<float>(r * 5);  // senders' operands have 5 rows
    sel[r] = static_cast<float>(r);
    experts[r] = static_cast<float>(r);
  }
  const std::string text =
      ReturnRowsTree(Ints({10, 10}, back), 5, "buffer row", Ints({10, 10}, sel),
                     Ints({10, 10}, experts), 1, {.max_devices = 1});
  CHECK(text.find("Device 0 (10 rows, 10 returned):\n"
                  "├── row 0 ← device 0, its buffer row 0: expert 0: T0 k=0\n"
                  "├── row 1 ← device 1, its buffer row 0: expert 1: T1 k=0\n") !=
        std::string::npos);
  CHECK(text.find("└── row 9 ← device 9, its buffer row 0: expert 9: T9 k=0\n\n(devices 1-9 not "
                  "shown") != std::string::npos);
}

// A leaf longer than a code line wraps under the tree's bars, every line within 120 columns.
TEST_CASE("expert row trees wrap long leaves under the tree prefix", "[viz]") {
  const int64_t r = 64;  // one device, 64 tokens all on expert 1, K=1
  std::vector<float> sel(r), experts(r, 1), back(r);
  for (int64_t i = 0; i < r; ++i) sel[i] = back[i] = static_cast<float>(i);
  const std::string text = ReturnRowsTree(Ints({1, r}, back), r, "local row", Ints({1, r}, sel),
                                          Ints({1, r}, experts), 1);
  CHECK(text.find("└── rows 0-63 ← device 0, its local rows 0-63\n"
                  "    └── expert 1: T0 k=0, T1 k=0,") != std::string::npos);
  CHECK(text.find("\n            T") != std::string::npos);  // continuation: bars + 4 spaces
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    INFO(line);
    // (code points: the tree characters are one column each)
    size_t columns = 0;
    for (const char c : line) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    CHECK(columns <= 120);
    start = end + 1;
  }
}

// The trees on the committed pages, read as text: the ring's computed rows are every
// (device, token, choice) of the mesh once; local_permute orders exactly the rows the
// receive buffer holds; the return tree gives each device back exactly its sorted rows.
TEST_CASE("the pages' expert row trees account for every routed row", "[viz]") {
  {
    const std::vector<std::string> devices = DeviceBlocks(
        Page("moe_ring_of_experts.md"), "Tree: sorted_inputs (ring of experts, per device)");
    REQUIRE(devices.size() == 4);
    std::multiset<std::string> computed, masked;
    for (const std::string& d : devices) {
      const size_t split = d.find("masked to 0");
      REQUIRE(split != std::string::npos);
      for (const std::string& i : Items(d.substr(0, split), true)) computed.insert(i);
      for (const std::string& i : Items(d.substr(split), true)) masked.insert(i);
    }
    // 4 devices x 4 tokens x K=2, each computed once; each group of 2 sees its 16 rows twice.
    CHECK(computed.size() == 32);
    CHECK(std::set<std::string>(computed.begin(), computed.end()).size() == 32);
    CHECK(computed.size() + masked.size() == 64);
    for (const std::string& i : masked) CHECK(computed.count(i) == 1);
  }
  const std::string ragged = Page("moe_sparse_ragged_all_to_all.md");
  const std::vector<std::string> buffer =
      DeviceBlocks(ragged, "Tree: x (the ragged_all_to_all receive buffer, per device)");
  const std::vector<std::string> local =
      DeviceBlocks(ragged, "Tree: sorted_inputs after local_permute (per device)");
  const std::vector<std::string> sorted = DeviceBlocks(ragged, "Tree: sorted_inputs (per device)");
  const std::vector<std::string> back =
      DeviceBlocks(ragged, "Tree: intermediate_output (the return ragged_all_to_all, per device)");
  REQUIRE(buffer.size() == 4);
  REQUIRE(local.size() == 4);
  REQUIRE(back.size() == 4);
  REQUIRE(sorted.size() == 4);
  size_t received = 0;
  for (size_t d = 0; d < 4; ++d) {
    INFO("device " << d);
    const std::multiset<std::string> rows = Items(local[d], true);
    CHECK(rows == Items(buffer[d], true));
    CHECK(std::set<std::string>(rows.begin(), rows.end()).size() == rows.size());
    received += rows.size();
    CHECK(Items(back[d], false) == Items(sorted[d], false));
    CHECK(Items(back[d], false).size() == 8);
  }
  CHECK(received == 32);
}

}  // namespace shardtrace
