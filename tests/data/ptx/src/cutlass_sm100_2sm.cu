// pipecheck: CUTLASS 4.2 SM100 (sm_100a) TMA warp-specialized 2-SM UMMA GEMM through the CollectiveBuilder
// (KernelTmaWarpSpecialized2SmSm100, MMA tile 256x128x64 over a 2x1x1 cluster: one tcgen05.mma.cta_group::2 per
// k-block issued by the even CTA, its commit multicast to both CTAs, cp.async.bulk.tensor...cta_group::2 loads
// completing on the even CTA's full barrier), with the static persistent tile scheduler (no cluster launch control):
//   nvcc -std=c++17 -arch=sm_100a --ptx -O3 -lineinfo -DNDEBUG --expt-relaxed-constexpr -I<cutlass>/include
// (tests/data/ptx/regen.py; about 60 s, 120k lines of PTX, most of them -lineinfo's debug strings).
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/device_kernel.h"
using namespace cute;
using ElementA = cutlass::half_t; using LayoutA = cutlass::layout::RowMajor;
constexpr int AlignmentA = 128 / cutlass::sizeof_bits<ElementA>::value;
using ElementB = cutlass::half_t; using LayoutB = cutlass::layout::ColumnMajor;
constexpr int AlignmentB = 128 / cutlass::sizeof_bits<ElementB>::value;
using ElementC = float; using LayoutC = cutlass::layout::ColumnMajor;
constexpr int AlignmentC = 128 / cutlass::sizeof_bits<ElementC>::value;
using ElementAccumulator = float;
using MmaTileShape = Shape<Int<256>, _128, _64>;
using ClusterShape = Shape<Int<2>, _1, _1>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp, MmaTileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementAccumulator,
    ElementC, LayoutC, AlignmentC, ElementC, LayoutC, AlignmentC,
    cutlass::epilogue::collective::EpilogueScheduleAuto>::CollectiveOp;
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, AlignmentA,
    ElementB, LayoutB, AlignmentB, ElementAccumulator, MmaTileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecialized2SmSm100>::CollectiveOp;
#ifdef PIPECHECK_CLC_SCHEDULER
using TileScheduler = void;  // the default SM100 tile scheduler: cluster launch control (cutlass_sm100_2sm_clc.cu)
#else
using TileScheduler = cutlass::gemm::StaticPersistentScheduler;
#endif
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, CollectiveMainloop, CollectiveEpilogue, TileScheduler>;
void* p() { return (void*)&cutlass::device_kernel<GemmKernel>; }
