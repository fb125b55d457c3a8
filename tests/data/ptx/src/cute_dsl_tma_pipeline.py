"""pipecheck PTX regression corpus: the smallest realistic Hopper CuTe DSL kernel on
cutlass.pipeline.PipelineTmaAsync.

One CTA computes a 64x128 tile of C = A * B^T (A: M x K, B: N x K, both K-major f16;
C: M x N, N-major f32), K in steps of 64 through a 4-stage shared-memory ring:

* warp 4 (threads 128..159) is the TMA producer: for every k tile it calls
  producer_acquire (wait on the stage's empty barrier, then arrive.expect_tx on its full
  barrier) and issues two TMA tile loads (A and B) onto the full barrier; after the loop,
  producer_tail (waits until the consumers have released every stage).
* warps 0..3 (one warpgroup) are the consumer: consumer_wait on the full barrier, four
  wgmma 64x128x16 over the stage, commit, wait for the wgmmas, consumer_release (one
  arrive per warp on the stage's empty barrier), then the accumulators go to global
  memory with plain stores.

Register split as in the DSL's Hopper examples: setmaxnreg.dec for the producer warp,
setmaxnreg.inc for the consumer warpgroup.

Variants (--variant):
  ok                       the correct protocol
  bug_release_before_wait  consumer_release before warpgroup.wait_group(0): the stage is
                           handed back to the producer while the wgmmas reading it may
                           still be in flight
  bug_consumer_count       empty-barrier arrival count 6 (warps) instead of the 4 consumer
                           warps that arrive: the producer's empty wait never completes
                           after the first lap of the ring (hang)

Compiled by tests/data/ptx/regen.py in a scratch directory with CUTE_DSL_ARCH=sm_90a:
cute.compile(..., options="--keep-ptx --generate-line-info") on fake tensors (cute.runtime.make_fake_compact_tensor
with symbolic M/N/K) and a fake stream; no GPU and no torch are needed.  The kept
*.sm_90a.ptx lands in the working directory.
"""

import argparse

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.memory import SmemAllocator
from cutlass.tensor_utils import LayoutEnum
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

BM, BN, BK = 64, 128, 64
STAGES = 4
CONSUMER_WARPS = 4  # one warpgroup
PRODUCER_WARP = 4
THREADS = 32 * (CONSUMER_WARPS + 1)


