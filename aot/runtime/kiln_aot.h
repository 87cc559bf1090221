/* The tables `kiln aot` generates for one compiled program, and the runtime that interprets them.
 *
 * A CPU library written by `kiln aot` is built from three pieces:
 *   NAME.kernels.o  the program's kernels as machine code: LLVM's object emission of the very
 *                   module the JIT compiles (codegen/cpu), every symbol hidden; it also holds the
 *                   read-only data blobs below (constants, embedded weights)
 *   NAME.c          generated: `#include`s nothing of kiln; it is this header, then the tables of
 *                   the program (kiln_aot_program), then the runtime (kiln_aot_common.c,
 *                   kiln_aot_safetensors.c, kiln_aot_cpu.c), then the public NAME_* functions of
 *                   NAME.h, each a one-line call into the runtime
 *   libNAME.so      NAME.c and NAME.kernels.o linked by the system C compiler with
 *                   -fvisibility=hidden: only the NAME_* functions are exported, so any number of
 *                   kiln libraries can live in one process
 * and depends on libc, libm and libpthread only.
 *
 * The CPU runtime does, table-driven, exactly what kiln::cpu::Program::run does
 * (codegen/cpu/Program.cpp), so a library's results equal the JIT's bit for bit for the same
 * thread count:
 *   - every kernel is `void fn(void** bufs, void* pool)` (codegen/cpu/KernelAbi.h); bufs holds the
 *     addresses of its arguments (kiln_aot_kernel.args, resolved through kiln_aot_loc) followed by
 *     one scratch area; `pool` is passed on to kiln_parallel_for, which the runtime defines with
 *     the chunking of kiln::rt::ThreadPool::run (runtime/ThreadPool.h);
 *   - outputs are copied out after the last kernel; then updates: an OWN update buffer trades
 *     places with its parameter (first come per buffer), every other update value is copied,
 *     all copies taken before any trade.
 *
 * A CUDA library (`kiln aot --target cuda`) has no object file: NAME.c holds the tables of a
 * kiln_aot_cuda_program (the layout of kiln::cuda::ProgramLayout, codegen/cuda/Layout.h), pulls
 * the cubins, the PTX, the constants and the embedded weights in as read-only data with the
 * assembler's .incbin, and pastes kiln_aot_common.c, kiln_aot_safetensors.c and kiln_aot_cuda.c.
 * That runtime opens the CUDA driver (libcuda.so.1) with dlopen and does what
 * kiln::cuda::Program::run does: inputs to the device, every launch in order on one stream, the
 * outputs back, the update copies (staged ones first). It depends on libc, libm, libpthread and
 * libdl; the driver is needed at run time only.
 *
 * Everything in these files is internal to one library: the generated code includes it once and
 * every name it defines is static or hidden. */
#ifndef KILN_AOT_H
#define KILN_AOT_H

#include <stddef.h>
#include <stdint.h>

/* Element types, numbered as kiln::DType's safetensors names: F32 F16 BF16 F64 I32 I64 BOOL. */
enum {
  KILN_AOT_F32 = 0,
  KILN_AOT_F16 = 1,
  KILN_AOT_BF16 = 2,
  KILN_AOT_F64 = 3,
  KILN_AOT_I32 = 4,
  KILN_AOT_I64 = 5,
  KILN_AOT_BOOL = 6
};

/* Status codes; the generated header re-exports them as NAME_OK, NAME_E_... */
enum {
  KILN_AOT_OK = 0,
  KILN_AOT_E_ARGUMENT = 1, /* a NULL pointer, an unknown name or index, a size that does not match */
  KILN_AOT_E_IO = 2,       /* a file cannot be opened, read or written */
  KILN_AOT_E_FORMAT = 3,   /* a weights file is malformed, lacks a parameter or has the wrong type */
  KILN_AOT_E_MEMORY = 4,   /* out of memory */
  KILN_AOT_E_CPU = 5,      /* this CPU lacks an instruction-set feature the kernels were built for */
  KILN_AOT_E_STATE = 6,    /* the call does not apply to this library (train_step of an inference one) */
  KILN_AOT_E_CUDA = 7      /* CUDA: no usable driver or device, or a driver call failed */
};

/* Where a buffer lives. INPUT: the caller's input `index` (CUDA: its device buffer); PARAM:
 * parameter `index`; ARENA: the context's arena at byte `offset`; OWN: the context's owned buffer
 * `index`; SCRATCH (CUDA kernel arguments only): the scratch buffer at byte `offset`. */
