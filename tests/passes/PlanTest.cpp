// The plan pass (passes/Plan.h): hand-built graphs with a known optimal arena, the in-place rule
// (legal and illegal cases, unfused and fused), the validator on corrupted plans, and every zoo
// model's inference graph and SGD/Adam training step, whose plans must validate, survive a
// simulated run of the arena, and come out smaller than the sum of their buffers. The figures per
// model are printed to the test log.
#include "passes/Plan.h"

#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Schedule.h"
#include "ir/Verifier.h"
#include "passes/Decompose.h"
#include "passes/TrainingStep.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::testing {
namespace {

ir::Graph planned(const std::string& text) {
  ir::Graph g = ir::parseGraph(text, "plan_test.kir");
  passes::plan(g);
  ir::verifyOrThrow(g);
  return g;
}

int64_t offsetOf(const ir::Graph& g, std::string_view name) {
  const ir::Value* v = g.findValue(name);
  for (const ir::BufferSlot& s : g.plan()->slots)
    if (s.value == v) return s.offset;
  ADD_FAILURE() << "%" << name << " has no slot";
  return -1;
}

void setOffset(ir::Graph& g, std::string_view name, int64_t offset) {
  ir::MemoryPlan p = *g.plan();
  for (ir::BufferSlot& s : p.slots)
    if (s.value == g.findValue(name)) s.offset = offset;
  g.setPlan(std::move(p));
}

std::string joined(const std::vector<std::string>& lines) { return fmt::format("{}", fmt::join(lines, "\n")); }

bool mentions(const std::vector<std::string>& problems, const std::string& text) {
  for (const std::string& p : problems)
    if (p.find(text) != std::string::npos) return true;
  return false;
}

/// Runs the kernel steps against the arena at the plan's granularity (its alignment): each step
/// first reads its operand buffers, which must still own all their blocks, then writes its
/// results, which take their blocks over. Independent of the validator's pairwise reasoning.
std::vector<std::string> simulateArena(const ir::Graph& g) {
  const ir::MemoryPlan& p = *g.plan();
  std::unordered_map<const ir::Value*, int64_t> offset;
  for (const ir::BufferSlot& s : p.slots) offset[s.value] = s.offset;
  std::vector<const ir::Value*> owner(static_cast<size_t>(p.arenaBytes / p.alignment), nullptr);
  auto blocks = [&](const ir::Value* v) {
    int64_t first = offset.at(v) / p.alignment;
    return std::pair{first, first + (v->type.bytes() + p.alignment - 1) / p.alignment};
  };
  std::vector<std::string> problems;
  for (const auto& step : ir::kernelSteps(g)) {
    std::unordered_set<const ir::Node*> inStep(step.begin(), step.end());
    for (const ir::Node* n : step)
      for (const ir::Value* v : n->operands) {
        if (!offset.count(v) || inStep.count(v->producer)) continue;
        auto [lo, hi] = blocks(v);
        for (int64_t b = lo; b < hi; ++b)
          if (owner[b] != v) problems.push_back(fmt::format("{} reads a clobbered block of %{}", n->info().name,
                                                             v->name.empty() ? "(unnamed)" : v->name));
      }
    for (const ir::Node* n : step)
      if (offset.count(n->result)) {
        auto [lo, hi] = blocks(n->result);
        for (int64_t b = lo; b < hi; ++b) owner[b] = n->result;
      }
  }
  return problems;
}

// Sizes 1024, 128, 1024, 1024 bytes; %d takes %c's slot. Step 2 holds %a, %b and %c at once:
// 2176 bytes, the peak and the optimal arena.
const char* kOptimal = R"(graph @optimal {
  input %x : f32[8,32]
  %a = permute(%x) {perm=[1,0]} : f32[32,8]
  %b = reduce_sum(%a) {axes=[1]} : f32[32]
  %c = permute(%a) {perm=[1,0]} : f32[8,32]
  %d = mul(%c, %b) : f32[8,32]
  %e = reduce_sum(%d) {axes=[]} : f32[]
  output %y = %e
}
)";

TEST(Plan, KnownOptimalArena) {
  ir::Graph g = planned(kOptimal);
  EXPECT_TRUE(passes::validatePlan(g).empty()) << joined(passes::validatePlan(g));
  passes::PlanStats s = passes::planStats(g);
  EXPECT_EQ(s.buffers, 4);
  EXPECT_EQ(s.sumOfBuffers, 3200);
  EXPECT_EQ(s.peakLiveBytes, 2176);
  EXPECT_EQ(s.arenaBytes, 2176);
  EXPECT_EQ(s.inPlace, 1);
  EXPECT_EQ(offsetOf(g, "d"), offsetOf(g, "c"));
  EXPECT_EQ(g.plan()->alignment, 64);
}

