// Does a CTA that exits with a TMA (bulk) store still reading its shared memory lose data? SEMANTICS 4
// calls it exit-inflight from the CUDA Programming Guide's text; CUTLASS 4.2's SM100 epilogue without a C
// operand ends that way (sm100_epilogue_tma_warpspecialized.hpp store_tail). Measured here: each CTA fills
// its shared memory with a pattern of its own, thread 0 issues one bulk store of it to global memory and,
// in mode 0, the CTA exits at once (no cp.async.bulk.wait_group.read); mode 1 waits first. Later CTAs on
// the same SM reuse that shared memory with their own patterns. The host counts words that differ.
// No thread waits on anything that may not come, so the probe cannot hang the GPU.
// Build: nvcc -O2 -arch=sm_90a probe_store_exit.cu -o probe_store_exit
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

constexpr int BYTES = 96 * 1024;

__global__ void __launch_bounds__(256) k(uint32_t* out, int mode) {
  extern __shared__ __align__(128) uint32_t smem[];
  const uint32_t tag = blockIdx.x * 2654435761u + 12345u;
  for (int i = threadIdx.x; i < BYTES / 4; i += blockDim.x) smem[i] = tag ^ i;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 :: "l"(out + (size_t)blockIdx.x * (BYTES / 4)), "r"(s), "r"(BYTES) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (mode == 1) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int grid = sms * 64;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, BYTES);
  uint32_t* d;
  size_t words = (size_t)grid * (BYTES / 4);
  if (cudaMalloc(&d, words * 4) != cudaSuccess) { printf("malloc failed\n"); return 1; }
  std::vector<uint32_t> h(words);
  for (int mode = 0; mode < 2; ++mode) {
    for (int rep = 0; rep < 5; ++rep) {
      cudaMemset(d, 0, words * 4);
      k<<<grid, 256, BYTES>>>(d, mode);
      cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) { printf("mode %d rep %d: error %s\n", mode, rep, cudaGetErrorString(e)); return 1; }
      cudaMemcpy(h.data(), d, words * 4, cudaMemcpyDeviceToHost);
      size_t bad = 0, bad_ctas = 0;
      for (int b = 0; b < grid; ++b) {
        const uint32_t tag = b * 2654435761u + 12345u;
        size_t here = 0;
        for (int i = 0; i < BYTES / 4; ++i) here += h[(size_t)b * (BYTES / 4) + i] != (tag ^ (uint32_t)i);
        bad += here;
        bad_ctas += here != 0;
      }
      printf("mode %d (%s) rep %d: %d CTAs, %zu with wrong words, %zu wrong words of %zu\n", mode,
             mode ? "wait_group.read before exit" : "exit with the store in flight", rep, grid, bad_ctas, bad, words);
    }
  }
  return 0;
}
