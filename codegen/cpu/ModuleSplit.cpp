#include "codegen/cpu/ModuleSplit.h"

#include "support/Error.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>

#include <algorithm>
#include <numeric>

namespace kiln::cpu {
namespace {

/// Union-find over the module's defined globals.
struct Clusters {
  llvm::DenseMap<const llvm::GlobalValue*, int> index;
  std::vector<int> parent;

  int add(const llvm::GlobalValue* gv) {
    auto [it, fresh] = index.try_emplace(gv, static_cast<int>(parent.size()));
    if (fresh) parent.push_back(it->second);
    return it->second;
  }
  int find(int i) {
    while (parent[static_cast<size_t>(i)] != i) i = parent[static_cast<size_t>(i)] = parent[static_cast<size_t>(parent[static_cast<size_t>(i)])];
    return i;
  }
  void unite(int a, int b) { parent[static_cast<size_t>(find(a))] = find(b); }
};

/// The defined globals whose code or initializer refers to `v`, through constant expressions.
void usersOf(const llvm::Value* v, std::vector<const llvm::GlobalValue*>& out) {
  for (const llvm::User* u : v->users()) {
    if (const auto* inst = llvm::dyn_cast<llvm::Instruction>(u))
      out.push_back(inst->getFunction());
    else if (const auto* gv = llvm::dyn_cast<llvm::GlobalValue>(u))
      out.push_back(gv);
    else if (llvm::isa<llvm::Constant>(u))
      usersOf(u, out);
  }
}

/// Local functions marked noinline are called, never inlined: they may live in another part.
bool travels(const llvm::GlobalValue& gv) {
  const auto* f = llvm::dyn_cast<llvm::Function>(&gv);
  return f && f->hasFnAttribute(llvm::Attribute::NoInline);
}

}  // namespace

int64_t instructionCount(const llvm::Module& m) {
  int64_t n = 0;
  for (const llvm::Function& f : m) n += static_cast<int64_t>(f.getInstructionCount());
  return n;
}

SplitPlan planSplit(const llvm::Module& m, int maxParts, int64_t minInstructions) {
  SplitPlan plan;
  const int64_t total = instructionCount(m);
  const int parts = static_cast<int>(std::clamp<int64_t>(total / std::max<int64_t>(minInstructions, 1), 1, maxParts));
  if (parts <= 1) return plan;

  // Every defined global joins the clusters of the globals that use it when it is local: a local
  // function must stay where it can be inlined, a local constant where it is read.
  Clusters clusters;
  std::vector<const llvm::GlobalValue*> defined;
  for (const llvm::GlobalValue& gv : m.global_values())
    if (!gv.isDeclaration()) {
      clusters.add(&gv);
      defined.push_back(&gv);
    }
  std::vector<const llvm::GlobalValue*> users;
  for (const llvm::GlobalValue* gv : defined) {
    if (!gv->hasLocalLinkage() || travels(*gv)) continue;
    users.clear();
    usersOf(gv, users);
    for (const llvm::GlobalValue* u : users)
      if (u && !u->isDeclaration()) clusters.unite(clusters.index.at(gv), clusters.add(u));
  }

  // Clusters by size, largest first, each to the smallest part so far.
  std::vector<int64_t> clusterSize(clusters.parent.size(), 0);
  for (const llvm::GlobalValue* gv : defined) {
    const auto* f = llvm::dyn_cast<llvm::Function>(gv);
    clusterSize[static_cast<size_t>(clusters.find(clusters.index.at(gv)))] +=
        f ? static_cast<int64_t>(f->getInstructionCount()) + 1 : 1;
  }
  std::vector<int> order(clusterSize.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return clusterSize[static_cast<size_t>(a)] > clusterSize[static_cast<size_t>(b)]; });
  std::vector<int64_t> size(static_cast<size_t>(parts), 0);
  std::vector<int> partOfCluster(clusterSize.size(), -1);
  for (int c : order) {
    if (clusterSize[static_cast<size_t>(c)] == 0) continue;
    auto smallest = std::min_element(size.begin(), size.end());
    *smallest += clusterSize[static_cast<size_t>(c)];
    partOfCluster[static_cast<size_t>(c)] = static_cast<int>(smallest - size.begin());
  }
  // Parts renumbered largest first (the threads take them in this order); empty ones dropped.
  std::vector<int> bySize(static_cast<size_t>(parts));
  std::iota(bySize.begin(), bySize.end(), 0);
  std::stable_sort(bySize.begin(), bySize.end(), [&](int a, int b) { return size[static_cast<size_t>(a)] > size[static_cast<size_t>(b)]; });
  std::vector<int> number(static_cast<size_t>(parts), -1);
  for (int p : bySize)
    if (size[static_cast<size_t>(p)] > 0) {
      number[static_cast<size_t>(p)] = static_cast<int>(plan.instructions.size());
      plan.instructions.push_back(size[static_cast<size_t>(p)]);
    }
  if (plan.instructions.size() <= 1) return {};
  for (const llvm::GlobalValue* gv : defined) {
    const int cluster = clusters.find(clusters.index.at(gv));
    plan.partOf.emplace(gv->getName().str(), number[static_cast<size_t>(partOfCluster[static_cast<size_t>(cluster)])]);
    if (gv->hasLocalLinkage() && travels(*gv)) plan.shared.push_back(gv->getName().str());
  }
  return plan;
}