TEST(Plan, ReusesDeadBuffers) {
  // %a dies when %c is written, so %c reuses its bytes; permutes are never in place.
  ir::Graph g = planned(R"(graph @chain {
  input %x : f32[16,16]
  %a = permute(%x) {perm=[1,0]} : f32[16,16]
  %b = permute(%a) {perm=[1,0]} : f32[16,16]
  %c = permute(%b) {perm=[1,0]} : f32[16,16]
  %d = permute(%c) {perm=[1,0]} : f32[16,16]
  output %y = %d
}
)");
  passes::PlanStats s = passes::planStats(g);
  EXPECT_EQ(s.sumOfBuffers, 3072);
  EXPECT_EQ(s.arenaBytes, 2048);
  EXPECT_EQ(s.peakLiveBytes, 2048);
  EXPECT_EQ(s.inPlace, 0);
  EXPECT_EQ(offsetOf(g, "a"), offsetOf(g, "c"));
  EXPECT_NE(offsetOf(g, "a"), offsetOf(g, "b"));
  EXPECT_TRUE(passes::validatePlan(g).empty()) << joined(passes::validatePlan(g));
}

TEST(Plan, OutputsUpdatesAndKernelLocalsAreNotInTheArena) {
  ir::Graph g = planned(R"(graph @owned {
  input %x : f32[4]
  param %w : f32[4] = zeros
  kernel @k0 loop {
    %t = mul(%x, %w) : f32[4]
    %u = neg(%t) : f32[4]
  }
  %v = add(%u, %w) : f32[4]
  %l = reduce_sum(%u) {axes=[]} : f32[]
  output %loss = %l
  update %w = %v
}
)");
  ASSERT_EQ(g.plan()->slots.size(), 1u);  // only %u: %t stays in the kernel, %v and %l are owned elsewhere
  EXPECT_EQ(g.plan()->slots[0].value, g.findValue("u"));
  EXPECT_EQ(g.plan()->arenaBytes, 64);
}

TEST(Plan, InPlaceChainUnfused) {
  ir::Graph g = planned(R"(graph @inplace {
  input %x : f32[4,8]
  %a = permute(%x) {perm=[1,0]} : f32[8,4]
  %b = neg(%a) : f32[8,4]
  %c = exp(%b) : f32[8,4]
  %y = reduce_sum(%c) {axes=[1]} : f32[8]
  output %y = %y
}
)");
  passes::PlanStats s = passes::planStats(g);
  EXPECT_EQ(s.inPlace, 2);
  EXPECT_EQ(s.arenaBytes, 128);
  EXPECT_EQ(s.sumOfBuffers, 384);
  EXPECT_EQ(s.peakLiveBytes, 128);
  EXPECT_EQ(offsetOf(g, "b"), offsetOf(g, "a"));
  EXPECT_EQ(offsetOf(g, "c"), offsetOf(g, "a"));
  EXPECT_TRUE(passes::validatePlan(g).empty()) << joined(passes::validatePlan(g));
  // Without a plan there is no handover: %a and %b both count at step 1.
  g.clearSchedule();
  EXPECT_EQ(passes::planStats(g).peakLiveBytes, 256);
}

TEST(Plan, InPlaceLoopKernelWithBroadcastOfAnotherOperand) {
  // The bias is broadcast, the operand whose slot is taken is not.
  ir::Graph g = planned(R"(graph @loop {
  input %x : f32[4,8]
  param %bias : f32[4] = zeros
  %a = permute(%x) {perm=[1,0]} : f32[8,4]
  kernel @k0 loop {
    %t = exp(%a) : f32[8,4]
    %b = add(%t, %bias) : f32[8,4]
  }
  %y = reduce_sum(%b) {axes=[1]} : f32[8]
  output %y = %y
}
)");
  EXPECT_EQ(passes::planStats(g).inPlace, 1);
  EXPECT_EQ(offsetOf(g, "b"), offsetOf(g, "a"));
  EXPECT_TRUE(passes::validatePlan(g).empty()) << joined(passes::validatePlan(g));
}

TEST(Plan, NoInPlaceThroughABroadcastOperand) {
  // %a (f64[1,4], 32 bytes) is broadcast to [2,4] inside the kernel; %b (f32[2,4]) has the same
  // byte size, but its element i does not come from element i of %a.
  const char* text = R"(graph @bcast {
  input %x : f64[2,4]
  input %y : f64[2,4]
  %a = reduce_sum(%x) {axes=[0], keepdim=true} : f64[1,4]
  kernel @k0 loop {
    %t = add(%a, %y) : f64[2,4]
    %b = cast(%t) {dtype=f32} : f32[2,4]
  }
  %s = reduce_sum(%b) {axes=[]} : f32[]
  output %s = %s
}
)";
  ir::Graph g = planned(text);
  EXPECT_EQ(passes::planStats(g).inPlace, 0);
  EXPECT_NE(offsetOf(g, "b"), offsetOf(g, "a"));
  // Forcing the pair into one slot is reported as an illegal in-place reuse.
  setOffset(g, "b", offsetOf(g, "a"));
  std::vector<std::string> problems = passes::validatePlan(g);
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0], "illegal in-place reuse: %b cannot take the slot of %a: %a f64[1,4] reaches add with result "
                         "f64[2,4] (a broadcast) in step 1");
}

