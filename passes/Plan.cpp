#include "passes/Plan.h"

#include "passes/plan/Liveness.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace kiln::passes {

using planning::Liveness;

namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

/// One region of the arena: a buffer, or an in-place chain of buffers live one after another.
struct Slot {
  int64_t size;  // aligned
  int start, end;  // the steps it is live over, both included
  int64_t offset = 0;
};

/// For each buffer, the operand buffer whose slot it takes (-1: none), choosing for each result
/// the first legal operand in node order that no other result of the step took.
std::vector<int> chooseInPlace(const ir::Graph& g, const Liveness& live) {
  ir::text::ValueNames names(g);
  int n = static_cast<int>(live.buffers.size());
  std::vector<int> takes(n, -1);
  std::vector<bool> given(n, false);
  for (int b = 0; b < n; ++b) {
    if (live.bytes(b) == 0) continue;
    int step = live.def[b];
    for (const ir::Node* node : live.steps[step]) {
      for (const ir::Value* v : node->operands) {
        auto it = live.index.find(v);
        if (it == live.index.end()) continue;
        int a = it->second;
        if (given[a] || !planning::inPlaceProblem(g, live, a, b, names).empty()) continue;
        takes[b] = a;
        given[a] = true;
        break;
      }
      if (takes[b] >= 0) break;
    }
  }
  return takes;
}

/// Places `slots` in `order`, each in the smallest gap between the already placed slots whose
/// lifetimes overlap its own, or above them. Returns the arena size.
int64_t placeBestFit(std::vector<Slot>& slots, const std::vector<size_t>& order) {
  int64_t arena = 0;
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (size_t i : order) {
    Slot& s = slots[i];
    s.offset = 0;
    if (s.size == 0) continue;  // shares nothing
    busy.clear();
    for (size_t p : placed)
      if (slots[p].start <= s.end && s.start <= slots[p].end)
        busy.emplace_back(slots[p].offset, slots[p].offset + slots[p].size);
    std::sort(busy.begin(), busy.end());
    int64_t cursor = 0, best = -1, bestGap = std::numeric_limits<int64_t>::max();
    for (auto [lo, hi] : busy) {
      if (lo - cursor >= s.size && lo - cursor < bestGap) {
        best = cursor;
        bestGap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    s.offset = best >= 0 ? best : cursor;
    placed.push_back(i);
    arena = std::max(arena, s.offset + s.size);
  }
  return arena;
}

/// Best fit in two orders — largest slots first (greedy by size), and by first step with the
/// largest first among equals (greedy by breadth) — keeping the smaller arena; neither order wins
/// on every graph. Returns the arena size.
int64_t placeSlots(std::vector<Slot>& slots) {
  using Order = bool (*)(const Slot&, const Slot&);
  const Order orders[] = {
      [](const Slot& x, const Slot& y) { return x.size != y.size ? x.size > y.size : x.start < y.start; },
      [](const Slot& x, const Slot& y) { return x.start != y.start ? x.start < y.start : x.size > y.size; },
  };
  std::vector<Slot> best;
  int64_t bestArena = std::numeric_limits<int64_t>::max();
  for (Order before : orders) {
    std::vector<size_t> order(slots.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return before(slots[x], slots[y]); });
    int64_t arena = placeBestFit(slots, order);
    if (arena < bestArena) {
      bestArena = arena;
      best = slots;
    }
  }
  slots = std::move(best);
  return bestArena;
}

/// The buffers of `live` that took their operand's slot in g's plan: takes[b] = that operand, or
/// -1. Only legal handovers count; validatePlan reports the others.
std::vector<int> planHandovers(const ir::Graph& g, const Liveness& live,
                               const std::unordered_map<const ir::Value*, int64_t>& offsets,
                               const ir::text::ValueNames& names) {
  int n = static_cast<int>(live.buffers.size());
  std::vector<int> takes(n, -1);
  std::vector<std::vector<int>> dyingAt(live.steps.size());
  for (int a = 0; a < n; ++a) dyingAt[live.last[a]].push_back(a);
  for (int b = 0; b < n; ++b) {
    auto ob = offsets.find(live.buffers[b]);
    if (ob == offsets.end() || live.bytes(b) == 0) continue;
    for (int a : dyingAt[live.def[b]]) {
      auto oa = offsets.find(live.buffers[a]);
      if (oa == offsets.end() || oa->second != ob->second) continue;
      if (planning::inPlaceProblem(g, live, a, b, names).empty()) {
        takes[b] = a;
        break;
      }
    }
  }
  return takes;
}

std::unordered_map<const ir::Value*, int64_t> slotOffsets(const ir::MemoryPlan& plan) {
  std::unordered_map<const ir::Value*, int64_t> offsets;
  for (const ir::BufferSlot& s : plan.slots) offsets.emplace(s.value, s.offset);
  return offsets;
}

}  // namespace

