// Probe (H200): does a bulk copy's complete_tx reach its mbarrier in pieces? If it does, an
// expect_tx smaller than the bytes copied completes the phase early whenever a partial sum of
// the pieces equals it, and the rest of the bytes count against the next phase.
// docs/semantics.md, "Explained differences (replay)"; run by benchmarks/hw/run_h200.py --probe.
//
// Per block and repetition: init(1); thread 0 posts arrive.expect_tx(E) and one 1-D
// cp.async.bulk of N = 8192 bytes. Then every lane polls phase 0 (bounded: 2^21 cycles, ~1 ms);
// on completion the warp counts how many of the N bytes had landed at that moment. After the
// copy has fully landed: when phase 0 completed early, thread 0 posts arrive.expect_tx(N - E)
// and the probe records whether phase 1 then completes (the leftover bytes were charged to it).
// Every wait is bounded. Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a probe_partial_tx.cu
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define N_BYTES 8192
#define WORDS (N_BYTES / 4)
#define REPS 20
#define POLL_CYCLES (1LL << 21)

__device__ __forceinline__ unsigned su32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ int test_parity(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  return (int)ok;
}
__device__ int wait_bounded(unsigned bar, unsigned parity) {
  long long t0 = clock64();
  while (!test_parity(bar, parity)) if (clock64() - t0 > POLL_CYCLES) return 0;
  return 1;
}
__device__ int landed_words(const unsigned* buf, int lane) {
  int n = 0;
  for (int w = lane; w < WORDS; w += 32) {
    unsigned v; asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"(su32(buf + w)) : "memory");
    n += v == (0x5A000000u | (unsigned)w);
  }
  return __reduce_add_sync(0xffffffffu, n);
}

// out[block * REPS + rep] = {phase0 completed, bytes landed when the waiter saw it, phase1 completed}
__global__ void probe(const unsigned* src, unsigned expect, int3* out) {
  __shared__ __align__(128) unsigned buf[WORDS];
  __shared__ __align__(8) unsigned long long bar_storage;
  const unsigned bar = su32(&bar_storage);
  const int lane = threadIdx.x;
  for (int rep = 0; rep < REPS; ++rep) {
    for (int w = lane; w < WORDS; w += 32) buf[w] = 0;
    if (lane == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    if (lane == 0) {
      asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" :: "r"(bar), "r"(expect) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(su32(buf)), "l"(src), "r"((unsigned)N_BYTES), "r"(bar) : "memory");
    }
    const int done0 = __shfl_sync(0xffffffffu, wait_bounded(bar, 0), 0);  // lane 0's view, for the whole warp
    int landed = done0 ? landed_words(buf, lane) * 4 : -1;
    // let the whole copy land before the barrier and the buffer are reused (bounded)
    long long t0 = clock64();
    while (landed_words(buf, lane) < WORDS && clock64() - t0 < POLL_CYCLES) {}
    int done1 = -1;
    if (done0) {
      if (lane == 0 && expect < N_BYTES)
        asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" :: "r"(bar), "r"((unsigned)N_BYTES - expect) : "memory");
      done1 = expect < N_BYTES ? wait_bounded(bar, 1) : -1;
    }
    if (lane == 0) out[blockIdx.x * REPS + rep] = make_int3(done0, landed, done1);
    __syncwarp();
  }
}

int main() {
  const unsigned expects[] = {16, 128, 1024, 2048, 2304, 4096, 6144, 8064, 8176, 8192};
  const int blocks = 264;
  std::vector<unsigned> h(WORDS);
  for (int w = 0; w < WORDS; ++w) h[w] = 0x5A000000u | (unsigned)w;
  unsigned* src; int3* out;
  cudaMalloc(&src, N_BYTES); cudaMemcpy(src, h.data(), N_BYTES, cudaMemcpyHostToDevice);
  cudaMalloc(&out, sizeof(int3) * blocks * REPS);
  std::vector<int3> r(blocks * REPS);
  printf("{\"probe\": \"partial_complete_tx\", \"copy_bytes\": %d, \"blocks\": %d, \"reps\": %d, \"cases\": [", N_BYTES, blocks, REPS);
  for (size_t i = 0; i < sizeof expects / sizeof expects[0]; ++i) {
    probe<<<blocks, 32>>>(src, expects[i], out);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { printf("%s{\"expect\": %u, \"error\": \"%s\"}", i ? ", " : "", expects[i], cudaGetErrorString(e)); break; }
    cudaMemcpy(r.data(), out, sizeof(int3) * r.size(), cudaMemcpyDeviceToHost);
    int runs = (int)r.size(), early = 0, p1 = 0, p1_tried = 0, lmin = N_BYTES + 1, lmax = -1;
    for (const int3& x : r) {
      if (x.x) { ++early; lmin = x.y < lmin ? x.y : lmin; lmax = x.y > lmax ? x.y : lmax; }
      if (x.z >= 0) { ++p1_tried; p1 += x.z; }
    }
    printf("%s{\"expect\": %u, \"runs\": %d, \"phase0_completed\": %d, \"landed_bytes_seen_min\": %d, "
           "\"landed_bytes_seen_max\": %d, \"phase1_tried\": %d, \"phase1_completed\": %d}",
           i ? ", " : "", expects[i], runs, early, early ? lmin : -1, early ? lmax : -1, p1_tried, p1);
  }
  printf("]}\n");
  return 0;
}