TEST(Plan, NoInPlaceWhileTheOperandIsStillLive) {
  // %b = neg(%a) may not overwrite %a, which %c reads later; %c may (both its operands die there).
  ir::Graph g = planned(R"(graph @later {
  input %x : f32[4,8]
  %a = permute(%x) {perm=[1,0]} : f32[8,4]
  %b = neg(%a) : f32[8,4]
  %c = add(%a, %b) : f32[8,4]
  %y = reduce_sum(%c) {axes=[1]} : f32[8]
  output %y = %y
}
)");
  EXPECT_NE(offsetOf(g, "b"), offsetOf(g, "a"));
  EXPECT_EQ(offsetOf(g, "c"), offsetOf(g, "a"));
  EXPECT_EQ(passes::planStats(g).inPlace, 1);
  setOffset(g, "b", offsetOf(g, "a"));
  std::vector<std::string> problems = passes::validatePlan(g);
  EXPECT_TRUE(mentions(problems, "%a (bytes 0..128, steps 0..2) and %b (bytes 0..128, steps 1..2) are live at the "
                                 "same step and share bytes 0..128"))
      << joined(problems);
}

TEST(Plan, NoInPlaceThroughViewsOrNonLoopKernels) {
  ir::Graph g = planned(R"(graph @views {
  input %x : f32[4,8]
  %a = permute(%x) {perm=[1,0]} : f32[8,4]
  %b = permute(%a) {perm=[1,0]} : f32[4,8]
  kernel @k0 loop {
    %t = permute(%b) {perm=[1,0]} : f32[8,4]
    %c = neg(%t) : f32[8,4]
  }
  kernel @k1 reduction {
    %m = reduce_max(%c) {axes=[1], keepdim=true} : f32[8,1]
    %d = sub(%c, %m) : f32[8,4]
  }
  %y = reduce_sum(%d) {axes=[1]} : f32[8]
  output %y = %y
}
)");
  EXPECT_EQ(passes::planStats(g).inPlace, 0);
  EXPECT_TRUE(passes::validatePlan(g).empty()) << joined(passes::validatePlan(g));
  // Each forced pair names the rule it breaks.
  setOffset(g, "b", offsetOf(g, "a"));
  EXPECT_TRUE(mentions(passes::validatePlan(g), "reaches permute (not elementwise)")) << joined(passes::validatePlan(g));
  passes::plan(g);
  setOffset(g, "d", offsetOf(g, "c"));
  EXPECT_TRUE(mentions(passes::validatePlan(g), "kernel @k1 is a reduction kernel, not a loop"))
      << joined(passes::validatePlan(g));
}

TEST(Plan, FusedGraphMatchesTheTextFormExample) {
  // tests/ir/ScheduleTest.cpp's graph: %0 stays inside @k0; %1 and %3 cross kernel boundaries.
  ir::Graph g = planned(R"(graph @fused {
  input %x : f32[4,8]
  param %w : f32[8,3] = zeros
  param %b : f32[3] = zeros
  kernel @k0 contraction {
    %0 = matmul(%x, %w) : f32[4,3]
    %1 = add(%0, %b) : f32[4,3]
  }
  kernel @k1 reduction {
    %2 = reduce_max(%1) {axes=[1], keepdim=true} : f32[4,1]
    %3 = sub(%1, %2) : f32[4,3]
  }
  %4 = exp(%3) : f32[4,3]
  output %y = %4
}
)");
  std::string text = ir::printGraph(g);
  EXPECT_NE(text.find("  plan arena=128 align=64 {\n    %1 at 0\n    %3 at 64\n  }\n"), std::string::npos) << text;
}

