// Host harness for the CUTLASS GEMMs of pipecheck's PTX corpus (docs/replay.md, "Real kernels").
//
// Built with the same CUTLASS 4.2 headers and the same kernel source as the corpus entry
// (tests/data/ptx/src/<kernel>.cu, given as PC_KERNEL_SOURCE), so that its Params are the bytes the
// compiled kernel reads. It sets up a real problem, loads a kernel image (the PTX pipecheck patched
// with `pipecheck replay KERNEL.ptx --emit-ptx`, or the cubin ptxas made of it) with the driver API,
// launches it with the real kernel parameters, checks D = A B against a reference, and prints one JSON
// line per run in the replay outcome format (pipecheck-replay-outcome/1), with the hang records the
// patched waits wrote.
//
//   nvcc -std=c++17 -arch=sm_90a -O2 --expt-relaxed-constexpr -DPC_KERNEL_SOURCE='"cutlass_sm90_pingpong.cu"' \
//        -I tests/data/ptx/src -I <cutlass>/include -I <cutlass>/tools/util/include \
//        benchmarks/hw/cutlass_gemm_harness.cu -o harness -L <stubs> -lcuda
//   ./harness IMAGE ENTRY M N K [RUNS [HOST_TIMEOUT_MS [SM_COUNT]]]
//
// SM_COUNT (default: the device's) is what the persistent tile scheduler sizes the grid by: 2 with a
// 256x256 problem gives two CTAs of two 128x128 tiles each, the tile loop pipecheck's defaults run.
// ENTRY is the kernel's mangled name (`-` reads the first .entry of a PTX image). Nothing waits
// without a bound: the patched kernel bounds its mbarrier waits, and the host polls the stream for
// HOST_TIMEOUT_MS before it reports a hang no bound reached (a named barrier) and exits, which tears
// the context and the kernel down.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>
#include <algorithm>
#include <cmath>
#include <tuple>

#include PC_KERNEL_SOURCE
#include "cutlass/util/packed_stride.hpp"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fail("cuda", cudaGetErrorString(e_), __LINE__); } } while (0)
#define DK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = nullptr; cuGetErrorString(r_, &s_); fail("driver", s_ ? s_ : "?", __LINE__); } } while (0)

static void fail(const char* what, const char* msg, int line) {
  printf("{\"schema\": \"pipecheck-replay-outcome/1\", \"outcome\": \"invalid\", \"error\": \"%s error at harness line %d: %s\"}\n",
         what, line, msg);
  fflush(stdout);
  _exit(2);
}

struct Rec { int site; unsigned bar, parity, tid, cta, kind; unsigned long long ns; };

__global__ void reference_gemm(const cutlass::half_t* A, const cutlass::half_t* B, float* R, int M, int N, int K) {
  int m = blockIdx.x * blockDim.x + threadIdx.x, n = blockIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += float(A[(size_t)m * K + k]) * float(B[(size_t)n * K + k]);  // A row-major, B K-major
  R[(size_t)n * M + m] = acc;  // column-major
}

