// pipecheck: CUTLASS 4.2 SM100 2-SM UMMA GEMM of cutlass_sm100_2sm.cu with the default SM100 tile scheduler,
// cluster launch control (PersistentTileSchedulerSm100: a scheduler warp's try_cancel multicast, every role's
// query_cancel), built the same way (tests/data/ptx/regen.py).
#define PIPECHECK_CLC_SCHEDULER
#include "cutlass_sm100_2sm.cu"