TEST(Plan, ValidatorReportsCorruptPlans) {
  ir::Graph g = planned(kOptimal);
  ASSERT_TRUE(passes::validatePlan(g).empty());

  ir::Graph overlap = g.clone();
  setOffset(overlap, "b", offsetOf(overlap, "a"));  // %a (steps 0..2) and %b (1..3) overlap
  std::vector<std::string> problems = passes::validatePlan(overlap);
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0], "%a (bytes 0..1024, steps 0..2) and %b (bytes 0..128, steps 1..3) are live at the same "
                         "step and share bytes 0..128");
  EXPECT_FALSE(simulateArena(overlap).empty());

  ir::Graph missing = g.clone();
  ir::MemoryPlan p = *missing.plan();
  p.slots.erase(p.slots.begin() + 1);
  p.slots.push_back({missing.findValue("e"), 0});
  missing.setPlan(p);
  problems = passes::validatePlan(missing);
  EXPECT_TRUE(mentions(problems, "%b (128 bytes, live over steps 1..3) has no slot")) << joined(problems);
  EXPECT_TRUE(mentions(problems, "%e has a slot but is not an arena buffer")) << joined(problems);

  ir::Graph outside = g.clone();
  setOffset(outside, "b", 2112);
  EXPECT_TRUE(mentions(passes::validatePlan(outside), "%b (128 bytes at offset 2112) lies outside the arena of 2176"));

  ir::Graph none = ir::parseGraph(kOptimal, "plan_test.kir");
  EXPECT_EQ(passes::validatePlan(none), std::vector<std::string>{"the graph has no memory plan"});
  EXPECT_EQ(passes::planStats(none).arenaBytes, 0);
  EXPECT_EQ(passes::planStats(none).inPlace, 0);
}

TEST(Plan, RerunningReplacesThePlan) {
  ir::Graph g = planned(kOptimal);
  std::string first = ir::printGraph(g);
  setOffset(g, "b", 0);
  passes::plan(g);
  EXPECT_EQ(ir::printGraph(g), first);
  g.clearSchedule();
  EXPECT_EQ(g.plan(), nullptr);
}

ir::Graph zooGraph(const std::string& model, const std::string& kind) {
  if (kind == "inference") {
    ir::Graph g = buildZooModel(model, {.withLoss = false});
    passes::decompose(g);
    return g;
  }
  ir::Graph g = buildZooModel(model, {});
  passes::TrainingStepOptions options;
  options.optimizer.kind = kind == "sgd" ? passes::OptimizerConfig::Kind::Sgd : passes::OptimizerConfig::Kind::Adam;
  passes::buildTrainingStep(g, options);
  return g;
}

TEST(Plan, ZooModels) {
  std::vector<std::string> pipelines = {"plan"};
  if (passes::findPass("fuse")) pipelines.push_back("fuse,plan");
  std::string table = fmt::format("{:<12} {:<10} {:<9} {:>6} {:>8} {:>12} {:>12} {:>12} {:>8} {:>7}\n", "model",
                                  "graph", "passes", "steps", "buffers", "sum bytes", "arena", "peak live",
                                  "in place", "saved");
  for (const std::string& model : zooModelNames())
    for (const std::string& kind : std::vector<std::string>{"inference", "sgd", "adam"})
      for (const std::string& pipeline : pipelines) {
        SCOPED_TRACE(model + " " + kind + " " + pipeline);
        ir::Graph g = zooGraph(model, kind);
        std::vector<std::string> names;
        for (size_t at = 0, next; at <= pipeline.size(); at = next + 1) {
          next = std::min(pipeline.find(',', at), pipeline.size());
          names.push_back(pipeline.substr(at, next - at));
        }
        passes::runPipeline(g, names);
        std::vector<std::string> problems = passes::validatePlan(g);
        EXPECT_TRUE(problems.empty()) << joined(problems);
        problems = simulateArena(g);
        EXPECT_TRUE(problems.empty()) << joined(problems);
        passes::PlanStats s = passes::planStats(g);
        // A fused inference graph may hold only buffers live at once (simplenet's two hidden
        // layers, a small MLP's one): nothing to share there.
        if (kind == "inference" && pipeline != "plan")
          EXPECT_LE(s.arenaBytes, s.sumOfBuffers);
        else
          EXPECT_LT(s.arenaBytes, s.sumOfBuffers);
        EXPECT_GE(s.arenaBytes, s.peakLiveBytes);
        // Planning again gives the same plan.
        std::string text = ir::printGraph(g);
        passes::plan(g);
        EXPECT_EQ(ir::printGraph(g), text);
        table += fmt::format("{:<12} {:<10} {:<9} {:>6} {:>8} {:>12} {:>12} {:>12} {:>8} {:>6.1f}%\n", model, kind,
                             pipeline, ir::kernelSteps(g).size(), s.buffers, s.sumOfBuffers, s.arenaBytes,
                             s.peakLiveBytes, s.inPlace,
                             100.0 * static_cast<double>(s.sumOfBuffers - s.arenaBytes) /
                                 static_cast<double>(s.sumOfBuffers));
      }
  std::printf("%s", table.c_str());
}

}  // namespace
}  // namespace kiln::testing
