// tcgen05 for pipecheck's PTX tests (sm_100a): lane 0 of warp 0 loads k stages with cp.async.bulk onto
// `full`; lane 0 of warp 1 waits each, issues a tcgen05.mma reading the stage through its SMEM descriptor and
// releases it with tcgen05.commit onto `empty` (CUTLASS's UMMA consumer_release); the producer's tail
// waits for every stage's last release before the CTA exits. Planted bugs:
// -DRELEASE_EARLY arrives on `empty` as soon as the MMA is issued (the copy refills a stage the MMA still
// reads), -DCOMMIT_FULL commits onto the wrong barrier (the producer waits forever).
#include <cstdint>
#ifndef STAGES
#define STAGES 3
#endif
__global__ void __launch_bounds__(64) umma_mini(int k, const uint8_t* src, int* out) {
  __shared__ __align__(1024) uint8_t A[STAGES][4096];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((uint32_t)__cvta_generic_to_shared(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((uint32_t)__cvta_generic_to_shared(&empty[s])));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  for (int i = 0; i < k; ++i) {
    const int s = i % STAGES;
    const uint32_t ph = (i / STAGES) & 1;
    const uint32_t f = (uint32_t)__cvta_generic_to_shared(&full[s]);
    const uint32_t e = (uint32_t)__cvta_generic_to_shared(&empty[s]);
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(&A[s][0]);
    if (warp == 0 && lane == 0) {
      asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                   :: "r"(e), "r"(ph ^ 1) : "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 4096;" :: "r"(f) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 4096, [%2];"
                   :: "r"(a), "l"(src + 4096 * i), "r"(f) : "memory");
    }
    if (warp == 1 && lane == 0) {
      asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                   :: "r"(f), "r"(ph) : "memory");
      const uint64_t desc = (uint64_t)((a & 0x3FFFF) >> 4);
      asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n"
                   " tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %1, %2, p;\n}"
                   :: "r"(0u), "l"(desc), "r"(0x08100490u), "r"(i) : "memory");
#if defined(RELEASE_EARLY)
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(e) : "memory");
#elif defined(COMMIT_FULL)
      asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(f) : "memory");
#else
      asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(e) : "memory");
#endif
    }
  }
  if (warp == 0 && lane == 0) {  // the producer tail: every stage's last release, so no MMA is in flight at exit
    for (int i = k; i < k + STAGES; ++i) {
      const uint32_t e = (uint32_t)__cvta_generic_to_shared(&empty[i % STAGES]);
      asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                   :: "r"(e), "r"(((i / STAGES) & 1) ^ 1) : "memory");
    }
  }
  if (threadIdx.x == 0) out[0] = k;
}