std::unique_ptr<llvm::Module> loadPart(llvm::MemoryBufferRef bitcode, const SplitPlan& plan, int part,
                                       llvm::LLVMContext& ctx) {
  llvm::Expected<std::unique_ptr<llvm::Module>> loaded = llvm::getLazyBitcodeModule(bitcode, ctx);
  if (!loaded) KILN_THROW("cannot read part {} of module '{}': {}", part, bitcode.getBufferIdentifier().str(), llvm::toString(loaded.takeError()));
  std::unique_ptr<llvm::Module> m = std::move(*loaded);
  for (const std::string& name : plan.shared)
    if (llvm::GlobalValue* gv = m->getNamedValue(name)) {
      gv->setLinkage(llvm::GlobalValue::ExternalLinkage);
      gv->setVisibility(llvm::GlobalValue::HiddenVisibility);
      gv->setDSOLocal(true);
    }
  // Other parts' definitions become declarations before their bodies are ever read. A declaration
  // is not dso_local (so default visibility): each part is its own object, which JITLink may place
  // anywhere in the address space (the CUDA driver's reservations left gigabytes between two
  // parts on a GPU machine), so a reference to another part must go through a GOT entry or a
  // call stub of its own object, never a 32-bit PC-relative fixup (lea of a GEMM routine's
  // address handed to the thread pool). JITLink relaxes the indirection when the target is near.
  auto external = [](llvm::GlobalValue& gv) {
    gv.setLinkage(llvm::GlobalValue::ExternalLinkage);
    gv.setVisibility(llvm::GlobalValue::DefaultVisibility);
    gv.setDSOLocal(false);
  };
  for (llvm::Function& f : *m)
    if (auto it = plan.partOf.find(f.getName().str()); it != plan.partOf.end() && it->second != part) {
      f.deleteBody();
      external(f);
    }
  for (llvm::GlobalVariable& g : m->globals())
    if (auto it = plan.partOf.find(g.getName().str()); it != plan.partOf.end() && it->second != part) {
      g.setInitializer(nullptr);
      g.setComdat(nullptr);
      external(g);
    }
  if (llvm::Error err = m->materializeAll())
    KILN_THROW("cannot read part {} of module '{}': {}", part, bitcode.getBufferIdentifier().str(), llvm::toString(std::move(err)));
  return m;
}

}  // namespace kiln::cpu
