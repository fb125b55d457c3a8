"""The fixed part of every replay program: PTX helpers for the device, the bounded wait, and
the host driver with its watchdog that prints the outcome as JSON (docs/replay.md).
"""
from __future__ import annotations

# Device side. Every mbarrier wait is bounded by clock64; warp and CTA collectives cannot be,
# so each thread publishes where it stands in mapped host memory before one (PC_COLL) and the
# host's watchdog reads that when the kernel does not finish in time.
PRELUDE = r"""
#pragma nv_diag_suppress 177  // locals of a role that one configuration does not use
#pragma nv_diag_suppress 550
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <chrono>
#include <thread>
#include <unistd.h>
#include <cuda_runtime.h>

#define PC_FRESH 0xF5F5F5F5u      /* SMEM that no load or write has touched */
#define PC_UNWRITTEN 0xEEEEEEEEu  /* global store destinations before a store lands */
#define PC_TAGBASE 0x7A000000u    /* | buffer << 16 | tile mod PC_NTAG */
enum { PC_IDLE = 0, PC_RUNNING = 1, PC_IN_COLL = 2, PC_DONE = 3, PC_GAVE_UP = 4 };

struct PcSlot {
  int state, site, hang_site, bad_site, bad_word, elect_lane, elect_site, hang_bar, hang_parity, pad;
  unsigned bad_expected, bad_found;
  long long hang_ns, elect_ns, bad_ns, start_ns;  // %globaltimer: when each record was made, and the thread's start
};
struct PcRole { const char* name; int start, padded, threads, instances; };
struct PcBarrier { const char* name; int offset, elements; };

__device__ PcSlot* pc_slots;
// Per warpgroup (indexed by its first warp in the CTA): operand checks of its mma_async done so far.
__shared__ unsigned pc_wg_reads[32];

#define PC_AT(sid) do { pc_slots[slot].site = (sid); pc_slots[slot].state = PC_RUNNING; __threadfence_system(); } while (0)
#define PC_COLL(sid) do { pc_slots[slot].site = (sid); pc_slots[slot].state = PC_IN_COLL; __threadfence_system(); } while (0)

__device__ __forceinline__ long long pc_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long pc_max(long long a, long long b) { return a > b ? a : b; }
// A tile's tag names its buffer too, so a write through an alias never passes for a load.
__host__ __device__ __forceinline__ unsigned pc_tag(int buf, long long tile) {
  return PC_TAGBASE | ((unsigned)buf << 16) | (unsigned)(((tile % PC_NTAG) + PC_NTAG) % PC_NTAG);
}
__device__ __forceinline__ size_t pc_region(int buf, long long tile) {
  return ((size_t)buf * PC_NTAG + (size_t)(((tile % PC_NTAG) + PC_NTAG) % PC_NTAG)) * PC_REGION;
}
__device__ __forceinline__ unsigned pc_cluster_rank() {
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r;
}
__device__ __forceinline__ unsigned pc_mapa(unsigned addr, long long rank) {
  unsigned r; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"((unsigned)rank)); return r;
}
__device__ __forceinline__ long long pc_now_ns() {
  long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__device__ __forceinline__ void pc_init(unsigned bar, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(n) : "memory");
}
__device__ __forceinline__ void pc_arrive(unsigned bar, unsigned count, long long cta) {
  if (cta < 0) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0], %1; }" :: "r"(bar), "r"(count) : "memory");
  } else {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0], %1;" :: "r"(pc_mapa(bar, cta)), "r"(count) : "memory");
  }
}
__device__ __forceinline__ void pc_arrive_tx(unsigned bar, unsigned tx, long long cta) {
  if (cta < 0) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" :: "r"(bar), "r"(tx) : "memory");
  } else {
    asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%0], %1;" :: "r"(pc_mapa(bar, cta)), "r"(tx) : "memory");
  }
}
__device__ __forceinline__ void pc_expect_tx(unsigned bar, unsigned tx, long long cta) {
  if (cta < 0) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(tx) : "memory");
  } else {
    asm volatile("mbarrier.expect_tx.relaxed.cluster.shared::cluster.b64 [%0], %1;" :: "r"(pc_mapa(bar, cta)), "r"(tx) : "memory");
  }
}
__device__ __forceinline__ void pc_complete_tx(unsigned bar, unsigned tx, long long cta) {
  if (cta < 0) {
    asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(tx) : "memory");
  } else {
    asm volatile("mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [%0], %1;" :: "r"(pc_mapa(bar, cta)), "r"(tx) : "memory");
  }
}
__device__ __forceinline__ void pc_arrive_drop(unsigned bar, unsigned count) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive_drop.shared::cta.b64 st, [%0], %1; }" :: "r"(bar), "r"(count) : "memory");
}
// The bounded wait of hw/probes.cu: 1 when the phase of this parity completed, 0 on time-out.
__device__ __forceinline__ int pc_wait(unsigned bar, unsigned parity, long long cycles) {
  long long t0 = clock64();
  for (;;) {
    unsigned ok;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    if (ok) return 1;
    if (clock64() - t0 > cycles) return 0;
  }
}
__device__ __forceinline__ int pc_elect(unsigned mask) {
  unsigned r, p;
  asm volatile("{ .reg .pred P; elect.sync %0|P, %2; selp.u32 %1, 1, 0, P; }" : "=r"(r), "=r"(p) : "r"(mask));
  return (int)p;
}
__device__ void pc_record_hang(int slot, int sid, unsigned bar_offset, unsigned parity) {
  if (pc_slots[slot].hang_site < 0) {
    pc_slots[slot].hang_ns = pc_now_ns(); pc_slots[slot].hang_bar = (int)bar_offset; pc_slots[slot].hang_parity = (int)parity;
    pc_slots[slot].hang_site = sid;
  }
  __threadfence_system();
}
__device__ void pc_record_elect(int slot, int sid, int lane) {
  pc_slots[slot].elect_ns = pc_now_ns(); pc_slots[slot].elect_lane = lane; pc_slots[slot].elect_site = sid;
  __threadfence_system();
}
// After a timed-out wait the thread stops running the spec; it lingers so copies it issued land
// and its bulk stores drain before the CTA can exit.
__device__ void pc_give_up() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  long long t0 = clock64(); while (clock64() - t0 < 4000000LL) {}
}
__device__ __forceinline__ unsigned pc_ld(unsigned addr) {
  unsigned v; asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory"); return v;
}
// `read A[i] tile t`: sample PC_SAMPLES words spread over the buffer (a different spread per
// thread) and record the first that does not hold tile t's tag.
__device__ void pc_read(unsigned buf, int bid, unsigned words, long long tile, long long thread, int slot, int sid) {
  unsigned want = pc_tag(bid, tile);
  unsigned n = words < PC_SAMPLES ? words : PC_SAMPLES;
  unsigned step = words / n;
  for (unsigned j = 0; j < n; ++j) {
    unsigned w = j * step + (unsigned)(thread % step);
    unsigned got = pc_ld(buf + 4u * w);
    if (got != want) {
      if (pc_slots[slot].bad_site < 0) {
        pc_slots[slot].bad_expected = want; pc_slots[slot].bad_found = got; pc_slots[slot].bad_word = (int)w;
        pc_slots[slot].bad_ns = pc_now_ns(); pc_slots[slot].bad_site = sid; __threadfence_system();
      }
      return;
    }
  }
}
// wgmma is warpgroup-collective: one MMA reads the operands for all 128 threads until it
// completes, so once `mma_wait` returns in any warp nobody reads them any more (a single thread
// may then release the stage). The replay checks operands per thread at issue, so a thread's
// `mma_wait` waits (bounded) until every thread of its warpgroup has finished the checks of the
// MMAs that wait retires; on time-out (a warp gave up) it goes on.
__device__ __forceinline__ void pc_mma_issued(unsigned* wg) {
  __threadfence_block();
  atomicAdd(wg, 1u);
}
__device__ void pc_mma_wait(const unsigned* wg, long long need, long long cycles) {
  if (need <= 0) return;
  long long t0 = clock64();
  for (;;) {
    unsigned got; asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(got) : "r"((unsigned)__cvta_generic_to_shared(wg)) : "memory");
    if ((long long)got >= need || clock64() - t0 > cycles) break;
  }
  __threadfence_block();
}
// `write A[i] tile t`: the lanes of a warp that run it together share the buffer, 16 bytes
// each in turn, as a kernel's threads write their slices of a tile; each such group covers the
// whole buffer, so the tag is complete whichever threads run it. (Every thread writing the whole
// buffer took 128x the time and hid store-reuse races behind it.)
__device__ void pc_write(unsigned buf, int bid, unsigned words, long long tile) {
  const unsigned v = pc_tag(bid, tile), mask = __activemask(), lane = threadIdx.x & 31u;
  const unsigned rank = __popc(mask & ((1u << lane) - 1u)), n = __popc(mask);
  for (unsigned w = 4u * rank; w + 4 <= words; w += 4u * n)
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" :: "r"(buf + 4u * w), "r"(v) : "memory");
  __syncwarp(mask);  // the group's words are visible to each of its lanes, as one thread's own were
}
__device__ __forceinline__ void pc_tma_load(unsigned dst, int bid, const int4* gsrc, long long tile, unsigned bytes, unsigned bar, long long mcast) {
  const char* src = (const char*)gsrc + pc_region(bid, tile);
  if (mcast < 0) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
  } else {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar), "h"((unsigned short)mcast) : "memory");
  }
}
__device__ __forceinline__ void pc_cp_async(unsigned dst, int bid, const int4* gsrc, long long tile, unsigned words) {
  const char* src = (const char*)gsrc + pc_region(bid, tile);
  for (unsigned w = 0; w + 4 <= words; w += 4)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst + 4u * w), "l"(src + 4u * w) : "memory");
}
// `tma_store D[i]`: each store gets its own global slot; the host checks it holds `expect`.
__device__ void pc_tma_store(unsigned src, unsigned bytes, unsigned expect, int sid, int slot, int4* gdst,
                             int* stores, unsigned* nstores) {
  unsigned i = atomicAdd(nstores, 1u);
  if (i >= PC_MAX_STORES) return;
  stores[4 * i + 0] = (int)expect; stores[4 * i + 1] = sid; stores[4 * i + 2] = slot; stores[4 * i + 3] = (int)bytes;
  char* dst = (char*)gdst + (size_t)i * PC_REGION;
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst), "r"(src), "r"(bytes) : "memory");
}
"""


