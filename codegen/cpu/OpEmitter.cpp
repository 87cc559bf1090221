#include "codegen/cpu/OpEmitter.h"

#include "codegen/cpu/Elements.h"

namespace kiln::cpu::opkernels {

llvm::Function* OpEmitter::emit(int64_t items, int64_t workPerItem, bool scratch,
                                const std::function<void(Value*, Value*)>& body) {
  llvm::LLVMContext& ctx = m_.getContext();
  llvm::Type* ptr = b.getPtrTy();
  auto* chunkType = llvm::FunctionType::get(b.getVoidTy(), {ptr, b.getInt64Ty(), b.getInt64Ty()}, false);
  auto* chunk = llvm::Function::Create(chunkType, llvm::Function::InternalLinkage, k_.name + ".chunk", m_);
  chunk->setDoesNotThrow();
  // Short zero runs are stores on purpose (zeroShort): LLVM must not turn them into memset calls.
  chunk->addFnAttr("no-builtin-memset");
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", chunk));
  size_t count = k_.buffers.size() + (scratch ? 1 : 0);
  for (size_t i = 0; i < count; ++i) {
    Value* slot = b.CreateConstInBoundsGEP1_64(ptr, chunk->getArg(0), i);
    std::string name = i < k_.buffers.size() ? k_.buffers[i].name : "scratch";
    bases_.push_back(b.CreateAlignedLoad(ptr, slot, llvm::Align(8), name));
  }
  body(chunk->getArg(1), chunk->getArg(2));
  b.CreateRetVoid();

  auto* f = llvm::Function::Create(kernelFunctionType(ctx), llvm::Function::ExternalLinkage, k_.name, m_);
  f->setDoesNotThrow();
  f->addFnAttr("no-builtin-memset");  // the chunk may be inlined here
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", f));
  int64_t grain = std::max<int64_t>(1, (kParallelWork + workPerItem - 1) / std::max<int64_t>(workPerItem, 1));
  if (items >= 2 * grain)
    b.CreateCall(declareParallelFor(m_), {f->getArg(1), i64(0), i64(items), i64(grain), chunk, f->getArg(0)});
  else if (items > 0)
    b.CreateCall(chunk, {f->getArg(0), i64(0), i64(items)});
  b.CreateRetVoid();
  return f;
}

Value* OpEmitter::laneIndices(Value* i, int lanes) {
  if (lanes == 1) return i;
  std::vector<llvm::Constant*> steps;
  for (int l = 0; l < lanes; ++l) steps.push_back(llvm::ConstantInt::get(i->getType(), l));
  return b.CreateAdd(splat(b, i, lanes), llvm::ConstantVector::get(steps));
}

Carried OpEmitter::loop(Value* begin, Value* end, int64_t step, const Carried& init,
                        const std::function<Carried(Value*, const Carried&)>& body, Unroll unroll) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* before = b.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(b.getContext(), "loop", f);
  auto* exit = llvm::BasicBlock::Create(b.getContext(), "loop.end", f);
  b.CreateCondBr(b.CreateICmpSLT(begin, end), head, exit);
  b.SetInsertPoint(head);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  i->addIncoming(begin, before);
  Carried phis;
  for (Value* v : init) {
    llvm::PHINode* p = b.CreatePHI(v->getType(), 2);
    p->addIncoming(v, before);
    phis.push_back(p);
  }
  Carried next = body(i, phis);
  Value* inext = add(i, step);
  llvm::BasicBlock* latch = b.GetInsertBlock();
  i->addIncoming(inext, latch);
  for (size_t k = 0; k < phis.size(); ++k) llvm::cast<llvm::PHINode>(phis[k])->addIncoming(next[k], latch);
  llvm::BranchInst* back = b.CreateCondBr(b.CreateICmpSLT(inext, end), head, exit);
  if (unroll == Unroll::No) {
    llvm::LLVMContext& ctx = b.getContext();
    llvm::Metadata* disable = llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.unroll.disable")});
    llvm::MDNode* id = llvm::MDNode::getDistinct(ctx, {nullptr, disable});
    id->replaceOperandWith(0, id);
    back->setMetadata(llvm::LLVMContext::MD_loop, id);
  }
  b.SetInsertPoint(exit);
  Carried after;
  for (size_t k = 0; k < init.size(); ++k) {
    llvm::PHINode* p = b.CreatePHI(init[k]->getType(), 2);
    p->addIncoming(init[k], before);
    p->addIncoming(next[k], latch);
    after.push_back(p);
  }
  return after;
}

