// The kiln C++ front end in one include: Tracer and Tensor, the tensor ops, nn modules, the build
// API (training step and inference graph from a model) and the model zoo.
#pragma once

#include "frontend/Build.h"
#include "frontend/Init.h"
#include "frontend/Ops.h"
#include "frontend/Tensor.h"
#include "frontend/Zoo.h"
#include "frontend/nn/Layers.h"
#include "frontend/nn/Module.h"
#include "frontend/nn/Recurrent.h"
#include "frontend/nn/Transformer.h"
