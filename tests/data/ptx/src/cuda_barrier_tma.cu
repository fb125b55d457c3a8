// libcu++'s cuda::barrier with TMA, as the CUDA C++ Programming Guide writes it ("Using TMA to
// transfer one-dimensional arrays": cp_async_bulk_global_to_shared, barrier_arrive_tx, then
// bar.wait(std::move(token))), in a loop over tiles so the barrier runs several phases: the
// waits are phase-token waits (mbarrier.arrive ... %rd, then a try_wait loop with a back-off on
// %globaltimer and nanosleep), not the parity form CUTLASS uses.
// Variants (tests/data/ptx/regen.py): -DBUG_COUNT counts one arrival more than the block has;
// -DBUG_NO_SYNC drops the __syncthreads before the store, so the store may read the tile while
// other threads still write it and the next copy may land under their writes.
#include <cuda/barrier>
#include <cuda/ptx>
using barrier = cuda::barrier<cuda::thread_scope_block>;
namespace cde = cuda::device::experimental;

constexpr int kBuf = 128;  // one int per thread (a per-thread loop over more elements splits every thread
                            // into a class of its own: docs/ptx.md, limits)

__global__ void __launch_bounds__(128) add_one_tiles(int* data, int tiles) {
  __shared__ alignas(16) int smem[kBuf];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ barrier bar;
  if (threadIdx.x == 0) {
#ifdef BUG_COUNT
    init(&bar, blockDim.x + 1);
#else
    init(&bar, blockDim.x);
#endif
    cde::fence_proxy_async_shared_cta();
  }
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    int* tile = data + (blockIdx.x * tiles + t) * kBuf;
    barrier::arrival_token token;
    if (threadIdx.x == 0) {
      cde::cp_async_bulk_global_to_shared(smem, tile, sizeof(smem), bar);
      token = cuda::device::barrier_arrive_tx(bar, 1, sizeof(smem));
    } else {
      token = bar.arrive();
    }
    bar.wait(std::move(token));
    smem[threadIdx.x] += 1;
    cde::fence_proxy_async_shared_cta();
#ifndef BUG_NO_SYNC
    __syncthreads();
#endif
    if (threadIdx.x == 0) {
      cde::cp_async_bulk_shared_to_global(tile, smem, sizeof(smem));
      cde::cp_async_bulk_commit_group();
      cde::cp_async_bulk_wait_group_read<0>();
    }
    __syncthreads();
  }
}
