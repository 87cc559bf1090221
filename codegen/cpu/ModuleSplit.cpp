#include "codegen/cpu/ModuleSplit.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ValueMapper.h>

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

std::vector<ModulePart> splitModule(llvm::Module& m, int maxParts, int64_t minInstructions) {
  const int64_t total = instructionCount(m);
  const int parts = static_cast<int>(std::clamp<int64_t>(total / std::max<int64_t>(minInstructions, 1), 1, maxParts));
  if (parts <= 1) return {};

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
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return clusterSize[static_cast<size_t>(a)] > clusterSize[static_cast<size_t>(b)]; });
  std::vector<ModulePart> out(static_cast<size_t>(parts));
  std::vector<int> partOfCluster(clusterSize.size(), -1);
  for (int c : order) {
    if (clusterSize[static_cast<size_t>(c)] == 0) continue;
    auto smallest = std::min_element(out.begin(), out.end(),
                                     [](const ModulePart& a, const ModulePart& b) { return a.instructions < b.instructions; });
    smallest->instructions += clusterSize[static_cast<size_t>(c)];
    partOfCluster[static_cast<size_t>(c)] = static_cast<int>(smallest - out.begin());
  }
  auto partOf = [&](const llvm::GlobalValue* gv) {
    auto it = clusters.index.find(gv);
    return it == clusters.index.end() ? -1 : partOfCluster[static_cast<size_t>(clusters.find(it->second))];
  };

  // Functions called across parts become symbols of the JITDylib, hidden from other dylibs.
  for (const llvm::GlobalValue* gv : defined)
    if (gv->hasLocalLinkage() && travels(*gv)) {
      auto* g = const_cast<llvm::GlobalValue*>(gv);
      g->setLinkage(llvm::GlobalValue::ExternalLinkage);
      g->setVisibility(llvm::GlobalValue::HiddenVisibility);
      g->setDSOLocal(true);
    }

  for (int p = 0; p < parts; ++p) {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> part =
        llvm::CloneModule(m, map, [&](const llvm::GlobalValue* gv) { return partOf(gv) == p; });
    llvm::raw_string_ostream os(out[static_cast<size_t>(p)].bitcode);
    llvm::WriteBitcodeToFile(*part, os);
  }
  std::erase_if(out, [](const ModulePart& part) { return part.instructions == 0; });
  std::stable_sort(out.begin(), out.end(), [](const ModulePart& a, const ModulePart& b) { return a.instructions > b.instructions; });
  return out;
}

}  // namespace kiln::cpu
