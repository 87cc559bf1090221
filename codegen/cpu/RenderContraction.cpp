// The kernel renderer's contractions: the epilogue over one finished block of the product,
// handed to the packed GEMM (Gemm.h) that calls it.
#include "codegen/cpu/Elements.h"
#include "codegen/cpu/Gemm.h"
#include "codegen/cpu/RenderKernel.h"
#include "kernels/Simplify.h"
#include "support/Error.h"

#include <limits>

namespace kiln::cpu::render {

using ir::OpKind;

std::array<int, 3> KernelRenderer::resultSplit() const {
  int rank = static_cast<int>(k_.contraction.result.shape.size());
  switch (k_.contraction.op) {
    case OpKind::MatMul: return {rank - 2, 1, 1};
    case OpKind::Conv2d:
    case OpKind::Conv2dGradInput: return {1, 1, 2};
    case OpKind::Conv2dGradWeight: return {0, 1, 3};
    default: KILN_THROW("kernel '{}': '{}' is not a contraction", k_.name, ir::opName(k_.contraction.op));
  }
}

llvm::Function* KernelRenderer::renderEpilogue() {
  KILN_CHECK(k_.nests.size() == 1 && k_.nests[0].reductions.empty(),
             "kernel '{}': a contraction epilogue is one nest without reductions", k_.name);
  const LoopNest& source = k_.nests[0];
  std::array<int, 3> split = resultSplit();
  std::vector<int> group;
  for (int g = 0; g < 3; ++g) group.insert(group.end(), static_cast<size_t>(split[g]), g);
  KILN_CHECK(group.size() == source.domain.size(), "kernel '{}': epilogue domain rank {} != result rank {}",
             k_.name, source.domain.size(), group.size());
  LoopNest nest = kernels::simplifyNest(source, group);
  nest_ = &nest;
  lane_ = nest.domain.empty() ? 0 : nest.domain.size() - 1;
  std::array<std::vector<size_t>, 3> dims;
  for (size_t d = 0; d < nest.domain.size(); ++d) dims[static_cast<size_t>(group[d])].push_back(d);
  const DType acc = dtypeOf(accTypeOf(k_));
  llvm::Type* accType = computeType(b_, acc);

  llvm::Type* i64t = b_.getInt64Ty();
  llvm::FunctionType* type = llvm::FunctionType::get(
      b_.getVoidTy(), {b_.getPtrTy(), b_.getPtrTy(), i64t, i64t, i64t, i64t, i64t, i64t}, false);
  fn_ = newFunction(k_.name + ".epilogue", type, llvm::GlobalValue::InternalLinkage);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
  bufs_ = fn_->getArg(0);
  llvm::Value* tile = fn_->getArg(1);
  llvm::Value* ldt = fn_->getArg(2);
  llvm::Value* batch = fn_->getArg(3);
  llvm::Value *m0 = fn_->getArg(4), *m1 = fn_->getArg(5), *n0 = fn_->getArg(6), *n1 = fn_->getArg(7);
  loadBases();
  // Coordinates of a group's flat index (row-major over its dimensions).
  auto unravel = [&](size_t g, llvm::Value* flat, std::vector<llvm::Value*>& coords) {
    for (size_t i = dims[g].size(); i-- > 0;) {
      size_t d = dims[g][i];
      coords[d] = i == 0 ? flat : b_.CreateURem(flat, i64(nest.domain[d]));
      flat = b_.CreateUDiv(flat, i64(nest.domain[d]));
    }
  };
  // The lane dimension is N's only dimension when N merged into one; otherwise one point at a time.
  const bool vectorN = dims[2].size() == 1;
  loop(m0, m1, 1, [&](llvm::Value* m) {
    std::vector<llvm::Value*> coords(nest.domain.size(), i64(0));
    unravel(0, batch, coords);
    unravel(1, m, coords);
    llvm::Value* row = b_.CreateMul(b_.CreateSub(m, m0), ldt);
    auto body = [&](llvm::Value* n, int lanes) {
      std::vector<llvm::Value*> c = coords;
      unravel(2, n, c);
      Point p = point(c, lanes);
      llvm::Value* at = b_.CreateInBoundsGEP(accType, tile, b_.CreateAdd(row, b_.CreateSub(n, n0)));
      p.acc = b_.CreateAlignedLoad(withLanes(accType, lanes), at, llvm::Align(static_cast<uint64_t>(dtypeSize(acc))));
      for (const Expr& e : nest.exprs)
        if (e.kind == Expr::Kind::Acc) {
          p.acc = convert(b_, acc, e.dtype, p.acc);
          break;
        }
      stores(p, false);
    };
    if (vectorN) {
      laneLoop(n0, n1, std::numeric_limits<int64_t>::max(), false, body);
    } else {
      loop(n0, n1, 1, [&](llvm::Value* n) { body(n, 1); });
    }
  });
  b_.CreateRetVoid();
  nest_ = nullptr;
  return fn_;
}

llvm::Function* KernelRenderer::renderContraction() {
  llvm::Function* epilogue = renderEpilogue();
  return emitContraction(m_, k_.name, k_, epilogue, isa_);
}

}  // namespace kiln::cpu::render
