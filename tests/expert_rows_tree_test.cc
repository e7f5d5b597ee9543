// The trees of sorted rows around the experts (emit/expert_rows_tree.h) on small hand-built
// captures, exact text; the real runs' arrays are checked in sparse_row_captures_test.cc and
// the pages in visualization_test.cc.
#include "emit/expert_rows_tree.h"

#include <catch2/catch.hpp>
#include <string>

namespace shardtrace {
namespace {

Array Ints(Shape shape, std::vector<float> values) {
  return Array::FromData(std::move(shape), DType::kInt32, std::move(values));
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
  CHECK_THROWS_WITH(LocalSelectionTree(order, ids, sizes, shard, sel, experts, 0),
                    Catch::Contains("top_k 0"));
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

}  // namespace shardtrace
