#include "passes/Fuse.h"

#include "passes/ThinMatMul.h"

#include "ir/Lexer.h"
#include "kernels/Kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace kiln::passes {

namespace {

using ir::KernelKind;
using ir::Node;
using ir::OpKind;
using ir::Value;

/// The most nodes a kernel of fused elementwise work or a reduction holds (the zoo's largest holds
/// 47; the optimizer's multi-tensor kernel is not limited). Each merge lowers the merged group to
/// check it, so without a bound a chain of n nodes fused in n merges costs n² (a chain of 10000
/// exp took a minute); past a few hundred ops a kernel is long straight-line code for LLVM and
/// NVRTC to compile and gains nothing from holding more.
constexpr size_t kMaxKernelNodes = 256;

/// A cast of f16 or bf16 to f32, or of any of them to f64: its consumers read half the bytes (or
/// less) when they widen the narrow value themselves (a bias gradient's sum of a bf16 ReLU
/// gradient the next product needs anyway; the f64 columns of a thin matmul's outer products).
bool isWidening(const Node& n) {
  if (n.op != OpKind::Cast) return false;
  const DType from = n.operands[0]->type.dtype, to = n.result->type.dtype;
  const bool narrow = from == DType::bf16 || from == DType::f16;
  return (to == DType::f32 && narrow) || (to == DType::f64 && (narrow || from == DType::f32));
}

bool isCheap(const Node& n) {
  if (kernels::isViewOp(n.op) || n.op == OpKind::Iota || isWidening(n)) return true;
  if (n.op == OpKind::Constant) return n.attrFloats("value").size() == 1;
  return n.op == OpKind::Random && n.operands.empty();
}

KernelKind kindOf(const Node& n) {
  switch (n.op) {
    case OpKind::MatMul:
    case OpKind::Conv2d:
    case OpKind::Conv2dGradInput:
    case OpKind::Conv2dGradWeight: return KernelKind::Contraction;
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: return KernelKind::Reduction;
    default: break;
  }
  if (isCheap(n) || n.op == OpKind::Constant) return KernelKind::Loop;
  if ((n.info().flags & ir::kElementwise) && !(n.info().flags & ir::kComposite)) return KernelKind::Loop;
  return KernelKind::Op;
}

/// Consumers that read operands through index maps (so a view or leaf can be folded into them).
bool absorbsViews(const Node& n) { return kindOf(n) == KernelKind::Loop || kindOf(n) == KernelKind::Reduction; }

/// Whether the value under `v`'s chain of views is computed by a cheap node.
bool cheapBase(const Value* v) {
  while (v->kind == ir::ValueKind::Result && kernels::isViewOp(v->producer->op)) v = v->producer->operands[0];
  return v->kind == ir::ValueKind::Result && isCheap(*v->producer);
}

// Gives every consumer that can absorb them its own copy of the cheap nodes it reads, so a view
// or a constant used by several kernels is folded into each instead of being materialized.
void cloneCheapNodes(ir::Graph& g) {
  std::unordered_map<const Value*, int> uses;
  for (const auto& n : g.nodes())
    for (const Value* v : n->operands) ++uses[v];
  for (const ir::Output& o : g.outputs()) ++uses[o.value];
  for (const ir::Update& u : g.updates()) ++uses[u.value];

  std::vector<Node*> order;
  size_t before = g.nodes().size();
  std::function<Value*(Value*)> privateCopy = [&](Value* v) -> Value* {
    if (v->kind != ir::ValueKind::Result || !isCheap(*v->producer)) return v;
    if (uses[v] <= 1) {  // already private: make what it reads private too
      if (kernels::isViewOp(v->producer->op))
        for (Value*& o : v->producer->operands) o = privateCopy(o);
      return v;
    }
    const Node& p = *v->producer;
    std::vector<Value*> ops;
    for (Value* o : p.operands) {
      ++uses[o];  // the copy reads it too (until privateCopy gives the copy one of its own)
      ops.push_back(kernels::isViewOp(p.op) ? privateCopy(o) : o);
    }
    --uses[v];
    Value* copy = g.addNodeRaw(p.op, std::move(ops), p.attrs, v->type, p.loc);
    uses[copy] = 1;
    order.push_back(g.nodes().back().get());
    return copy;
  };
  std::vector<Node*> original;
  for (size_t i = 0; i < before; ++i) original.push_back(g.nodes()[i].get());
  for (Node* n : original) {
    if (absorbsViews(*n) && !isCheap(*n))
      for (Value*& v : n->operands) v = privateCopy(v);
    // A matmul reads an operand through the strides of a view of memory (kernels::Contraction),
    // so it gets its own copy of such a view too — a reshape of a layer's input, the heads of
    // attention sliced out of a permuted projection — instead of a kernel that copies it.
    // (Not over a cheap base, a widening cast: its copy could not join the matmul's kernel and
    // would run beside the original.)
    if (n->op == OpKind::MatMul)
      for (Value*& v : n->operands)
        if (kernels::isStridedView(*v) && !cheapBase(v)) v = privateCopy(v);
    order.push_back(n);
  }
  // Rebuild the node list: a topological order that stays as close to `order` as possible
  // (clones just before their consumer; a view that now reads a clone moves after it).
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::unordered_map<const Node*, int> pending;
  std::unordered_map<const Node*, std::vector<Node*>> dependents;
  for (Node* n : order)
    for (const Value* v : n->operands)
      if (v->kind == ir::ValueKind::Result) {
        ++pending[n];
        dependents[v->producer].push_back(n);
      }
  auto later = [&](const Node* a, const Node* b) { return position.at(a) > position.at(b); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  for (Node* n : order)
    if (pending[n] == 0) ready.push(n);
  std::unordered_map<const Node*, size_t> topo;
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    topo[n] = topo.size();
    for (Node* d : dependents[n])
      if (--pending[d] == 0) ready.push(d);
  }
  auto& nodes = g.mutableNodes();
  std::sort(nodes.begin(), nodes.end(), [&](const std::unique_ptr<Node>& a, const std::unique_ptr<Node>& b) {
    return topo.at(a.get()) < topo.at(b.get());
  });
  // Originals that lost every user disappear.
  std::unordered_set<const Value*> used;
  for (const ir::Output& o : g.outputs()) used.insert(o.value);
  for (const ir::Update& u : g.updates()) used.insert(u.value);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (used.count((*it)->result))
      for (const Value* v : (*it)->operands) used.insert(v);
  std::erase_if(nodes, [&](const std::unique_ptr<Node>& n) { return !used.count(n->result); });
}

class Fuser {
 public:
  explicit Fuser(ir::Graph& g) : g_(g) {
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      Node* n = g.nodes()[i].get();
      index_[n] = static_cast<int>(i);
      parent_.push_back(static_cast<int>(i));
      kind_.push_back(kindOf(*n));
      members_.push_back({static_cast<int>(i)});
    }
    users_.resize(g.nodes().size());
    for (size_t i = 0; i < g.nodes().size(); ++i)
      for (const Value* v : g.nodes()[i]->operands)
        if (v->kind == ir::ValueKind::Result) users_[index_.at(v->producer)].push_back(static_cast<int>(i));
    for (const ir::Output& o : g.outputs()) escapes_.insert(o.value);
    for (const ir::Update& u : g.updates()) escapes_.insert(u.value);
  }

