// What an mbarrier phase token names (PTX ISA 9.7.13.15.16: test_wait/try_wait "test for the
// completion of the phase indicated by the operand state"): measured on the H200.
// One thread, no blocking wait anywhere (test_wait never blocks; try_wait returns after the
// hardware's time limit), so the probe cannot hang the GPU.
// Build: nvcc -O2 -arch=sm_90a probe_phase_token.cu -o probe_phase_token
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void init(uint64_t* b, uint32_t n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(b)), "r"(n) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ uint64_t arrive(uint64_t* b) {
  uint64_t s; asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(s) : "r"(sa(b)) : "memory"); return s;
}
__device__ __forceinline__ uint64_t arrive_tx(uint64_t* b, uint32_t tx) {
  uint64_t s; asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;" : "=l"(s) : "r"(sa(b)), "r"(tx) : "memory"); return s;
}
__device__ __forceinline__ void complete_tx(uint64_t* b, uint32_t tx) {
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(sa(b)), "r"(tx) : "memory");
}
__device__ __forceinline__ int test_tok(uint64_t* b, uint64_t s) {
  uint32_t ok;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok) : "r"(sa(b)), "l"(s) : "memory");
  return (int)ok;
}
__device__ __forceinline__ int try_tok(uint64_t* b, uint64_t s) {
  uint32_t ok;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok) : "r"(sa(b)), "l"(s) : "memory");
  return (int)ok;
}
__device__ __forceinline__ int test_par(uint64_t* b, uint32_t ph) {
  uint32_t ok;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok) : "r"(sa(b)), "r"(ph) : "memory");
  return (int)ok;
}

// out: one int per case, then the raw tokens
__global__ void k(int* out, unsigned long long* toks) {
  __shared__ uint64_t b[8];
  int o = 0;
  // 0: init(2), one arrival: the token's phase is still open
  init(&b[0], 2);
  uint64_t t = arrive(&b[0]);
  out[o++] = test_tok(&b[0], t);                       // expect 0
  // 1: the second arrival completes phase 0: the first token now tests complete
  arrive(&b[0]);
  out[o++] = test_tok(&b[0], t);                       // expect 1
  // 2: init(1): a token whose own arrival completed the phase
  init(&b[1], 1);
  uint64_t t0 = arrive(&b[1]);
  out[o++] = test_tok(&b[1], t0);                      // expect 1
  // 3: two phases later (phase 2): the phase-0 token; parity would alias (0 == 2 mod 2)
  uint64_t t1 = arrive(&b[1]);
  out[o++] = test_tok(&b[1], t0);                      // parity compare: 0; full phase: 1
  out[o++] = test_tok(&b[1], t1);                      // expect 1
  // 5: three phases later (phase 3)
  uint64_t t2 = arrive(&b[1]);
  out[o++] = test_tok(&b[1], t0);                      // parity compare: 1
  out[o++] = test_tok(&b[1], t1);                      // parity compare: 0
  out[o++] = test_tok(&b[1], t2);                      // 1
  // 8: try_wait with the aliased token returns (after its time limit) with the same answer
  out[o++] = try_tok(&b[1], t1);                       // parity compare: 0
  // 9: the token of arrive.expect_tx: the phase waits on the bytes, then completes
  init(&b[2], 1);
  uint64_t tx = arrive_tx(&b[2], 64);
  out[o++] = test_tok(&b[2], tx);                      // 0
  complete_tx(&b[2], 64);
  out[o++] = test_tok(&b[2], tx);                      // 1
  // 11: a token tested against another barrier in the same phase state (the token holds only the phase?)
  init(&b[3], 1);
  out[o++] = test_tok(&b[3], tx);                      // b[3] in phase 0, tx's phase 0: 0 if only the phase bit counts
  // 12: parity-form view of the same barrier for comparison: phase 3 of b[1]
  out[o++] = test_par(&b[1], 0);                       // 1
  out[o++] = test_par(&b[1], 1);                       // 0
  toks[0] = t; toks[1] = t0; toks[2] = t1; toks[3] = t2; toks[4] = tx;
  out[31] = o;
}

int main() {
  int* d; unsigned long long* dt;
  cudaMalloc(&d, 32 * sizeof(int)); cudaMemset(d, 0xff, 32 * sizeof(int));
  cudaMalloc(&dt, 8 * sizeof(unsigned long long));
  k<<<1, 1>>>(d, dt);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { printf("error %s\n", cudaGetErrorString(e)); return 1; }
  int h[32]; unsigned long long ht[8];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaMemcpy(ht, dt, sizeof ht, cudaMemcpyDeviceToHost);
  const char* what[] = {"init2 1 arrival: token phase open", "init2 2 arrivals: token complete",
                        "init1 own arrival completed", "phase 2: phase-0 token", "phase 2: phase-1 token",
                        "phase 3: phase-0 token", "phase 3: phase-1 token", "phase 3: phase-2 token",
                        "phase 3: try_wait phase-1 token", "arrive.expect_tx 64: before bytes", "after complete_tx 64",
                        "token of b2 tested on fresh b3", "phase 3: test_wait.parity 0", "phase 3: test_wait.parity 1"};
  for (int i = 0; i < h[31]; i++) printf("case %2d %-36s %d\n", i, what[i], h[i]);
  for (int i = 0; i < 5; i++) printf("token %d %#018llx\n", i, ht[i]);
  return 0;
}