static std::string ranges(std::vector<unsigned> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(v[i]);
    if (j > i) out += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

static std::string first_entry(const std::string& img) {
  size_t p = img.find(".entry ");
  if (p == std::string::npos) fail("image", "no .entry in the image; give ENTRY", __LINE__);
  p += 7;
  size_t q = img.find_first_of("( \n", p);
  return img.substr(p, q - p);
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s IMAGE ENTRY M N K [RUNS [HOST_TIMEOUT_MS [SM_COUNT]]]\n", argv[0]);
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) fail("image", "cannot read the image", __LINE__);
  std::stringstream ss; ss << f.rdbuf();
  std::string img = ss.str();
  std::string entry = std::string(argv[2]) == "-" ? first_entry(img) : argv[2];
  int M = atoi(argv[3]), N = atoi(argv[4]), K = atoi(argv[5]);
  int runs = argc > 6 ? atoi(argv[6]) : 1;
  int host_timeout_ms = argc > 7 ? atoi(argv[7]) : 10000;
  int sm_count = argc > 8 ? atoi(argv[8]) : 0;

  CK(cudaSetDevice(0));
  CK(cudaFree(0));  // the primary context, current for the driver calls too
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));

  using Element = cutlass::half_t;
  size_t nA = (size_t)M * K, nB = (size_t)N * K, nD = (size_t)M * N;
  std::vector<Element> hA(nA), hB(nB);
  for (size_t i = 0; i < nA; ++i) hA[i] = Element(float(int((i * 7 + 3) % 5) - 2));
  for (size_t i = 0; i < nB; ++i) hB[i] = Element(float(int((i * 11 + 1) % 5) - 2));
  Element *dA, *dB; float *dC, *dD, *dR;
  CK(cudaMalloc(&dA, nA * sizeof(Element))); CK(cudaMalloc(&dB, nB * sizeof(Element)));
  CK(cudaMalloc(&dC, nD * 4)); CK(cudaMalloc(&dD, nD * 4)); CK(cudaMalloc(&dR, nD * 4));
  CK(cudaMemcpy(dA, hA.data(), nA * sizeof(Element), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, hB.data(), nB * sizeof(Element), cudaMemcpyHostToDevice));
  CK(cudaMemset(dC, 0, nD * 4));
  reference_gemm<<<dim3((M + 127) / 128, N), 128>>>(dA, dB, dR, M, N, K);
  CK(cudaDeviceSynchronize());
  std::vector<float> ref(nD); CK(cudaMemcpy(ref.data(), dR, nD * 4, cudaMemcpyDeviceToHost));

  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = sm_count > 0 ? sm_count : cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  auto sA = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, cute::make_shape(M, K, 1));
  auto sB = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, cute::make_shape(N, K, 1));
  auto sC = cutlass::make_cute_packed_stride(typename GemmKernel::StrideC{}, cute::make_shape(M, N, 1));
  auto sD = cutlass::make_cute_packed_stride(typename GemmKernel::StrideD{}, cute::make_shape(M, N, 1));
  typename GemmKernel::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, 1},
                                      {dA, sA, dB, sB}, {{}, dC, sC, dD, sD}, hw};
  args.epilogue.thread.alpha = 1.f;
  args.epilogue.thread.beta = 0.f;
  if (!GemmKernel::can_implement(args)) fail("cutlass", "can_implement refused the problem", __LINE__);
  size_t ws_size = GemmKernel::get_workspace_size(args);
  void* ws = nullptr;
  if (ws_size) CK(cudaMalloc(&ws, ws_size));
  if (GemmKernel::initialize_workspace(args, ws, 0) != cutlass::Status::kSuccess) fail("cutlass", "initialize_workspace failed", __LINE__);
  typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, ws);
  dim3 grid = GemmKernel::get_grid_shape(params), block = GemmKernel::get_block_shape();
  int smem = GemmKernel::SharedStorageSize;

  if (img.size() && img[0] != 0x7f) img.push_back('\0');  // PTX text is NUL-terminated; an ELF cubin is not
  CUmodule mod; DK(cuModuleLoadData(&mod, img.data()));
  CUfunction fn; DK(cuModuleGetFunction(&fn, mod, entry.c_str()));
  size_t poff = 0, psize = 0;
  DK(cuFuncGetParamInfo(fn, 0, &poff, &psize));
  if (psize != sizeof(params)) fail("params", "the kernel's parameter size differs from the harness's Params", __LINE__);
  DK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));

  const unsigned cap = 1u << 16;
  Rec* recs = nullptr; CK(cudaHostAlloc(&recs, cap * sizeof(Rec), cudaHostAllocMapped));
  Rec* drecs = nullptr; CK(cudaHostGetDevicePointer((void**)&drecs, recs, 0));
  CUdeviceptr g; size_t gsize;
  bool patched = cuModuleGetGlobal(&g, &gsize, mod, "__pipecheck_rec") == CUDA_SUCCESS;
  CUdeviceptr gcap = 0, gfb = 0;
  if (patched) {
    unsigned long long p = (unsigned long long)drecs;
    DK(cuMemcpyHtoD(g, &p, sizeof p));
    DK(cuModuleGetGlobal(&gcap, &gsize, mod, "__pipecheck_cap"));
    DK(cuMemcpyHtoD(gcap, &cap, sizeof cap));
    DK(cuModuleGetGlobal(&gfb, &gsize, mod, "__pipecheck_fallback"));
  }
  int cluster[3] = {1, 1, 1};
  {
    auto cs = typename GemmKernel::ClusterShape{};
    cluster[0] = cute::size<0>(cs); cluster[1] = cute::size<1>(cs); cluster[2] = cute::size<2>(cs);
  }

  for (int run = 0; run < runs; ++run) {
    memset(recs, 0xff, cap * sizeof(Rec));
    unsigned zero = 0;
    if (patched) DK(cuMemcpyHtoD(gfb, &zero, sizeof zero));
    CK(cudaMemset(dD, 0xff, nD * 4));  // NaN: a tile the kernel never stored shows
    CK(cudaDeviceSynchronize());
    CUlaunchAttribute attr[1];
    attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr[0].value.clusterDim.x = cluster[0]; attr[0].value.clusterDim.y = cluster[1]; attr[0].value.clusterDim.z = cluster[2];
    CUlaunchConfig cfg{};
    cfg.gridDimX = grid.x; cfg.gridDimY = grid.y; cfg.gridDimZ = grid.z;
    cfg.blockDimX = block.x; cfg.blockDimY = block.y; cfg.blockDimZ = block.z;
    cfg.sharedMemBytes = smem; cfg.hStream = 0; cfg.attrs = attr; cfg.numAttrs = 1;
    void* kargs[] = {&params};
    auto t0 = std::chrono::steady_clock::now();
    DK(cuLaunchKernelEx(&cfg, fn, kargs, nullptr));
    bool done = false; CUresult q = CUDA_SUCCESS;
    while (std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count() < host_timeout_ms) {
      q = cuStreamQuery(0);
      if (q != CUDA_ERROR_NOT_READY) { done = true; break; }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // Hang records: group the threads that timed out by (site, barrier, parity).
    std::map<std::tuple<int, unsigned, unsigned>, std::pair<std::vector<unsigned>, std::vector<unsigned>>> groups;
    std::map<std::tuple<int, unsigned, unsigned>, unsigned long long> first_ns;
    unsigned long long t_min = ~0ull;
    for (unsigned i = 0; i < cap; ++i) {
      if (((volatile int*)&recs[i].site)[0] < 0) continue;
      __sync_synchronize();  // the record's other words were written before its site (membar.sys between)
      Rec r; memcpy(&r, (const void*)&recs[i], sizeof r);
      auto key = std::make_tuple(r.site, r.bar, r.parity);
      groups[key].first.push_back(r.tid); groups[key].second.push_back(r.cta);
      if (!first_ns.count(key) || r.ns < first_ns[key]) first_ns[key] = r.ns;
      if (r.ns < t_min) t_min = r.ns;
    }
    std::string hangs;
    for (auto& [key, v] : groups) {
      char num[96];
      snprintf(num, sizeof num, "%s{\"site\": %d, \"bar\": %u, \"parity\": %d, ", hangs.empty() ? "" : ", ",
               std::get<0>(key), std::get<1>(key), std::get<2>(key) == 0xffffffffu ? -1 : (int)std::get<2>(key));
      hangs += num;
      hangs += "\"threads\": \"" + ranges(v.first) + "\", \"ctas\": \"" + ranges(v.second) + "\", ";
      snprintf(num, sizeof num, "\"t_us\": %.3f}", (first_ns[key] - t_min) / 1000.0);
      hangs += num;
    }
    const char* outcome = "completed";
    std::string extra;
    if (!done) {
      outcome = "hung";
      extra = ", \"watchdog\": true";
      printf("{\"schema\": \"pipecheck-replay-outcome/1\", \"run\": %d, \"outcome\": \"%s\", \"hangs\": [%s]%s, \"ms\": %.1f, "
             "\"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"smem\": %d, \"problem\": [%d, %d, %d], \"device\": \"%s\"}\n",
             run, outcome, hangs.c_str(), extra.c_str(), ms, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, M, N, K, prop.name);
      fflush(stdout);
      _exit(0);  // the kernel is blocked where no bound reaches; exiting tears it down
    }
    if (q != CUDA_SUCCESS) {
      const char* s = nullptr; cuGetErrorString(q, &s);
      printf("{\"schema\": \"pipecheck-replay-outcome/1\", \"run\": %d, \"outcome\": \"faulted\", \"fault\": \"%s\", \"hangs\": [%s], \"ms\": %.1f}\n",
             run, s ? s : "?", hangs.c_str(), ms);
      fflush(stdout);
      _exit(0);
    }
    unsigned fallback = 0;
    if (patched) DK(cuMemcpyDtoH(&fallback, gfb, sizeof fallback));
    std::vector<float> out(nD); CK(cudaMemcpy(out.data(), dD, nD * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0; double worst = 0;
    for (size_t i = 0; i < nD; ++i) {
      double d = std::abs((double)out[i] - (double)ref[i]);
      if (!(d <= 1e-3)) { ++bad; worst = std::isnan(d) ? INFINITY : std::max(worst, d); }
    }
    if (!groups.empty()) outcome = "hung";
    else if (bad) outcome = "wrong_data";
    if (bad && groups.empty()) {  // after a hang the threads that gave up never stored their tiles
      char buf[160];
      char err[32];
      if (std::isfinite(worst)) snprintf(err, sizeof err, "%g", worst); else snprintf(err, sizeof err, "null");  // NaN: never stored
      snprintf(buf, sizeof buf, ", \"wrong_data\": [{\"what\": \"D\", \"elements\": %zu, \"of\": %zu, \"max_abs_err\": %s}]", bad, nD, err);
      extra += buf;
    }
    printf("{\"schema\": \"pipecheck-replay-outcome/1\", \"run\": %d, \"outcome\": \"%s\", \"hangs\": [%s]%s, \"elect_fallbacks\": %u, "
           "\"ms\": %.1f, \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"smem\": %d, \"problem\": [%d, %d, %d], \"device\": \"%s\"}\n",
           run, outcome, hangs.c_str(), extra.c_str(), fallback, ms, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, M, N, K, prop.name);
    fflush(stdout);
  }
  return 0;
}
