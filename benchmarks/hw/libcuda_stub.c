/* Link-time stand-in for the driver library (libcuda.so.1), for building the PTX replay harness on a
 * machine with the CUDA toolkit but no driver: the harness is linked against these names and, on the
 * GPU machine, the loader binds them to the real driver. Never run. */
#define STUB(name) int name(void) { return 999; }
STUB(cuModuleLoadData)
STUB(cuModuleGetFunction)
STUB(cuModuleGetGlobal_v2)
STUB(cuFuncGetParamInfo)
STUB(cuFuncSetAttribute)
STUB(cuMemcpyHtoD_v2)
STUB(cuMemcpyDtoH_v2)
STUB(cuLaunchKernelEx)
STUB(cuStreamQuery)
STUB(cuGetErrorString)