void OpEmitter::loop(Value* begin, Value* end, const std::function<void(Value*)>& body) {
  loop(begin, end, 1, {}, [&](Value* i, const Carried&) {
    body(i);
    return Carried{};
  });
}

void OpEmitter::forLanes(Value* begin, Value* end, int lanes, const std::function<void(Value*, int)>& body,
                         Unroll unroll) {
  auto run = [&](int n) {
    return [&body, n](Value* i, const Carried&) {
      body(i, n);
      return Carried{};
    };
  };
  if (lanes > 1) {
    Value* vectorEnd = add(begin, mul(div(sub(end, begin), lanes), lanes));
    loop(begin, vectorEnd, lanes, {}, run(lanes), unroll);
    begin = max(begin, vectorEnd);
  }
  loop(begin, end, 1, {}, run(1), unroll);
}

void OpEmitter::when(Value* cond, const std::function<void()>& then, const std::function<void()>& otherwise) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  auto* yes = llvm::BasicBlock::Create(b.getContext(), "then", f);
  auto* no = otherwise ? llvm::BasicBlock::Create(b.getContext(), "else", f) : nullptr;
  auto* done = llvm::BasicBlock::Create(b.getContext(), "endif", f);
  b.CreateCondBr(cond, yes, no ? no : done);
  b.SetInsertPoint(yes);
  then();
  b.CreateBr(done);
  if (no) {
    b.SetInsertPoint(no);
    otherwise();
    b.CreateBr(done);
  }
  b.SetInsertPoint(done);
}

Value* OpEmitter::address(Value* base, DType t, Value* index) {
  return b.CreateInBoundsGEP(storageType(b, t), base, index);
}

Value* OpEmitter::loadRaw(Value* base, DType t, Value* index, int lanes) {
  return b.CreateAlignedLoad(withLanes(storageType(b, t), lanes), address(base, t, index), llvm::Align(dtypeSize(t)));
}

Value* OpEmitter::load(Value* base, DType t, Value* index, int lanes) {
  return fromStorage(b, t, loadRaw(base, t, index, lanes));
}

void OpEmitter::storeRaw(Value* base, DType t, Value* index, Value* stored) {
  b.CreateAlignedStore(stored, address(base, t, index), llvm::Align(dtypeSize(t)));
}

void OpEmitter::store(Value* base, DType t, Value* index, Value* v) { storeRaw(base, t, index, toStorage(b, t, v)); }

void OpEmitter::zero(Value* base, DType t, Value* index, Value* count) {
  b.CreateMemSet(address(base, t, index), b.getInt8(0), mul(count, dtypeSize(t)), llvm::Align(dtypeSize(t)));
}

void OpEmitter::zeroShort(Value* base, DType t, Value* index, Value* count) {
  int lanes = std::max(1, isa_.f32Lanes * 4 / dtypeSize(t));
  forLanes(index, add(index, count), lanes, [&](Value* i, int n) {
    storeRaw(base, t, i, llvm::Constant::getNullValue(withLanes(storageType(b, t), n)));
  });
}

void OpEmitter::copy(Value* dst, Value* dstIndex, Value* src, Value* srcIndex, DType t, Value* count) {
  llvm::Align align(dtypeSize(t));
  b.CreateMemCpy(address(dst, t, dstIndex), align, address(src, t, srcIndex), align, mul(count, dtypeSize(t)));
}

Value* addIn(llvm::IRBuilderBase& b, DType t, Value* x, Value* y) {
  return roundTo(b, t, isFloat(t) ? b.CreateFAdd(x, y) : b.CreateAdd(x, y));
}

}  // namespace kiln::cpu::opkernels