class TmaPipelineGemm:
    def __init__(self, variant: str):
        self.variant = variant
        # Empty-barrier arrival count: one arrive per consumer warp (cluster 1x1, so the
        # pipeline's signalling thread is lane 0 of each warp).
        self.consumer_arrivals = CONSUMER_WARPS + (2 if variant == "bug_consumer_count" else 0)
        self.release_before_wait = variant == "bug_release_before_wait"

    @cute.jit
    def __call__(self, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, stream):
        self.a_dtype = a.element_type
        self.b_dtype = b.element_type
        a_layout = LayoutEnum.from_tensor(a)
        b_layout = LayoutEnum.from_tensor(b)
        tile = (BM, BN, BK)

        tiled_mma = sm90_utils.make_trivial_tiled_mma(
            self.a_dtype, self.b_dtype,
            a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
            cutlass.Float32, (1, 1, 1), tiler_mn=(BM, BN),
        )
        sA_layout = sm90_utils.make_smem_layout_a(a_layout, tile, self.a_dtype, STAGES)
        sB_layout = sm90_utils.make_smem_layout_b(b_layout, tile, self.b_dtype, STAGES)

        tma_a, gA_tma = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), a,
            cute.slice_(sA_layout, (None, None, 0)), (BM, BK))
        tma_b, gB_tma = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), b,
            cute.slice_(sB_layout, (None, None, 0)), (BN, BK))

        @cute.struct
        class SharedStorage:
            barriers: cute.struct.MemRange[cutlass.Int64, STAGES * 2]
            sA: cute.struct.Align[
                cute.struct.MemRange[self.a_dtype, cute.cosize(sA_layout)], 1024]
            sB: cute.struct.Align[
                cute.struct.MemRange[self.b_dtype, cute.cosize(sB_layout)], 1024]

        self.shared_storage = SharedStorage
        self.tx_bytes = cute.size_in_bytes(
            self.a_dtype, cute.slice_(sA_layout, (None, None, 0))
        ) + cute.size_in_bytes(self.b_dtype, cute.slice_(sB_layout, (None, None, 0)))

        grid = (cute.ceil_div(c.shape[0], BM), cute.ceil_div(c.shape[1], BN), 1)
        self.kernel(tma_a, gA_tma, tma_b, gB_tma, c, tiled_mma, sA_layout, sB_layout).launch(
            grid=grid, block=[THREADS, 1, 1], cluster=(1, 1, 1), stream=stream)

    @cute.kernel
    def kernel(self, tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom,
               mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.TiledMma,
               sA_layout: cute.ComposedLayout, sB_layout: cute.ComposedLayout):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, _ = cute.arch.block_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())

        if warp_idx == PRODUCER_WARP:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)

        smem = SmemAllocator()
        storage = smem.allocate(self.shared_storage)

        ab_pipeline = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.barriers.data_ptr(),
            num_stages=STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(
                pipeline.Agent.Thread, self.consumer_arrivals),
            tx_count=self.tx_bytes,
            cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)),
        )

        sA = storage.sA.get_tensor(sA_layout.outer, swizzle=sA_layout.inner)
        sB = storage.sB.get_tensor(sB_layout.outer, swizzle=sB_layout.inner)

        gA = cute.local_tile(mA, (BM, BN, BK), (bidx, bidy, None), proj=(1, None, 1))
        gB = cute.local_tile(mB, (BM, BN, BK), (bidx, bidy, None), proj=(None, 1, 1))
        gC = cute.local_tile(mC, (BM, BN, BK), (bidx, bidy, None), proj=(1, 1, None))
        k_tiles = cute.size(gA, mode=[2])

        if warp_idx == PRODUCER_WARP:
            # ---------------------------------------------------------- TMA producer warp
            cute.arch.setmaxregister_decrease(40)
            tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
                tma_a, 0, cute.make_layout(1),
                cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
            tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
                tma_b, 0, cute.make_layout(1),
                cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))
            write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
            for k in cutlass.range(k_tiles, unroll=1):
                ab_pipeline.producer_acquire(write)
                bar = ab_pipeline.producer_get_barrier(write)
                cute.copy(tma_a, tAgA[(None, write.count)], tAsA[(None, write.index)],
                          tma_bar_ptr=bar)
                cute.copy(tma_b, tBgB[(None, write.count)], tBsB[(None, write.index)],
                          tma_bar_ptr=bar)
                ab_pipeline.producer_commit(write)
                write.advance()
            ab_pipeline.producer_tail(write)

        if warp_idx < CONSUMER_WARPS:
            # ------------------------------------------------------ wgmma consumer warpgroup
            cute.arch.setmaxregister_increase(232)
            thr_mma = tiled_mma.get_slice(tidx)
            tCsA = thr_mma.partition_A(sA)
            tCsB = thr_mma.partition_B(sB)
            tCrA = tiled_mma.make_fragment_A(tCsA)
            tCrB = tiled_mma.make_fragment_B(tCsB)
            tCgC = thr_mma.partition_C(gC)
            acc = cute.make_rmem_tensor(tCgC.shape, cutlass.Float32)
            acc.fill(0.0)
            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)

            read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
            num_k_blocks = cute.size(tCrA, mode=[2])
            for k in cutlass.range(k_tiles, unroll=1):
                ab_pipeline.consumer_wait(read)
                cute.nvgpu.warpgroup.fence()
                for kb in cutlass.range(num_k_blocks, unroll_full=True):
                    coord = (None, None, kb, read.index)
                    cute.gemm(tiled_mma, acc, tCrA[coord], tCrB[coord], acc)
                cute.nvgpu.warpgroup.commit_group()
                if cutlass.const_expr(self.release_before_wait):
                    ab_pipeline.consumer_release(read)  # BUG: wgmmas may still read it
                    cute.nvgpu.warpgroup.wait_group(0)
                else:
                    cute.nvgpu.warpgroup.wait_group(0)
                    ab_pipeline.consumer_release(read)
                read.advance()

            tCgC.store(acc.load())


def compile_variant(variant: str):
    sym = lambda: cute.sym_int32(divisibility=16)  # noqa: E731
    m, n, k = sym(), sym(), sym()
    a = make_fake_compact_tensor(cutlass.Float16, (m, k), stride_order=(1, 0), assumed_align=16)
    b = make_fake_compact_tensor(cutlass.Float16, (n, k), stride_order=(1, 0), assumed_align=16)
    c = make_fake_compact_tensor(cutlass.Float32, (m, n), stride_order=(1, 0), assumed_align=16)
    return cute.compile(TmaPipelineGemm(variant), a, b, c, make_fake_stream(),
                        options="--keep-ptx --generate-line-info")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="ok",
                    choices=["ok", "bug_release_before_wait", "bug_consumer_count"])
    compile_variant(ap.parse_args().variant)
