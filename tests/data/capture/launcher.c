/* A program that loads a PTX module and launches its kernel through the driver API, as the replay
 * harness does: argv[1] is the PTX file, argv[2] the loop count it passes as the kernel's first parameter. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 3;
  static char image[1 << 20];
  size_t n = fread(image, 1, sizeof image - 1, f);
  image[n] = 0;
  fclose(f);
  CUmodule m; CUfunction fn;
  if (cuModuleLoadData(&m, image) || cuModuleGetFunction(&fn, m, "_Z4miniiPi")) return 4;
  int k = atoi(argv[2]);
  void* out = NULL;
  void* params[] = {&k, &out};
  CUlaunchAttribute attr;
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = 1; attr.value.clusterDim.y = 1; attr.value.clusterDim.z = 1;
  CUlaunchConfig cfg = {0};
  cfg.gridDimX = 1; cfg.gridDimY = 1; cfg.gridDimZ = 1; cfg.blockDimX = 64; cfg.blockDimY = 1; cfg.blockDimZ = 1;
  cfg.attrs = &attr; cfg.numAttrs = 1;
  return cuLaunchKernelEx(&cfg, fn, params, NULL) ? 5 : 0;
}
