/* cuda_emu.h: just enough of CUDA's device vocabulary for the HOST compiler
 * to build the kernels' own source (the _kernels.cuh files of kernels/)
 * and run it on the CPU, one std::thread per CUDA thread. It exists so that
 * a machine without a GPU (CI, a developer's laptop) can still run every
 * kernel's indexing, tiling, barriers and warp shuffles against its CPU twin
 * (emu/test_kernels_emulated.cpp); speed is irrelevant here.
 *
 * What it models, and what it does not:
 *   - a block is blockDim.x OS threads; __syncthreads is a barrier over all
 *     of them (every kernel here reaches its barriers with the whole block,
 *     or leaves uniformly after the last one);
 *   - __shared__ becomes `static`: one copy per kernel, shared by the
 *     block's threads (blocks run one after another);
 *   - __shfl_xor_sync exchanges through per-warp slots between two
 *     barriers of the warp's 32 threads (blockDim.x must be a multiple of
 *     32 in kernels that shuffle);
 *   - the _rn intrinsics are the plain IEEE operations (the emulator is
 *     built with -ffp-contract=off), __fmaf_rn is fmaf;
 *   - atomics are __atomic builtins; __ldg/__ldcs/__stcs plain accesses;
 *   - device math (tanhf, tanh) is the host's (glibc): so the emulator runs
 *     the kernels' logic, not CUDA's libm, and the device's tanhf accuracy
 *     is not what is tested here.
 * Only threadIdx.x / blockIdx.x / blockDim.x / gridDim.x are used by the
 * kernels; y and z are 0 / 1. */
#ifndef VQC_KERNELS_CUDA_EMU_H
#define VQC_KERNELS_CUDA_EMU_H

#include <cuda_runtime.h> /* float4, ulonglong2, uint3, dim3 (host side) */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <thread>
#include <vector>

/* The host definitions of these attributes would be ignored with warnings
 * ("device" attribute ignored); here they mean nothing at all. */
#undef __device__
#undef __host__
#undef __global__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#undef __grid_constant__
#define __device__
#define __host__
#define __global__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__

/* ---- launch geometry */

extern thread_local uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim, gridDim;

/* ---- barriers and warp exchange (state of the block being run) */

struct emu_block {
  pthread_barrier_t block;
  std::vector<pthread_barrier_t> warp; /* one per 32 threads */
  std::vector<uint64_t> slot;          /* one per thread */
};
extern emu_block *emu_current;

inline void __syncthreads() { pthread_barrier_wait(&emu_current->block); }

template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  (void)mask;
  static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
  const unsigned tid = threadIdx.x, w = tid / 32;
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof v);
  emu_current->slot[tid] = bits;
  pthread_barrier_wait(&emu_current->warp[w]);
  bits = emu_current->slot[w * 32 + ((tid % 32) ^ (unsigned)lane_mask)];
  pthread_barrier_wait(&emu_current->warp[w]); /* before slots are reused */
  T out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

/* Runs `body` (a call of the kernel with its arguments) as the grid
 * grid.x x block.x: blocks one after another, each block's threads at once. */
template <class F>
void emu_launch(unsigned grid, unsigned block, F body) {
  gridDim = dim3(grid, 1, 1);
  blockDim = dim3(block, 1, 1);
  for (unsigned b = 0; b < grid; b++) {
    emu_block st;
    pthread_barrier_init(&st.block, NULL, block);
    st.warp.resize((block + 31) / 32);
    for (auto &wb : st.warp) pthread_barrier_init(&wb, NULL, 32);
    st.slot.assign(block, 0);
    emu_current = &st;
    blockIdx = make_uint3(b, 0, 0);
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; t++)
      threads.emplace_back([t, &body] {
        threadIdx = make_uint3(t, 0, 0);
        body();
      });
    for (auto &th : threads) th.join();
    pthread_barrier_destroy(&st.block);
    for (auto &wb : st.warp) pthread_barrier_destroy(&wb);
  }
}

/* ---- intrinsics */

inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }

template <class T> inline T __ldg(const T *p) { return *p; }
template <class T> inline T __ldcs(const T *p) { return *p; }
template <class T> inline void __stcs(T *p, T v) { *p = v; }

inline unsigned long long atomicMin(unsigned long long *p,
                                    unsigned long long v) {
  unsigned long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, true,
                                                 __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
  }
  return old;
}
inline unsigned long long atomicAdd(unsigned long long *p,
                                    unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

#endif /* VQC_KERNELS_CUDA_EMU_H */
