/* pipecheck capture: an LD_PRELOAD interposer that records the kernel launches a program makes through
 * the CUDA driver API (docs/replay.md, "Capture").
 *
 * Built by `pipecheck capture` with the machine's C compiler and the toolkit's cuda.h:
 *     cc -shared -fPIC -O2 -I<cuda>/include capture.c -o pipecheck_capture.so -ldl
 * and run as LD_PRELOAD=pipecheck_capture.so PIPECHECK_CAPTURE_DIR=DIR program ...
 *
 * For every module a program loads (cuModuleLoad, cuModuleLoadData, cuModuleLoadDataEx) it writes the
 * image to DIR/module-N.{ptx,cubin,fatbin}; for every launch (cuLaunchKernel, cuLaunchKernelEx and their
 * per-thread-stream forms) DIR/launch-K.json (kernel name, module file, grid, block, cluster, dynamic
 * shared memory, the parameter layout from cuFuncGetParamInfo) and DIR/launch-K.params (the parameter
 * bytes at their offsets). Then it calls the driver's own function: the program runs as it would.
 * PIPECHECK_CAPTURE_MAX (default 16) caps the launches recorded. Launches through the runtime API reach
 * the driver through entry points the runtime looks up itself, which an interposer does not see.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_MODULES 1024
#define MAX_FUNCS 2048
#define MAX_PARAMS 512

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct { CUmodule m; char file[64]; } mods[MAX_MODULES];
static int nmods;
static struct { CUfunction f; int mod; char name[8192]; } funcs[MAX_FUNCS];
static int nfuncs;
static int nlaunches;

static const char* cap_dir(void) {
  const char* d = getenv("PIPECHECK_CAPTURE_DIR");
  if (!d || !*d) d = "pipecheck-capture";
  mkdir(d, 0755);
  return d;
}

static void* real(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    fprintf(stderr, "pipecheck capture: the driver has no %s\n", name);
    abort();
  }
  return p;
}

static size_t elf_size(const unsigned char* p) {
  if (p[4] != 2) return 0;  /* 64-bit ELF only */
  uint64_t shoff, phoff;
  uint16_t shentsize, shnum, phentsize, phnum;
  memcpy(&phoff, p + 0x20, 8); memcpy(&shoff, p + 0x28, 8);
  memcpy(&phentsize, p + 0x36, 2); memcpy(&phnum, p + 0x38, 2);
  memcpy(&shentsize, p + 0x3A, 2); memcpy(&shnum, p + 0x3C, 2);
  size_t a = shoff + (size_t)shentsize * shnum, b = phoff + (size_t)phentsize * phnum;
  return a > b ? a : b;
}

static void save_image(CUmodule m, const void* image, size_t known) {
  const unsigned char* p = (const unsigned char*)image;
  const char* ext = "ptx";
  size_t n = known;
  if (!n) {
    if (memcmp(p, "\x7f" "ELF", 4) == 0) { ext = "cubin"; n = elf_size(p); }
    else if (p[0] == 0x50 && p[1] == 0xED && p[2] == 0x55 && p[3] == 0xBA) {  /* fatbin 0xBA55ED50 */
      uint16_t hs; uint64_t fs;
      memcpy(&hs, p + 6, 2); memcpy(&fs, p + 8, 8);
      ext = "fatbin"; n = hs + fs;
    } else {
      n = strlen((const char*)p);
    }
  }
  pthread_mutex_lock(&mu);
  if (nmods < MAX_MODULES) {
    int id = nmods++;
    mods[id].m = m;
    snprintf(mods[id].file, sizeof mods[id].file, "module-%d.%s", id, ext);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", cap_dir(), mods[id].file);
    FILE* f = fopen(path, "wb");
    if (f) { fwrite(p, 1, n, f); fclose(f); }
  }
  pthread_mutex_unlock(&mu);
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  CUresult (*fn)(CUmodule*, const void*) = real("cuModuleLoadData");
  CUresult r = fn(module, image);
  if (r == CUDA_SUCCESS) save_image(*module, image, 0);
  return r;
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int n, CUjit_option* o, void** v) {
  CUresult (*fn)(CUmodule*, const void*, unsigned int, CUjit_option*, void**) = real("cuModuleLoadDataEx");
  CUresult r = fn(module, image, n, o, v);
  if (r == CUDA_SUCCESS) save_image(*module, image, 0);
  return r;
}

CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  CUresult (*fn)(CUmodule*, const char*) = real("cuModuleLoad");
  CUresult r = fn(module, fname);
  if (r == CUDA_SUCCESS) {
    FILE* f = fopen(fname, "rb");
    if (f) {
      fseek(f, 0, SEEK_END);
      long n = ftell(f);
      fseek(f, 0, SEEK_SET);
      unsigned char* buf = malloc(n + 1);
      if (buf && fread(buf, 1, n, f) == (size_t)n) { buf[n] = 0; save_image(*module, buf, memcmp(buf, "\x7f" "ELF", 4) ? 0 : n); }
      free(buf);
      fclose(f);
    }
  }
  return r;
}

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  CUresult (*fn)(CUfunction*, CUmodule, const char*) = real("cuModuleGetFunction");
  CUresult r = fn(hfunc, hmod, name);
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&mu);
    if (nfuncs < MAX_FUNCS) {
      funcs[nfuncs].f = *hfunc;
      funcs[nfuncs].mod = -1;
      for (int i = 0; i < nmods; ++i) if (mods[i].m == hmod) funcs[nfuncs].mod = i;
      snprintf(funcs[nfuncs].name, sizeof funcs[nfuncs].name, "%s", name);
      ++nfuncs;
    }
    pthread_mutex_unlock(&mu);
  }
  return r;
}

static void record(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned cx, unsigned cy, unsigned cz, unsigned smem, void** params) {
  const char* max_s = getenv("PIPECHECK_CAPTURE_MAX");
  int max = max_s ? atoi(max_s) : 16;
  pthread_mutex_lock(&mu);
  int k = nlaunches;
  if (k >= max) { pthread_mutex_unlock(&mu); return; }
  ++nlaunches;
  const char* name = "?";
  const char* file = "";
  for (int i = 0; i < nfuncs; ++i)
    if (funcs[i].f == f) { name = funcs[i].name; if (funcs[i].mod >= 0) file = mods[funcs[i].mod].file; }
  pthread_mutex_unlock(&mu);
  CUresult (*info)(CUfunction, size_t, size_t*, size_t*) = real("cuFuncGetParamInfo");
  size_t offs[MAX_PARAMS], sizes[MAX_PARAMS], total = 0;
  int np = 0;
  while (np < MAX_PARAMS && info(f, np, &offs[np], &sizes[np]) == CUDA_SUCCESS) {
    if (offs[np] + sizes[np] > total) total = offs[np] + sizes[np];
    ++np;
  }
  unsigned char* bytes = calloc(total ? total : 1, 1);
  for (int i = 0; i < np && params; ++i) memcpy(bytes + offs[i], params[i], sizes[i]);
  const char* d = cap_dir();
  char path[4096];
  snprintf(path, sizeof path, "%s/launch-%d.params", d, k);
  FILE* fp = fopen(path, "wb");
  if (fp) { fwrite(bytes, 1, total, fp); fclose(fp); }
  free(bytes);
  snprintf(path, sizeof path, "%s/launch-%d.json", d, k);
  fp = fopen(path, "w");
  if (!fp) return;
  fprintf(fp, "{\n \"schema\": \"pipecheck-launch/1\",\n \"index\": %d,\n \"kernel\": \"%s\",\n \"image\": \"%s\",\n", k, name, file);
  fprintf(fp, " \"grid\": [%u, %u, %u],\n \"block\": [%u, %u, %u],\n \"cluster\": [%u, %u, %u],\n", gx, gy, gz, bx, by, bz, cx, cy, cz);
  fprintf(fp, " \"dynamic_smem\": %u,\n \"params\": \"launch-%d.params\",\n \"param_layout\": [", smem, k);
  for (int i = 0; i < np; ++i) fprintf(fp, "%s[%zu, %zu]", i ? ", " : "", offs[i], sizes[i]);
  fprintf(fp, "]\n}\n");
  fclose(fp);
}

static void cluster_of(const CUlaunchConfig* c, unsigned* x, unsigned* y, unsigned* z) {
  *x = *y = *z = 1;
  for (unsigned i = 0; c && i < c->numAttrs; ++i)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      *x = c->attrs[i].value.clusterDim.x; *y = c->attrs[i].value.clusterDim.y; *z = c->attrs[i].value.clusterDim.z;
    }
}

#define LAUNCH(NAME)                                                                                              \
  CUresult NAME(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,      \
                unsigned smem, CUstream s, void** params, void** extra) {                                        \
    CUresult (*fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,    \
                   void**, void**) = real(#NAME);                                                                \
    record(f, gx, gy, gz, bx, by, bz, 1, 1, 1, smem, params);                                                    \
    return fn(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);                                               \
  }
#define LAUNCH_EX(NAME)                                                                                           \
  CUresult NAME(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {                          \
    CUresult (*fn)(const CUlaunchConfig*, CUfunction, void**, void**) = real(#NAME);                             \
    unsigned cx, cy, cz;                                                                                        \
    cluster_of(c, &cx, &cy, &cz);                                                                               \
    record(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, cx, cy, cz,      \
           c->sharedMemBytes, params);                                                                          \
    return fn(c, f, params, extra);                                                                             \
  }

#undef cuLaunchKernel
#undef cuLaunchKernelEx
LAUNCH(cuLaunchKernel)
LAUNCH(cuLaunchKernel_ptsz)
LAUNCH_EX(cuLaunchKernelEx)
LAUNCH_EX(cuLaunchKernelEx_ptsz)