void plan(ir::Graph& g, const PassContext&) {
  Liveness live = planning::computeLiveness(g);
  std::vector<int> takes = chooseInPlace(g, live);
  std::vector<Slot> slots;
  std::vector<size_t> slotOf(live.buffers.size());
  for (size_t b = 0; b < live.buffers.size(); ++b) {
    if (takes[b] >= 0) {  // the operand came earlier in node order, so its slot exists
      slotOf[b] = slotOf[takes[b]];
      slots[slotOf[b]].end = std::max(slots[slotOf[b]].end, live.last[b]);
    } else {
      slotOf[b] = slots.size();
      slots.push_back({alignUp(live.bytes(static_cast<int>(b)), kAlignment), live.def[b], live.last[b]});
    }
  }
  ir::MemoryPlan result;
  result.alignment = kAlignment;
  result.arenaBytes = placeSlots(slots);
  for (size_t b = 0; b < live.buffers.size(); ++b)
    result.slots.push_back({const_cast<ir::Value*>(live.buffers[b]), slots[slotOf[b]].offset});
  g.setPlan(std::move(result));
#ifndef NDEBUG
  std::vector<std::string> problems = validatePlan(g);
  KILN_ASSERT(problems.empty(), "the plan pass made an invalid plan:\n{}", fmt::join(problems, "\n"));
#endif
}

PlanStats planStats(const ir::Graph& g) {
  Liveness live = planning::computeLiveness(g);
  PlanStats stats;
  stats.buffers = static_cast<int64_t>(live.buffers.size());
  std::vector<int64_t> liveAt(live.steps.size(), 0);
  for (int b = 0; b < static_cast<int>(live.buffers.size()); ++b) {
    stats.sumOfBuffers += live.bytes(b);
    for (int s = live.def[b]; s <= live.last[b]; ++s) liveAt[s] += live.bytes(b);
  }
  if (const ir::MemoryPlan* p = g.plan()) {
    stats.arenaBytes = p->arenaBytes;
    std::vector<int> takes = planHandovers(g, live, slotOffsets(*p), ir::text::ValueNames(g));
    for (size_t b = 0; b < takes.size(); ++b) {
      if (takes[b] < 0) continue;
      ++stats.inPlace;
      liveAt[live.def[b]] -= live.bytes(static_cast<int>(b));  // the pair shares its bytes at the handover
    }
  }
  for (int64_t bytes : liveAt) stats.peakLiveBytes = std::max(stats.peakLiveBytes, bytes);
  return stats;
}

std::vector<std::string> validatePlan(const ir::Graph& g) {
  const ir::MemoryPlan* p = g.plan();
  if (!p) return {"the graph has no memory plan"};
  Liveness live = planning::computeLiveness(g);
  ir::text::ValueNames names(g);
  std::vector<std::string> problems;
  auto name = [&](const ir::Value* v) { return "%" + names.of(v); };

  std::unordered_map<const ir::Value*, int64_t> offsets;
  for (const ir::BufferSlot& s : p->slots) {
    if (!live.index.count(s.value)) {
      problems.push_back(fmt::format("{} has a slot but is not an arena buffer (a graph input or parameter, a graph "
                                     "output, an update value, or a result used inside one kernel only)",
                                     name(s.value)));
      continue;
    }
    if (!offsets.emplace(s.value, s.offset).second) {
      problems.push_back(fmt::format("{} has more than one slot", name(s.value)));
      continue;
    }
    int64_t bytes = s.value->type.bytes();
    if (s.offset < 0 || s.offset > p->arenaBytes - bytes)
      problems.push_back(fmt::format("{} ({} bytes at offset {}) lies outside the arena of {} bytes", name(s.value),
                                     bytes, s.offset, p->arenaBytes));
    else if (p->alignment > 0 && s.offset % p->alignment != 0)
      problems.push_back(
          fmt::format("{} at offset {} is not {}-byte aligned", name(s.value), s.offset, p->alignment));
  }
  int n = static_cast<int>(live.buffers.size());
  for (int b = 0; b < n; ++b)
    if (!offsets.count(live.buffers[b]))
      problems.push_back(fmt::format("{} ({} bytes, live over steps {}..{}) has no slot", name(live.buffers[b]),
                                     live.bytes(b), live.def[b], live.last[b]));

  // Pairs live at a common step whose bytes intersect: only an exact in-place handover may.
  for (int i = 0; i < n; ++i) {
    auto oi = offsets.find(live.buffers[i]);
    if (oi == offsets.end()) continue;
    for (int j = i + 1; j < n; ++j) {
      auto oj = offsets.find(live.buffers[j]);
      if (oj == offsets.end() || !live.overlap(i, j)) continue;
      int64_t lo = std::max(oi->second, oj->second);
      int64_t hi = std::min(oi->second + live.bytes(i), oj->second + live.bytes(j));
      if (lo >= hi) continue;
      // i precedes j in node order, so only i can hand its slot over to j.
      bool handover = oi->second == oj->second && live.bytes(i) == live.bytes(j) && live.last[i] == live.def[j] &&
                      live.def[i] < live.def[j];
      if (handover) {
        std::string why = planning::inPlaceProblem(g, live, i, j, names);
        if (!why.empty()) problems.push_back("illegal in-place reuse: " + why);
        continue;
      }
      problems.push_back(fmt::format("{} (bytes {}..{}, steps {}..{}) and {} (bytes {}..{}, steps {}..{}) are live "
                                     "at the same step and share bytes {}..{}",
                                     name(live.buffers[i]), oi->second, oi->second + live.bytes(i), live.def[i],
                                     live.last[i], name(live.buffers[j]), oj->second, oj->second + live.bytes(j),
                                     live.def[j], live.last[j], lo, hi));
    }
  }
  return problems;
}

}  // namespace kiln::passes
