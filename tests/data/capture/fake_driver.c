/* A stand-in for libcuda.so.1 for the capture test: it accepts a module, hands out one function with
 * the parameter layout of tests/data/ptx/mini_ok.ptx (a u32 at 0, a u64 at 8) and "launches" nothing. */
#include <stddef.h>
#include <string.h>
typedef int CUresult;
typedef void* CUmodule;
typedef void* CUfunction;
static int module_token, function_token;
CUresult cuModuleLoadData(CUmodule* m, const void* image) { (void)image; *m = &module_token; return 0; }
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  (void)m; *f = strcmp(name, "_Z4miniiPi") ? NULL : &function_token; return *f ? 0 : 500;
}
CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t* off, size_t* size) {
  (void)f;
  if (i == 0) { *off = 0; *size = 4; return 0; }
  if (i == 1) { *off = 8; *size = 8; return 0; }
  return 1;
}
typedef struct { unsigned gx, gy, gz, bx, by, bz, smem; void* stream; void* attrs; unsigned n; } Config;
CUresult cuLaunchKernelEx(const void* c, CUfunction f, void** p, void** e) { (void)c; (void)f; (void)p; (void)e; return 0; }
CUresult cuLaunchKernel(CUfunction f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g,
                        unsigned smem, void* s, void** p, void** x) {
  (void)f; (void)a; (void)b; (void)c; (void)d; (void)e; (void)g; (void)smem; (void)s; (void)p; (void)x; return 0;
}