  void run() {
    const auto& nodes = g_.nodes();
    // A widening cast read by one reduction joins it first, before its producer's kernel can take
    // it: that kernel would then write the f32 values for the reduction (which cannot join a
    // contraction's epilogue) beside, or instead of, the narrow ones.
    for (size_t i = 0; i < nodes.size(); ++i)
      if (isWidening(*nodes[i]) && users_[i].size() == 1 && !escapes_.count(nodes[i]->result) &&
          kind_[users_[i].front()] == KernelKind::Reduction)
        tryMerge(find(static_cast<int>(i)), find(users_[i].front()));
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = *nodes[i];
      if (n.op == OpKind::Constant && !isCheap(n)) continue;  // constant data stays data
      for (const Value* v : n.operands) {
        if (v->kind != ir::ValueKind::Result) continue;
        int p = find(index_.at(v->producer));
        int c = find(static_cast<int>(i));
        if (p == c) continue;
        std::string why = tryMerge(p, c);
        if (!why.empty() && !isCheap(*v->producer)) refusals_.push_back({v->producer, &n, std::move(why)});
      }
    }
    mergeOptimizerUpdates();
    assign();
  }

 private:
  int find(int x) { return parent_[x] == x ? x : parent_[x] = find(parent_[x]); }

  static KernelKind mergedKind(KernelKind a, KernelKind b) {
    if (a == KernelKind::Contraction || b == KernelKind::Contraction) return KernelKind::Contraction;
    if (a == KernelKind::Reduction || b == KernelKind::Reduction) return KernelKind::Reduction;
    return a == KernelKind::Multi || b == KernelKind::Multi ? KernelKind::Multi : KernelKind::Loop;
  }

  std::vector<const Node*> sortedNodes(const std::vector<int>& ids) const {
    std::vector<int> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    std::vector<const Node*> out;
    for (int i : sorted) out.push_back(g_.nodes()[i].get());
    return out;
  }

  std::unordered_set<const Value*> materializedFor(const std::vector<int>& ids) const {
    std::unordered_set<int> in(ids.begin(), ids.end());
    std::unordered_set<const Value*> out;
    for (int i : ids) {
      const Value* v = g_.nodes()[i]->result;
      bool escapes = escapes_.count(v) > 0;
      for (int u : users_[i])
        if (!in.count(u)) escapes = true;
      if (escapes) out.insert(v);
    }
    return out;
  }

  // Whether a path from group a to group b (or back) passes through another group, which merging
  // them would turn into a cycle of kernels. The groups start as single nodes and every merge is
  // checked here, so the kernel graph stays acyclic. The search walks groups, not nodes: a group
  // runs as one kernel, so whatever reads any of its members waits for all of its inputs, and a
  // path may enter a group by one member and leave it by another, unrelated one. (In an f16 Adam
  // step, the overflow check's reduction kernel reads the gradient's kernel and also computes the
  // bias corrections; a search over nodes let the gradient's kernel absorb their consumer.) Node
  // indices do not bound such a path, since a group's members lie on both sides of b's.
  bool pathOutside(int a, int b) {
    auto reaches = [&](int from, int to) {
      std::vector<bool> seen(parent_.size());
      std::vector<int> stack = {from};
      seen[from] = true;
      while (!stack.empty()) {
        int x = stack.back();
        stack.pop_back();
        for (int m : members_[x])
          for (int u : users_[m]) {
            int y = find(u);
            if (y == to && x != from) return true;
            if (y != to && !seen[y]) {
              seen[y] = true;
              stack.push_back(y);
            }
          }
      }
      return false;
    };
    // An edge between the groups rules out a path the other way: with it, that path would close a
    // cycle in the group graph, which stays acyclic. So a producer and its consumer search only
    // forward from the producer (what lies downstream of the consumer, the whole rest of a long
    // chain, is never walked).
    auto edge = [&](int from, int to) {
      for (int m : members_[from])
        for (int u : users_[m])
          if (find(u) == to) return true;
      return false;
    };
    const bool ab = edge(a, b), ba = !ab && edge(b, a);
    return (!ba && reaches(a, b)) || (!ab && reaches(b, a));
  }

  std::string tryMerge(int a, int b, KernelKind forced = KernelKind::Loop, bool force = false) {
    KernelKind ka = kind_[a], kb = kind_[b];
    if (!force) {
      if (ka == KernelKind::Op || kb == KernelKind::Op) {
        const Node& n = *g_.nodes()[(ka == KernelKind::Op ? members_[a] : members_[b]).front()];
        return fmt::format("'{}' has a dedicated kernel", n.info().name);
      }
      if (ka == KernelKind::Contraction && kb == KernelKind::Contraction) return "two contractions";
      if ((ka == KernelKind::Contraction && kb == KernelKind::Reduction) ||
          (ka == KernelKind::Reduction && kb == KernelKind::Contraction))
        return "a reduction cannot join a contraction's epilogue (the epilogue sees one element of the product at a time)";
      if (ka == KernelKind::Multi || kb == KernelKind::Multi) return "the multi-tensor update";
      if (members_[a].size() + members_[b].size() > kMaxKernelNodes)
        return fmt::format("the kernel would hold more than {} nodes", kMaxKernelNodes);
    }
    if (pathOutside(a, b)) return "another kernel lies on a path between them";
    if (!force) {
      std::string why = memoryCost(a, b);
      if (!why.empty()) return why;
    }
    std::vector<int> ids = members_[a];
    ids.insert(ids.end(), members_[b].begin(), members_[b].end());
    KernelKind kind = force ? forced : mergedKind(ka, kb);
    kernels::Kernel k;
    std::string why = kernels::tryLower(g_, sortedNodes(ids), kind, materializedFor(ids), k);
    if (!why.empty()) return why;
    int root = std::min(a, b), other = std::max(a, b);
    parent_[other] = root;
    members_[root] = std::move(ids);
    members_[other].clear();
    kind_[root] = kind;
    return {};
  }

  // Fusing producer group p into a later consumer group c moves p's work to c's position, so the
  // buffers p reads stay alive until then. When other work runs in between and p reads more
  // intermediate bytes (that would otherwise die there) than the value it hands to c, fusing would
  // raise memory (a sum of gradients produced one per time step would keep every one alive).
  std::string memoryCost(int p, int c) const {
    int lastP = *std::max_element(members_[p].begin(), members_[p].end());
    int firstC = *std::min_element(members_[c].begin(), members_[c].end());
    if (lastP > firstC) return {};
    std::unordered_set<int> inP(members_[p].begin(), members_[p].end()), inC(members_[c].begin(), members_[c].end());
    // Contractions and dedicated kernels in (from, firstC): elementwise work in between is likely
    // to fuse into the same kernel as well. after[i]: how many lie in [i, firstC), counted once.
    std::vector<int> after(static_cast<size_t>(firstC - lastP) + 1, 0);
    for (int i = firstC - 1; i > lastP; --i) {
      const KernelKind kind = kindOf(*g_.nodes()[i]);
      const bool counts = !inP.count(i) && !inC.count(i) && (kind == KernelKind::Contraction || kind == KernelKind::Op);
      after[static_cast<size_t>(i - lastP)] = after[static_cast<size_t>(i - lastP + 1)] + (counts ? 1 : 0);
    }
    auto kernelsBetween = [&](int from) { return from + 1 >= firstC ? 0 : after[static_cast<size_t>(from + 1 - lastP)]; };
    const int between = kernelsBetween(lastP);
    if (between == 0) return {};
    int64_t readBytes = 0, handedBytes = 0;
    std::unordered_set<const Value*> seen;
    for (int i : members_[p]) {
      const Node& n = *g_.nodes()[i];
      for (const Value* v : n.operands) {
        if (v->kind != ir::ValueKind::Result || inP.count(index_.at(v->producer)) || !seen.insert(v).second)
          continue;
        // Only a buffer whose last reader comes before c lives longer when p moves to c, and only
        // from its last reader outside p on: it costs nothing when no kernel runs after that.
        const std::vector<int>& readers = users_[index_.at(v->producer)];
        if (escapes_.count(v) || std::any_of(readers.begin(), readers.end(), [&](int r) { return r >= firstC; }))
          continue;
        int lastRead = lastP;
        for (int r : readers)
          if (!inP.count(r)) lastRead = std::max(lastRead, r);
        if (kernelsBetween(lastRead) == 0) continue;
        readBytes += v->type.bytes();
      }
      for (int u : users_[i])
        if (inC.count(u)) {
          handedBytes += n.result->type.bytes();
          break;
        }
    }
    if (readBytes <= handedBytes) return {};
    return fmt::format("fusing would keep {} bytes of inputs alive across {} contractions or other kernels to save "
                       "a {}-byte buffer",
                       readBytes, between, handedBytes);
  }

  // Groups that only produce parameter updates become one multi-tensor kernel.
  void mergeOptimizerUpdates() {
    std::unordered_set<const Value*> updates;
    for (const ir::Update& u : g_.updates()) updates.insert(u.value);
    int multi = -1;
    for (size_t i = 0; i < parent_.size(); ++i) {
      int r = find(static_cast<int>(i));
      if (r != static_cast<int>(i) || kind_[r] != KernelKind::Loop) continue;
      std::unordered_set<const Value*> out = materializedFor(members_[r]);
      if (out.empty() || !std::all_of(out.begin(), out.end(), [&](const Value* v) { return updates.count(v); }))
        continue;
      if (multi < 0) {
        multi = r;
        kind_[r] = KernelKind::Multi;
        continue;
      }
      int m = find(multi);
      if (tryMerge(m, r, KernelKind::Multi, /*force=*/true).empty()) multi = find(m);
    }
  }

  // Turns the union-find sets into ir::KernelGroups and orders the nodes so each group's nodes
  // are consecutive (a topological order of the group DAG, stable in the original order).
  void assign() {
    auto& nodes = g_.mutableNodes();
    size_t count = nodes.size();
    std::vector<int> groupOf(count);
    for (size_t i = 0; i < count; ++i) groupOf[i] = find(static_cast<int>(i));
    // Lone constants are data, not kernels.
    std::unordered_map<int, std::vector<int>> deps;  // group → groups it waits for
    std::unordered_map<int, int> pending;
    std::vector<int> roots;
    for (size_t i = 0; i < count; ++i)
      if (groupOf[i] == static_cast<int>(i)) roots.push_back(static_cast<int>(i));
    std::unordered_map<int, std::vector<int>> dependents;
    for (int r : roots) pending[r] = 0;
    for (size_t i = 0; i < count; ++i)
      for (const Value* v : nodes[i]->operands)
        if (v->kind == ir::ValueKind::Result) {
          int from = groupOf[index_.at(v->producer)], to = groupOf[i];
          if (from != to) {
            dependents[from].push_back(to);
            ++pending[to];
          }
        }
    std::priority_queue<int, std::vector<int>, std::greater<>> ready;  // by first node index
    for (int r : roots)
      if (pending[r] == 0) ready.push(r);
    std::vector<int> order;
    while (!ready.empty()) {
      int r = ready.top();
      ready.pop();
      order.push_back(r);
      for (int d : dependents[r])
        if (--pending[d] == 0) ready.push(d);
    }
    KILN_ASSERT(order.size() == roots.size(), "fuse: the kernel graph has a cycle");
    std::vector<std::unique_ptr<Node>> sorted;
    g_.mutableGroups().clear();
    for (int r : order) {
      std::vector<int> ids = members_[r];
      std::sort(ids.begin(), ids.end());
      const Node& first = *nodes[ids.front()];
      bool data = ids.size() == 1 && first.op == OpKind::Constant;
      int32_t group = -1;
      if (!data) {
        ir::KernelGroup k{fmt::format("k{}", g_.groups().size()), kind_[r], {}};
        if (k.kind == KernelKind::Loop && ids.size() == 1 && kindOf(first) == KernelKind::Op) k.kind = KernelKind::Op;
        group = g_.addGroup(std::move(k));
      }
      for (int i : ids) {
        nodes[i]->group = group;
        sorted.push_back(std::move(nodes[i]));
      }
    }
    nodes = std::move(sorted);
    explainRefusals();
  }

  // Each kernel's notes: why a value it reads from another kernel was not fused into it.
  void explainRefusals() {
    ir::text::ValueNames names(g_);
    std::unordered_set<std::string> said;
    for (const Refusal& r : refusals_) {
      int32_t from = r.producer->group, to = r.consumer->group;
      if (from == to || to < 0) continue;
      std::string where = from >= 0 ? "kernel @" + g_.groups()[from].name : "constant data";
      if (!said.insert(fmt::format("{}>{}", from, to)).second) continue;
      g_.mutableGroups()[to].notes.push_back(fmt::format("%{} ({}, {}) not fused: {}", names.of(r.producer->result),
                                                         r.producer->info().name, where, r.why));
    }
  }

  ir::Graph& g_;
  std::unordered_map<const Node*, int> index_;
  std::vector<int> parent_;
  std::vector<KernelKind> kind_;
  std::vector<std::vector<int>> members_;
  std::vector<std::vector<int>> users_;
  std::unordered_set<const Value*> escapes_;
  struct Refusal {
    const Node* producer;
    const Node* consumer;
    std::string why;
  };
  std::vector<Refusal> refusals_;
};

}  // namespace

void fuse(ir::Graph& g, const PassContext&) {
  for (const auto& n : g.nodes())
    KILN_CHECK(!(n->info().flags & ir::kComposite), "{}fuse: '{}' is a composite op; run decompose first",
               n->loc.known() ? n->loc.str() + ": " : "", n->info().name);
  g.clearSchedule();
  expandThinMatMuls(g);
  cloneCheapNodes(g);
  Fuser(g).run();
}

}  // namespace kiln::passes
