// A 2-SM UMMA pipeline for pipecheck's PTX tests (sm_100a, one 2x1x1 cluster), the protocol of CUTLASS's
// SM100 2-SM mainloop (sm100_mma_warpspecialized, PipelineTmaUmmaAsync) in a few lines: lane 0 of warp 0 of
// *each* CTA waits its own `empty[s]` and loads its half of the stage with
// cp.async.bulk.tensor...cta_group::2 onto the *even* CTA's `full[s]` (the barrier address with its peer bit
// cleared, as SM100_TMA_2SM_LOAD does); the even CTA's producer announces both halves (expect_tx 2 x 4096).
// Lane 0 of warp 1 of the even CTA waits `full[s]`, issues one tcgen05.mma.cta_group::2 reading the stage in
// both CTAs, and releases it with tcgen05.commit.cta_group::2 multicast to both CTAs' `empty[s]`
// (umma_arrive_multicast_2x1SM). Each producer's tail waits for its stages' last release.
// Planted bugs: -DCOMMIT_OWN_ONLY commits with mask 0b01 (the odd CTA's producer waits forever),
// -DPEER_SKIPS_EMPTY_WAIT has the odd CTA's producer load without waiting for the stage's release (its copy
// lands in the half the even CTA's pair MMA may still read), -DODD_ISSUES has the odd CTA issue the pair MMA (not a CTA pair's leader: refused by the front end).
#include <cstdint>
#ifndef STAGES
#define STAGES 2
#endif
#define HALF 4096
struct alignas(64) TensorMap { unsigned char bytes[128]; };

__device__ __forceinline__ void wait_parity(uint32_t bar, uint32_t ph) {
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
               :: "r"(bar), "r"(ph) : "memory");
}

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(64)
umma_2sm_mini(const __grid_constant__ TensorMap tmap, int k, int* out) {
  __shared__ __align__(1024) uint8_t A[STAGES][HALF];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#if defined(ODD_ISSUES)
  const bool mma_cta = (rank % 2) == 1;
#else
  const bool mma_cta = (rank % 2) == 0;
#endif
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((uint32_t)__cvta_generic_to_shared(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((uint32_t)__cvta_generic_to_shared(&empty[s])));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // every CTA's barriers are initialised before any CTA signals its peer's
  asm volatile("barrier.cluster.arrive.release.aligned;\n barrier.cluster.wait.acquire.aligned;" ::: "memory");
  // (not unrolled: each copy site is then one copy per stage, whose bytes pipecheck takes from the expect_tx)
#pragma unroll 1
  for (int i = 0; i < k; ++i) {
    const int s = i % STAGES;
    const uint32_t ph = (i / STAGES) & 1;
    const uint32_t f = (uint32_t)__cvta_generic_to_shared(&full[s]);
    const uint32_t e = (uint32_t)__cvta_generic_to_shared(&empty[s]);
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(&A[s][0]);
    if (warp == 0 && lane == 0) {
#if defined(PEER_SKIPS_EMPTY_WAIT)
      if (rank % 2 == 0)
#endif
      wait_parity(e, ph ^ 1);
      if (rank % 2 == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(f), "n"(2 * HALF) : "memory");
      asm volatile("cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes"
                   " [%0], [%1, {%2, %3}], [%4];"
                   :: "r"(a), "l"(reinterpret_cast<uint64_t>(&tmap)), "r"(0), "r"(i), "r"(f & 0xFEFFFFFFu) : "memory");
    }
    if (warp == 1 && lane == 0 && mma_cta) {
      wait_parity(f, ph);
      const uint64_t desc = (uint64_t)((a & 0x3FFFF) >> 4);
      asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n"
                   " tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %1, %2, p;\n}"
                   :: "r"(0u), "l"(desc), "r"(0x08200490u), "r"(i) : "memory");
#if defined(COMMIT_OWN_ONLY)
      const uint16_t mask = 0x1;
#else
      const uint16_t mask = 0x3;
#endif
      asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
                   :: "r"(e), "h"(mask) : "memory");
    }
  }
  if (warp == 0 && lane == 0) {  // the producer tail: every stage's last release, so no MMA reads this CTA at exit
    for (int i = k; i < k + STAGES; ++i) {
      const uint32_t e = (uint32_t)__cvta_generic_to_shared(&empty[i % STAGES]);
      wait_parity(e, ((i / STAGES) & 1) ^ 1);
    }
  }
  if (threadIdx.x == 0) out[rank] = k;
}