enum { KILN_AOT_INPUT = 0, KILN_AOT_PARAM = 1, KILN_AOT_ARENA = 2, KILN_AOT_OWN = 3, KILN_AOT_SCRATCH = 4 };

typedef struct {
  int32_t kind;
  int32_t index;
  int64_t offset;
} kiln_aot_loc;

typedef struct {
  const char* name;
  int32_t dtype; /* KILN_AOT_F32 ... */
  int32_t rank;
  const int64_t* shape; /* rank entries (NULL when rank is 0) */
  int64_t numel;
  int64_t bytes; /* numel * element size */
  int64_t index_bound; /* an i32/i64 input read as indices: each must lie in [0, index_bound); else 0 */
} kiln_aot_tensor;

typedef void (*kiln_aot_kernel_fn)(void** bufs, void* pool);

typedef struct {
  const char* name; /* "k3_matmul_add_relu": the ops it holds */
  kiln_aot_kernel_fn fn;
  int32_t num_args;
  const kiln_aot_loc* args;
  /* Scratch the kernel needs with T threads: scratch_base + T * scratch_per_thread bytes. */
  int64_t scratch_base;
  int64_t scratch_per_thread;
} kiln_aot_kernel;

/* A buffer the context owns (an intermediate without an arena slot, an update value, a constant).
 * Constants are copied from `constants + constant_offset` at create; others start zeroed. */
typedef struct {
  kiln_aot_tensor type;
  int64_t constant_offset; /* -1: not a constant */
} kiln_aot_owned;

typedef struct {
  int32_t param; /* index into params */
  kiln_aot_loc value;
} kiln_aot_update;

typedef struct {
  const char* name; /* the library's NAME */
  int32_t num_inputs;
  const kiln_aot_tensor* inputs;
  int32_t num_outputs;
  const kiln_aot_tensor* outputs;
  const kiln_aot_loc* output_locs;
  int32_t num_params;
  const kiln_aot_tensor* params;
  int32_t num_updates;
  const kiln_aot_update* updates;
  int32_t num_owned;
  const kiln_aot_owned* owned;
  const unsigned char* constants; /* 64-byte aligned; NULL when there are none */
  int64_t arena_bytes;
  int32_t num_kernels;
  const kiln_aot_kernel* kernels;
  /* Embedded weights: a whole safetensors file; NULL when built without --embed-weights. */
  const unsigned char* weights;
  int64_t weights_bytes;
  /* The instruction-set features the kernels use, comma-separated LLVM names among: avx, avx2,
   * fma, f16c, avx512f, avx512bw, avx512dq, avx512vl, avx512bf16, amx-tile, amx-bf16. */
  const char* cpu_features;
  /* For a training step: the indices of the batch, labels and learning-rate inputs and of the
   * loss output; all -1 for an inference program. */
  int32_t train_batch, train_labels, train_lr, train_loss;
} kiln_aot_program;

/* ---- CUDA libraries ---- */

/* One kernel launch: `entry` of the module with `num_args` device pointers. */
typedef struct {
  const char* entry;
  uint32_t grid[3], block[3];
  uint32_t shared_bytes; /* dynamic shared memory */
  int32_t num_args;
  const kiln_aot_loc* args;
} kiln_aot_launch;

/* Machine code for one architecture: `sm` 80 is compute capability 8.0. A cubin runs on devices
 * of the same major version and a minor version at least its own. */
typedef struct {
  int32_t sm;
  const unsigned char* image;
  int64_t bytes;
} kiln_aot_cubin;

typedef struct {
  /* The signature, parameters, owned buffers (constants from base.constants), the outputs'
   * locations and the update copies (only those whose value is not the parameter itself);
   * base.num_kernels is 0 and base.cpu_features NULL. */
  kiln_aot_program base;
  /* Per update: 1 when its value is first copied to a staging buffer of its own (a value that is
   * a parameter or an input), so no copy reads a parameter another one overwrote. */
  const unsigned char* update_staged;
  int32_t num_cubins;
  const kiln_aot_cubin* cubins;
  /* The same code as PTX for compute capability ptx_sm / 10 . ptx_sm % 10 (NUL-terminated), for
   * devices no cubin fits: the driver compiles it when the context is created. */
  const char* ptx;
  int32_t ptx_sm;
  int32_t cuda_version; /* of the NVRTC that compiled it: 13000 is CUDA 13.0 */
  int64_t scratch_bytes;
  int32_t num_launches;
  const kiln_aot_launch* launches; /* run order */
} kiln_aot_cuda_program;

#endif