def host_main() -> str:
    """The host driver: N launches; a watchdog for the unbounded collectives; the outcome as JSON."""
    return r"""
static const PcRole* pc_role_of(int tid, int* inst, int* thread) {
  for (int r = 0; r < PC_NROLES; ++r) {
    const PcRole& ro = pc_roles[r];
    if (tid >= ro.start && tid < ro.start + ro.padded * ro.instances) {
      *inst = (tid - ro.start) / ro.padded; *thread = (tid - ro.start) % ro.padded;
      return *thread < ro.threads ? &ro : nullptr;
    }
  }
  return nullptr;
}
static void pc_json_str(const char* s) {
  putchar('"');
  for (; *s; ++s) { if (*s == '"' || *s == '\\') putchar('\\'); if ((unsigned char)*s >= 32) putchar(*s); }
  putchar('"');
}
static void pc_tag_json(unsigned v) {
  if ((v & 0xFF000000u) == PC_TAGBASE && ((v >> 16) & 0xFFu) < PC_NBUF)
    printf("{\"buffer\": \"%s\", \"tile_mod\": %u}", pc_buffers[(v >> 16) & 0xFFu], v & 0xFFFFu);
  else if (v == PC_FRESH) printf("\"never loaded\"");
  else if (v == PC_UNWRITTEN) printf("\"never stored\"");
  else printf("\"0x%08x\"", v);
}
// Groups of threads of one role instance with the same record, in thread order.
struct PcGroup { int cta, role, inst, first, last, count, site; unsigned a, b; int word; long long ns; };
static long long pc_t0 = 0;  // the earliest thread start of the run being printed (%globaltimer)
static void pc_groups(const char* key, const PcSlot* s, int which, bool* first_key) {
  std::vector<PcGroup> out;
  for (int g = 0; s && g < PC_CLUSTER * PC_THREADS; ++g) {
    int inst = 0, th = 0; const PcRole* ro = pc_role_of(g % PC_THREADS, &inst, &th);
    if (!ro) continue;
    int site = -1; unsigned a = 0, b = 0; int word = -1; long long ns = -1;
    if (which == 0) { site = s[g].hang_site; a = (unsigned)s[g].hang_bar; b = (unsigned)s[g].hang_parity; ns = s[g].hang_ns; }
    else if (which == 1) { site = s[g].bad_site; a = s[g].bad_expected; b = s[g].bad_found; word = s[g].bad_word; ns = s[g].bad_ns; }
    else if (which == 2) site = (s[g].state == PC_IN_COLL) ? s[g].site : -1;
    else if (which == 3) site = (s[g].state == PC_RUNNING || s[g].state == PC_IDLE) ? s[g].site : -1;
    else if (which == 4) { site = s[g].elect_lane >= 0 ? s[g].elect_site : -1; a = (unsigned)s[g].elect_lane; ns = s[g].elect_ns; }
    if (which != 3 && site < 0) continue;
    if (which == 3 && s[g].state != PC_RUNNING && s[g].state != PC_IDLE) continue;
    int role = (int)(ro - pc_roles), cta = g / PC_THREADS;
    if (!out.empty()) {
      PcGroup& l = out.back();
      if (l.cta == cta && l.role == role && l.inst == inst && l.site == site && ((which != 1 && which != 0) || (l.a == a && l.b == b))) {
        l.last = th; l.count++; if (ns >= 0 && (l.ns < 0 || ns < l.ns)) l.ns = ns; continue;
      }
    }
    out.push_back(PcGroup{cta, role, inst, th, th, 1, site, a, b, word, ns});
  }
  printf("%s\"%s\": [", *first_key ? "" : ", ", key); *first_key = false;
  for (size_t i = 0; i < out.size() && i < 64; ++i) {
    const PcGroup& x = out[i];
    printf("%s{\"cta\": %d, \"role\": ", i ? ", " : "", x.cta); pc_json_str(pc_roles[x.role].name);
    printf(", \"instance\": %d, \"threads\": [%d, %d], \"count\": %d, \"site\": ", x.inst, x.first, x.last, x.count);
    if (x.site >= 0 && x.site < PC_NSITES) { pc_json_str(pc_sites[2 * x.site]); printf(", \"text\": "); pc_json_str(pc_sites[2 * x.site + 1]); }
    else printf("null");
    if (which == 1) { printf(", \"word\": %d, \"expected\": ", x.word); pc_tag_json(x.a); printf(", \"found\": "); pc_tag_json(x.b); }
    if (which == 4) printf(", \"elected_lane\": %u", x.a);
    // microseconds from the run's first thread start to the group's earliest record: orders a
    // run's events (the agreement rules judge a run up to its first finding)
    if ((which == 0 || which == 1 || which == 4) && x.ns >= 0 && pc_t0 > 0) printf(", \"t_us\": %.3f", (double)(x.ns - pc_t0) / 1000.0);
    if (which == 0) {
      printf(", \"barrier\": ");
      const PcBarrier* hit = nullptr;
      for (int i = 0; i < PC_NBARS; ++i)
        if ((int)x.a >= pc_barriers[i].offset && (int)x.a < pc_barriers[i].offset + 8 * pc_barriers[i].elements) hit = &pc_barriers[i];
      if (hit) { printf("\"%s[%d]\"", hit->name, ((int)x.a - hit->offset) / 8); } else printf("null");
      printf(", \"parity\": %u", x.b);
    }
    printf("}");
  }
  printf("]");
}
static void pc_print(int run, const char* outcome, const char* fault, bool watchdog, const PcSlot* s,
                     const std::vector<int>& stores, const std::vector<unsigned>& dst, unsigned nstores, const char* gpu) {
  pc_t0 = 0;
  for (int g = 0; s && g < PC_CLUSTER * PC_THREADS; ++g)
    if (s[g].start_ns > 0 && (pc_t0 == 0 || s[g].start_ns < pc_t0)) pc_t0 = s[g].start_ns;
  printf("{\"schema\": \"pipecheck-replay-outcome/1\", \"spec\": "); pc_json_str(pc_spec);
  printf(", \"config\": %s, \"gpu\": ", pc_config); pc_json_str(gpu);
  printf(", \"run\": %d, \"outcome\": \"%s\", \"watchdog\": %s, \"fault\": ", run, outcome, watchdog ? "true" : "false");
  if (fault) pc_json_str(fault); else printf("null");
  bool first = false; printf(", ");
  first = true;
  pc_groups("hangs", s, 0, &first);
  pc_groups("in_collective", s, 2, &first);
  if (watchdog) pc_groups("running", s, 3, &first);
  pc_groups("wrong_data", s, 1, &first);
  pc_groups("elect_mismatch", s, 4, &first);
  printf(", \"store_wrong_data\": [");
  int shown = 0;
  for (unsigned i = 0; i < nstores && i < PC_MAX_STORES && shown < 64; ++i) {
    unsigned expect = (unsigned)stores[4 * i], words = (unsigned)stores[4 * i + 3] / 4;
    int bad = -1; unsigned got = 0;
    for (unsigned w = 0; w < words; ++w) { unsigned v = dst[(size_t)i * (PC_REGION / 4) + w]; if (v != expect) { bad = (int)w; got = v; break; } }
    if (bad < 0) continue;
    int g = stores[4 * i + 2], inst = 0, th = 0; const PcRole* ro = pc_role_of(g % PC_THREADS, &inst, &th);
    int sid = stores[4 * i + 1];
    printf("%s{\"cta\": %d, \"role\": ", shown ? ", " : "", g / PC_THREADS); pc_json_str(ro ? ro->name : "?");
    printf(", \"instance\": %d, \"thread\": %d, \"store\": %u, \"site\": ", inst, th, i); pc_json_str(pc_sites[2 * sid]);
    printf(", \"text\": "); pc_json_str(pc_sites[2 * sid + 1]);
    printf(", \"word\": %d, \"expected\": ", bad); pc_tag_json(expect); printf(", \"found\": "); pc_tag_json(got); printf("}");
    ++shown;
  }
  printf("]}\n");
  fflush(stdout);
}
// An election that did not land on the forced lane makes the run invalid, unless it came after a
// thread had already timed out (a lane that gave up and exited can change what elect.sync sees).
static const char* pc_classify(const PcSlot* s, bool stores_bad) {
  bool hang = false, bad = stores_bad;
  long long first_hang = -1, first_elect = -1;
  for (int g = 0; g < PC_CLUSTER * PC_THREADS; ++g) {
    if (s[g].hang_site >= 0) { hang = true; if (first_hang < 0 || s[g].hang_ns < first_hang) first_hang = s[g].hang_ns; }
    if (s[g].elect_lane >= 0 && (first_elect < 0 || s[g].elect_ns < first_elect)) first_elect = s[g].elect_ns;
    bad |= s[g].bad_site >= 0;
  }
  if (first_elect >= 0 && (!hang || first_elect < first_hang)) return "invalid";
  if (hang) return "hung";
  if (bad) return "wrong_data";
  return "completed";
}
#ifdef PC_SELFTEST
// Built with -DPC_SELFTEST: print one outcome from made-up records, so the JSON can be checked
// on a machine without a GPU (tests/test_conformance.py).
int main() {
  std::vector<PcSlot> s(PC_CLUSTER * PC_THREADS);
  for (auto& z : s) { memset(&z, 0, sizeof z); z.site = -1; z.hang_site = -1; z.bad_site = -1; z.elect_lane = -1; z.elect_site = -1; z.state = PC_DONE; z.start_ns = 1000; }
  for (int g = 0; g < 4; ++g) { s[g].hang_site = 0; s[g].hang_ns = 11000 + g; s[g].hang_bar = pc_barriers[PC_NBARS - 1].offset; s[g].hang_parity = 1; }
  s[4].bad_site = 0; s[4].bad_expected = pc_tag(0, 3); s[4].bad_found = PC_FRESH; s[4].bad_word = 7; s[4].bad_ns = 3500;
  s[5].state = PC_IN_COLL; s[5].site = 0;
  std::vector<int> stores = {(int)pc_tag(0, 1), 0, 0, 16};
  std::vector<unsigned> dst(PC_REGION / 4, pc_tag(0, 1)); dst[2] = PC_UNWRITTEN;
  pc_print(0, pc_classify(s.data(), true), nullptr, true, s.data(), stores, dst, 1, "selftest");
  return 0;
}
#else
int main(int argc, char** argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 1;
  long long wait_cycles = argc > 2 ? atoll(argv[2]) : PC_WAIT_CYCLES;
  int timeout_ms = argc > 3 ? atoi(argv[3]) : PC_HOST_TIMEOUT_MS;
  cudaDeviceProp prop; memset(&prop, 0, sizeof prop);
  cudaError_t dev = cudaSetDeviceFlags(cudaDeviceMapHost);
  if (dev == cudaSuccess) dev = cudaGetDeviceProperties(&prop, 0);
  if (dev != cudaSuccess) {  // no usable GPU: say so in the outcome format rather than crash
    std::vector<int> e; std::vector<unsigned> d;
    pc_print(0, "faulted", cudaGetErrorString(dev), false, nullptr, e, d, 0, "none"); return 0;
  }
  const size_t region_words = PC_REGION / 4;
  std::vector<unsigned> src((size_t)PC_NBUF * PC_NTAG * region_words);
  for (int b = 0; b < PC_NBUF; ++b)
    for (size_t t = 0; t < (size_t)PC_NTAG; ++t)
      for (size_t w = 0; w < region_words; ++w) src[((size_t)b * PC_NTAG + t) * region_words + w] = pc_tag(b, (long long)t);
  int4 *gsrc = nullptr, *gdst = nullptr; int* stores = nullptr; unsigned* nstores = nullptr; PcSlot* slots = nullptr;
  cudaMalloc(&gsrc, src.size() * 4); cudaMemcpy(gsrc, src.data(), src.size() * 4, cudaMemcpyHostToDevice);
  cudaMalloc(&gdst, (size_t)PC_MAX_STORES * PC_REGION); cudaMalloc(&stores, PC_MAX_STORES * 16); cudaMalloc(&nstores, 4);
  cudaHostAlloc(&slots, sizeof(PcSlot) * PC_CLUSTER * PC_THREADS, cudaHostAllocMapped);
  PcSlot* dslots = nullptr; cudaHostGetDevicePointer(&dslots, slots, 0);
  cudaMemcpyToSymbol(pc_slots, &dslots, sizeof(dslots));
  cudaFuncSetAttribute(pc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, PC_SMEM);
  cudaStream_t stream; cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaError_t setup = cudaGetLastError();
  if (setup != cudaSuccess || !slots || !dslots) {
    if (setup == cudaSuccess) setup = cudaErrorMemoryAllocation;
    slots = nullptr;
    std::vector<int> e; std::vector<unsigned> d;
    pc_print(0, "faulted", cudaGetErrorString(setup), false, slots, e, d, 0, prop.name); return 0;
  }
  std::vector<int> hstores(PC_MAX_STORES * 4);
  std::vector<unsigned> hdst;
  for (int run = 0; run < runs; ++run) {
    for (int g = 0; g < PC_CLUSTER * PC_THREADS; ++g) {
      PcSlot z; memset(&z, 0, sizeof z); z.site = -1; z.hang_site = -1; z.bad_site = -1; z.elect_lane = -1; z.elect_site = -1;
      slots[g] = z;
    }
    cudaMemset(gdst, 0xEE, (size_t)PC_MAX_STORES * PC_REGION); cudaMemset(nstores, 0, 4); cudaDeviceSynchronize();
    pc_kernel<<<dim3(PC_CX, PC_CY, 1), PC_THREADS, PC_SMEM, stream>>>(gsrc, gdst, stores, nstores, dslots, wait_cycles);
    cudaError_t le = cudaGetLastError();
    if (le != cudaSuccess) {
      std::vector<int> e; std::vector<unsigned> d;
      pc_print(run, "faulted", cudaGetErrorString(le), false, slots, e, d, 0, prop.name); _exit(0);
    }
    auto t0 = std::chrono::steady_clock::now();
    cudaError_t q;
    while ((q = cudaStreamQuery(stream)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(timeout_ms)) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (q == cudaErrorNotReady) {  // blocked in a collective no bound can reach: report, then let exit kill it
      std::vector<int> e; std::vector<unsigned> d;
      const char* c = pc_classify(slots, false);
      pc_print(run, strcmp(c, "invalid") ? "hung" : "invalid", nullptr, true, slots, e, d, 0, prop.name); _exit(0);
    }
    if (q != cudaSuccess) {
      std::vector<int> e; std::vector<unsigned> d;
      pc_print(run, "faulted", cudaGetErrorString(q), false, slots, e, d, 0, prop.name); _exit(0);
    }
    unsigned n = 0; cudaMemcpy(&n, nstores, 4, cudaMemcpyDeviceToHost);
    unsigned m = n < PC_MAX_STORES ? n : PC_MAX_STORES;
    cudaMemcpy(hstores.data(), stores, (size_t)m * 16, cudaMemcpyDeviceToHost);
    hdst.assign((size_t)m * (PC_REGION / 4), 0);
    if (m) cudaMemcpy(hdst.data(), gdst, (size_t)m * PC_REGION, cudaMemcpyDeviceToHost);
    bool bad = false;
    for (unsigned i = 0; i < m && !bad; ++i)
      for (unsigned w = 0; w < (unsigned)hstores[4 * i + 3] / 4; ++w)
        if (hdst[(size_t)i * (PC_REGION / 4) + w] != (unsigned)hstores[4 * i]) { bad = true; break; }
    pc_print(run, pc_classify(slots, bad), nullptr, false, slots, hstores, hdst, m, prop.name);
  }
  return 0;
}
#endif
"""
