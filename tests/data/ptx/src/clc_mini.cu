// A small persistent sm_100a kernel scheduled by cluster launch control, for pipecheck's PTX tests:
// warp 0 asks for the next tile (clusterlaunchcontrol.try_cancel, PTX ISA 9.7.13.17), its 16-byte
// response landing on clc_full; every warp reads it (query_cancel.is_canceled, 9.7.13.18) and
// releases clc_empty; warp 1 loads K_TILES stages per tile (cp.async.bulk onto full[s]), warp 2
// reads them and releases empty[s]. Every role leaves its tile loop on the same failed response.
// Variants: -DBUG_READ_BEFORE_WAIT (warp 2 decodes the response before waiting for it),
// -DBUG_NO_CLC_RELEASE (warp 2 never releases the response), -DBUG_NO_SYNCWARP (lane 0 releases the
// response without the __syncwarp: the other lanes may not have read it, and the scheduler reuses it).
#include <cstdint>
constexpr int STAGES = 2;
constexpr int BYTES = 4096;

__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wait(uint64_t* b, uint32_t ph) {
  asm volatile("{\n .reg .pred P;\n W: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n @!P bra W;\n}"
               :: "r"(sa(b)), "r"(ph) : "memory");
}
__device__ __forceinline__ void arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(sa(b)) : "memory");
}
__device__ __forceinline__ void arrive_tx(uint64_t* b, uint32_t tx) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(b)), "r"(tx) : "memory");
}
__device__ __forceinline__ void try_cancel(void* resp, uint64_t* b) {
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];"
               :: "r"(sa(resp)), "r"(sa(b)) : "memory");
}
__device__ __forceinline__ bool canceled(void* resp) {
  uint32_t ok;
  asm volatile("{\n .reg .b128 r;\n .reg .pred p;\n ld.shared.b128 r, [%1];\n"
               " clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(ok) : "r"(sa(resp)) : "memory");
  return ok != 0;
}

#ifdef BUG_READ_BEFORE_WAIT
constexpr bool kConsumerDecodesFirst = true;
#else
constexpr bool kConsumerDecodesFirst = false;
#endif
#ifdef BUG_NO_CLC_RELEASE
constexpr bool kConsumerReleases = false;
#else
constexpr bool kConsumerReleases = true;
#endif

// fetch_next_work: wait for the response, decode it, and release it once every lane of the warp has read it
__device__ __forceinline__ bool fetch_next(void* resp, uint64_t* full, uint64_t* empty, uint32_t& phase, int lane,
                                           bool decode_first = false, bool release = true) {
  bool more;
  if (decode_first) {
    more = canceled(resp);
    wait(full, phase);
  } else {
    wait(full, phase);
    more = canceled(resp);
  }
  phase ^= 1;
  if (release) {
#ifndef BUG_NO_SYNCWARP
    __syncwarp();  // every lane has decoded the response before the warp releases it
#endif
    if (lane == 0) arrive(empty);
  }
  return more;
}

__global__ void __launch_bounds__(96) clc_mini(const char* src, int k_tiles) {
  __shared__ alignas(128) char ab[STAGES][BYTES];
  __shared__ alignas(16) char resp[16];
  __shared__ alignas(8) uint64_t full[STAGES], empty[STAGES], clc_full, clc_empty;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&empty[s])));
    }
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&clc_full)));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 3;" :: "r"(sa(&clc_empty)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  uint32_t clc_phase = 0;
  bool more = true;
  if (warp == 0) {  // the scheduler
    uint32_t empty_phase = 1;
    while (more) {
      if (lane == 0) {
        wait(&clc_empty, empty_phase);
        arrive_tx(&clc_full, 16);
        try_cancel(resp, &clc_full);
      }
      empty_phase ^= 1;
      more = fetch_next(resp, &clc_full, &clc_empty, clc_phase, lane);
    }
  } else if (warp == 1) {  // TMA producer
    int s = 0;
    uint32_t phase = 1;
    for (int tile = 0; more; ++tile) {
      for (int k = 0; k < k_tiles; ++k) {
        if (lane == 0) {
          wait(&empty[s], phase);
          arrive_tx(&full[s], BYTES);
          asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                       :: "r"(sa(ab[s])), "l"(src + (tile * k_tiles + k) * BYTES), "r"(BYTES), "r"(sa(&full[s]))
                       : "memory");
        }
        if (++s == STAGES) { s = 0; phase ^= 1; }
      }
      more = fetch_next(resp, &clc_full, &clc_empty, clc_phase, lane);
    }
  } else {  // consumer
    int s = 0;
    uint32_t phase = 0;
    for (int tile = 0; more; ++tile) {
      for (int k = 0; k < k_tiles; ++k) {
        wait(&full[s], phase);
        (void)*(volatile int*)&ab[s][0];  // the stage's data, read
        __syncwarp();
        if (lane == 0) arrive(&empty[s]);
        if (++s == STAGES) { s = 0; phase ^= 1; }
      }
      more = fetch_next(resp, &clc_full, &clc_empty, clc_phase, lane, kConsumerDecodesFirst, kConsumerReleases);
    }
  }
}
