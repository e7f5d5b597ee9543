// The per-revision line table (config/moe_lines.h): every statement shardtrace cites has its
// seed lines (the numbers it printed before the table existed, so the seed's pages stay
// byte-identical), lines inside each revision's moe.py, and references that say when a
// revision has no such statement.
#include "config/moe_lines.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

namespace shardtrace {
namespace {

// What src/ cited as `moe.py:NNN` literals (the seed's lines) before the table replaced them.
const std::map<std::string, std::string, std::less<>> kSeedLinesCitedBefore = {
    {"SortActivationsScope", "65"},
    {"CalculateLoadBalanceUpdates", "119"},
    {"GateLogitCall", "230"},
    {"RoutedMoeCall", "2044"},
    {"RoutedAndSharedMoeCall", "2169"},
    {"GetTopk", "530"},
    {"GetTopkBody", "530-556"},
    {"DeepseekScaleWeights", "558-564"},
    {"ExpertGroupMask", "566"},
    {"DeepseekRouting", "599"},
    {"FfnActScope", "625"},
    {"Permute", "637"},
    {"Unpermute", "686"},
    {"LocalPermute", "723"},
    {"GetAllToAllParams", "802-885"},
    {"SparseMatmul", "922"},
    {"ShardMapBody", "1161"},
    {"GmmWi0", "1291"},
    {"GmmWi1", "1302"},
    {"GmmWo", "1314"},
    {"ReshapeAndUpdateWeights", "1447-1463"},
    {"GenerateMasksSubgroup", "1472-1555"},
    {"GenerateMasks", "1557"},
    {"DenseMatmul", "1675"},
    {"DispatchScope", "1814"},
    {"Wi0ScopeDropping", "1834"},
    {"Wi1ScopeDropping", "1850"},
    {"WoScopeDropping", "1867"},
    {"CombineScope", "1892"},
    {"Wi0ScopeDropless", "1914"},
    {"Wi1ScopeDropless", "1923"},
    {"WoScopeDropless", "1933"},
    {"WeightSumUnpermute", "706"},
    {"WeightSumDense", "1945"},
    {"SharedExpertsCall", "2180"},
    {"DenseGateLogitsShard", "1689"},
    {"DensePreBiasLogitsShard", "1692"},
    {"DenseInputsShardDropping", "1811"},
    {"DenseInputsShardDropless", "1911"},
    {"DispatchMaskShard", "1812"},
    {"CombineMaskShard", "1813"},
    {"DispatchShardCp", "1820"},
    {"DispatchShard", "1830"},
    {"AllGatherKernelShard", "1672"},
    {"W0KernelDense", "1836"},
    {"W1KernelDense", "1852"},
    {"WoKernelDense", "1869"},
    {"LayerW0Shard", "1845"},
    {"LayerW1Shard", "1861"},
    {"IntermediateLayerShard", "1882"},
    {"MasksExpertMaskFusedShard", "1591"},
    {"MasksExpertTokenCountShard", "1597"},
    {"SubgroupExpertMaskFusedShard", "1510"},
    {"SubgroupExpertTokenCountShard", "1516"},
    {"IndexBatchShard", "1453"},
    {"IndexLengthShard", "1454"},
    {"SparseInputsShard", "1431"},
    {"SparseGateLogitsShard", "1432"},
    {"SparsePreBiasLogitsShard", "1433"},
    {"SparseW0Pspec", "1434"},
    {"SparseW1Pspec", "1435"},
    {"SparseWoPspec", "1436"},
    {"SparseW0Logical", "1409"},
    {"SparseW1Logical", "1410"},
    {"SparseWoLogical", "1412"},
    {"SparseW0LogicalNoFsdp", "1419"},
    {"SparseW1LogicalNoFsdp", "1420"},
    {"SparseWoLogicalNoFsdp", "1421"},
    {"SparseW0BiasPspec", "1438"},
    {"SparseW1BiasPspec", "1440"},
    {"SparseWoBiasPspec", "1442"},
    {"GateScoreFunc", "256-257"},
    {"GateBias", "260-262"},
    // src/ cited 533-540; 533 is a comment line, the branch starts at 534.
    {"RandomRouting", "534-540"},
    {"DeepseekRoutingCall", "541-542"},
    {"DeepseekRoutingBody", "599-621"},
    {"ExpertMaskCall", "615"},
    {"ExpertGroupMaskBody", "566-597"},
    {"TopkPlain", "548"},
    {"DeepseekScaleCall", "549-550"},
    {"TopkSoftmaxBranch", "551-552"},
    {"TopkSoftmaxCall", "552"},
    {"Gemma4Routing", "543-546"},
    {"TopkSoftmax", "551"},
    {"NormTopkProb", "554-555"},
    {"GroupScores", "579-597"},
    {"Top2InGroup", "583"},
    {"GroupTopk", "585"},
    {"BiasedTopk", "616-618"},
    {"BiasedTopkWeights", "616-620"},
    {"UnbiasedWeights", "620"},
    {"Llama4InputScaleSparse", "654-658"},
    {"PermuteSort", "659-675"},
    {"ArgsortExperts", "662"},
    {"GroupSizeBincount", "668"},
    {"UnsortArgsort", "698"},
    {"Llama4UnitWeightsSparse", "708-710"},
    {"LocalSizesReshape", "768"},
    {"SendSizeStrategy", "845-848"},
    {"RecvSizeStrategy", "856-858"},
    {"GetRaggedBufferSize", "888"},
    {"DecodeBatchAxis", "1070"},
    {"ShardMapOutSpecs", "1154-1155"},
    {"WrapperBatchShape", "1162"},
    {"RingGather", "1173-1176"},
    {"RingRoute", "1173-1189"},
    {"RingRouteMasked", "1173-1191"},
    {"RingLocalMask", "1189-1191"},
    {"PermuteNoEp", "1193-1196"},
    {"BufferSizeCall", "1209"},
    {"RaggedAllToAll", "1217"},
    {"LocalPermuteCall", "1227"},
    {"GlobalGroupSizesBatch", "1237"},
    {"Wi0TensorTransposePsum", "1297-1298"},
    {"Wi1TensorTransposePsum", "1308-1309"},
    {"WoTensorPsumScatter", "1320-1323"},
    {"RingOutputMask", "1329-1330"},
    {"RingUnfold", "1341-1343"},
    {"RingPsumScatter", "1341-1344"},
    {"ReturnAllToAll", "1364-1369"},
    {"ReturnRaggedAllToAll", "1369"},
    {"DecodeReturnRaggedAllToAll", "1389"},
    {"UpdateWeightsZeros", "1451"},
    {"UpdateWeightsSet", "1462"},
    {"SubgroupCapacity", "1483"},
    {"SubgroupCumsum", "1511"},
    {"SubgroupTrunc", "1520"},
    {"SubgroupSoftmaxMul", "1527"},
    {"MasksCapacity", "1564"},
    {"MasksTrunc", "1601"},
    {"MasksSoftmaxMul", "1603"},
    {"CombineMaskCut", "1620"},
    {"Llama4InputScaleDense", "1697-1699"},
    {"DenseReshapeWeights", "1701"},
    {"TrainSoftmax", "1704-1705"},
    {"LbLoss", "1706-1707"},
    {"LbLossCall", "1707"},
    {"GenerateMasksCall", "1725-1726"},
    {"InferenceSoftmax", "1748"},
    {"InferenceSubgroupMasks", "1748-1749"},
    {"InferenceMasksCall", "1749"},
    {"ContextAutoregressiveAxes", "1750-1763"},
    {"DispatchEinsumSubgroup", "1806"},
    {"SubgroupOutputReshape", "1900-1908"},
    {"DroplessWi0Wi1", "1914-1925"},
    {"DroplessBody", "1914-1948"},
    {"Llama4UnitWeightsDense", "1946-1947"},
    {"SharedExpertsSum", "2180-2181"},
    {"RoutedAndSharedMoeBody", "2169-2181"},
};

}  // namespace

TEST_CASE("The line table covers every statement in every revision's moe.py", "[lines]") {
  std::set<std::string_view> names;
  for (const MoeStatement s : AllMoeStatements()) {
    const std::string_view name = MoeStatementName(s);
    INFO(name);
    CHECK(names.insert(name).second);
    bool somewhere = false;
    for (const RevisionInfo& r : Revisions()) {
      const LineSpan span = MoeStatementLines(r.id, s);
      if (!span.present()) continue;
      somewhere = true;
      CHECK(span.first <= span.last);
      CHECK(span.last <= r.moe_py_lines);
    }
    CHECK(somewhere);
    const auto cited = kSeedLinesCitedBefore.find(name);
    if (cited != kSeedLinesCitedBefore.end())
      CHECK(MoeLines(RevisionId::kSeed, s) == cited->second);
  }
  CHECK(names.size() >= kSeedLinesCitedBefore.size());
}

TEST_CASE("A reference cites the revision's lines, or says it has no such statement", "[lines]") {
  using S = MoeStatement;
  CHECK(MoeRef(RevisionId::kSeed, {S::kDeepseekScaleWeights}) == "moe.py:558-564");
  CHECK(MoeRefStart(RevisionId::kSeed, {S::kDeepseekScaleWeights}) == "moe.py:558");
  CHECK(MoeRef(RevisionId::kMain, {S::kDeepseekScaleWeights}) == "moe.py:767-773");
  CHECK(MoeRef(RevisionId::kRelease, {S::kDeepseekScaleWeights, S::kGetTopk}) ==
        "moe.py:1361-1367, 1277");
  // The tensor_transpose axis left MaxText after the seed: no psum over it in main or the release.
  CHECK(MoeRef(RevisionId::kSeed, {S::kWi0TensorTransposePsum, S::kWi1TensorTransposePsum}) ==
        "moe.py:1297-1298, 1308-1309");
  CHECK(MoeRef(RevisionId::kRelease, {S::kWi0TensorTransposePsum}) ==
        "moe.py (no such statement in MaxText 0.2.5)");
  CHECK(MoeRef(RevisionId::kMain, {S::kGmmWi0, S::kWi0TensorTransposePsum}) ==
        "moe.py:1961 (no counterpart of layer_w0 psum over tensor_transpose in MaxText e591f30)");
}

}  // namespace shardtrace
