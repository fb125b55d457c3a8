// A producer thread fills a 2-stage ring with TMA bulk copies; a consumer warp waits for each
// stage and reads it at a per-lane offset (ab[s][lane * 4], s the loop-carried stage index),
// then releases it. Variant -DCROSS_STAGE: lane 31 reads the next stage's first word (its
// address leaves the stage's buffer), so lanes of the warp touch different buffers.
#include <cstdint>
constexpr int kStages = 2;
constexpr int kWords = 128;
__global__ void __launch_bounds__(64) lane_ring(const int* src, int* out, int tiles) {
  __shared__ alignas(128) int ab[kStages][kWords];
  __shared__ alignas(8) uint64_t full[kStages], empty[kStages];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((uint32_t)__cvta_generic_to_shared(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;" :: "r"((uint32_t)__cvta_generic_to_shared(&empty[s])));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {
    if (lane == 0) {
      for (int t = 0; t < tiles; ++t) {
        int s = t % kStages;
        uint32_t e = (uint32_t)__cvta_generic_to_shared(&empty[s]);
        uint32_t f = (uint32_t)__cvta_generic_to_shared(&full[s]);
        asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                     :: "r"(e), "r"(((t / kStages) & 1) ^ 1) : "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(f), "r"(kWords * 4) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"((uint32_t)__cvta_generic_to_shared(&ab[s][0])), "l"(src + t * kWords), "r"(kWords * 4), "r"(f)
                     : "memory");
      }
    }
  } else {
    int acc = 0;
    for (int t = 0; t < tiles; ++t) {
      int s = t % kStages;
      uint32_t e = (uint32_t)__cvta_generic_to_shared(&empty[s]);
      uint32_t f = (uint32_t)__cvta_generic_to_shared(&full[s]);
      asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                   :: "r"(f), "r"((t / kStages) & 1) : "memory");
#ifdef CROSS_STAGE
      acc += *(volatile int*)&ab[s][lane * 4 + (lane == 31 ? kWords - 124 : 0)];
#else
      acc += *(volatile int*)&ab[s][lane * 4];
#endif
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(e) : "memory");
    }
    out[threadIdx.x] = acc;
  }
}
