/* The CUDA runtime of AOT libraries (aot/runtime/kiln_aot_cuda.c) declares the driver's types and
 * entry points itself, so that a library builds without CUDA's headers. Here they are taken from
 * <cuda.h> instead (KAOT_USE_CUDA_H): every entry point's type must be the one cuda.h declares (a
 * compile error otherwise), every symbol the runtime loads the one cuda.h's macros select
 * (cuMemAlloc → cuMemAlloc_v2), and every enum value the runtime uses cuda.h's. */
#define _GNU_SOURCE 1
#include <cuda.h>
#define KAOT_USE_CUDA_H 1
#include "aot/runtime/kiln_aot.h"
#include "aot/runtime/kiln_aot_common.c"
#include "aot/runtime/kiln_aot_safetensors.c"
#include "aot/runtime/kiln_aot_cuda.c"

#define KILN_STR2(x) #x
#define KILN_STR(x) KILN_STR2(x)

#define KILN_CHECK_TYPE(member, symbol, params)                                                                 \
  _Static_assert(__builtin_types_compatible_p(__typeof__(((kaot_cu_api*)0)->member), __typeof__(&cu##member)), \
                 "the runtime's type of cu" #member " is not cuda.h's");
KAOT_CU_FUNCTIONS(KILN_CHECK_TYPE)

_Static_assert((int)KAOT_CUDA_ERROR_OUT_OF_MEMORY == (int)CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY");
_Static_assert((int)KAOT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major");
_Static_assert((int)KAOT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor");
_Static_assert((int)KAOT_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == (int)CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
               "max shared memory opt-in");
_Static_assert((int)KAOT_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES == (int)CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "static shared size");
_Static_assert((int)KAOT_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES == (int)CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
               "max dynamic shared size");
_Static_assert((int)KAOT_CU_STREAM_NON_BLOCKING == (int)CU_STREAM_NON_BLOCKING, "CU_STREAM_NON_BLOCKING");
_Static_assert(sizeof(kaot_cu_ptr) == 8, "CUdeviceptr");

int main(void) {
  int bad = 0, count = 0;
#define KILN_CHECK_NAME(member, symbol, params)                                                               \
  ++count;                                                                                                    \
  if (strcmp(symbol, KILN_STR(cu##member)) != 0) {                                                           \
    printf("cu%s: the runtime loads %s, cuda.h calls %s\n", #member, symbol, KILN_STR(cu##member));            \
    bad = 1;                                                                                                  \
  }
  KAOT_CU_FUNCTIONS(KILN_CHECK_NAME)
  printf("%d driver entry points: %s\n", count, bad ? "MISMATCH" : "types, symbols and constants as in cuda.h");
  return bad;
}
