// A small mbarrier protocol for pipecheck's PTX tests: thread 0 initialises one barrier for the
// whole block; every thread arrives on it and waits for the phase, k times.
#include <cassert>
#include <cstdint>
__global__ void __launch_bounds__(64) mini(int k, int* out) {
  __shared__ __align__(8) uint64_t bar;
  uint32_t a = (uint32_t)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(a), "r"(COUNT));
#ifndef NO_FENCE
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
  }
  __syncthreads();
#ifdef ASSERT_ONE_WARP
  assert(threadIdx.x < 32);  // planted: the block has two warps
#endif
  for (int i = 0; i < k; ++i) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                 :: "r"(a), "r"(i & 1) : "memory");
  }
  if (threadIdx.x == 0) out[0] = k;
}
