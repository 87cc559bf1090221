// Shape and dtype rules named by the op table (ir/Ops.def). Each takes the operand types and the
// resolved attributes and returns the result type, or reports a user error through ctx.fail.
#pragma once

#include "ir/OpInfo.h"

namespace kiln::ir::rules {

#define KILN_RULE(Name) TensorType Name(const InferContext& ctx);
KILN_RULE(inferUnaryNumeric)
KILN_RULE(inferUnaryFloat)
KILN_RULE(inferUnaryBool)
KILN_RULE(inferUnaryAny)
KILN_RULE(inferCast)
KILN_RULE(inferBinaryNumeric)
KILN_RULE(inferBinaryFloat)
KILN_RULE(inferBinaryBool)
KILN_RULE(inferCompare)
KILN_RULE(inferSelect)
KILN_RULE(inferReduce)
KILN_RULE(inferReduceFloat)
KILN_RULE(inferArgReduce)
KILN_RULE(inferReshape)
KILN_RULE(inferPermute)
KILN_RULE(inferBroadcast)
KILN_RULE(inferSlice)
KILN_RULE(inferConcat)
KILN_RULE(inferPad)
KILN_RULE(inferGather)
KILN_RULE(inferOneHot)
KILN_RULE(inferMatMul)
KILN_RULE(inferConv2d)
KILN_RULE(inferPool2d)
KILN_RULE(inferSliceGrad)
KILN_RULE(inferScatterAdd)
KILN_RULE(inferConv2dGradInput)
KILN_RULE(inferConv2dGradWeight)
KILN_RULE(inferMaxPool2dGrad)
KILN_RULE(inferAvgPool2dGrad)
KILN_RULE(inferConstant)
KILN_RULE(inferIota)
KILN_RULE(inferRandom)
KILN_RULE(inferLinear)
KILN_RULE(inferSoftmax)
KILN_RULE(inferCrossEntropy)
KILN_RULE(inferPairLoss)
KILN_RULE(inferLayerNorm)
KILN_RULE(inferDropout)
KILN_RULE(inferEmbedding)
KILN_RULE(inferAttention)
#undef KILN_RULE

/// Every result: non-negative dimensions and at most 2^48 elements (so byte counts never overflow).
void checkResultSize(const InferContext& ctx, const TensorType& result);

}  // namespace kiln::ir::rules
