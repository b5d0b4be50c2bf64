#pragma once
/** The engines behind ConvBackpropApi::Conv3DBackpropFilter / Conv3DBackpropInput (the class
 * templates in lib/conv_backprop/ only forward here, by element type).
 *
 * An engine follows CANN's call protocol (Init, setters, while (Iterate()) GetTensorC(), End) and
 * CANN's block order and output offsets (docs/ascendc.md). The numbers come from tbex kernels: the
 * first Iterate of a single shape runs one tbex-compiled kernel for the whole single shape (the
 * slice of the convolution it describes, fp32 accumulation), and each Iterate then yields one
 * baseUseM x baseUseN block of that result in CANN's order. Misuse (Iterate before Init, K not a
 * multiple of Wo, a tiling that does not describe a convolution) throws tbex::UserError. */
#include <cstdint>
#include <memory>

#include "tbex/ascendc/export.h"
#include "tbex/ascendc/tiling_data.h"
#include "tbex/ascendc/types.h"

namespace tbex::ascendc {

/** The ctx members user kernels read (CANN names). */
struct IterCounters {
  uint8_t isFirstIter_ = 1;
  uint32_t curML0Idx_ = 0;
  uint32_t curNL0Idx_ = 0;
  uint32_t baseUseM_ = 0;
  uint32_t baseUseN_ = 0;
};

struct DxCounters : IterCounters {
  uint32_t curDinIdx_ = 0;
  uint64_t singleShapeCin_ = 0;
  /** False when no term of the block's sums exists (GetTensorC then writes nothing). */
  bool needComputeFlag_ = true;
};

/** Where GetTensorC writes: the dW output's format or the dX output's. */
enum class OutFormat : uint8_t { kFractalZ3D, kNDC1HWC0, kNCDHW };

class TBEX_ASCENDC_API DwEngine {
 public:
  /** src: the element type of x and dy (half or bfloat16_t). */
  explicit DwEngine(Elem src);
  ~DwEngine();
  DwEngine(const DwEngine&) = delete;
  DwEngine& operator=(const DwEngine&) = delete;

  void init(const TConv3DBpFilterTiling* tiling);
  void set_input(const void* x);
  void set_grad_output(const void* dy);
  void set_single_shape(uint64_t m, uint64_t n, uint64_t k);
  void set_start_position(uint32_t ho_start);
  bool iterate(IterCounters& ctx);
  /** The current block into `out` (fp32, FRACTAL_Z_3D relative to out): add when atomic is 1,
   * overwrite when 0; sequential: compact [n/16][baseM][16] at out[0]. */
  void get_tensor_c(const IterCounters& ctx, float* out, uint8_t atomic, bool sequential);
  void end();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TBEX_ASCENDC_API DxEngine {
 public:
  /** src: weight and dy element type (half or bfloat16_t); dst: dx element type. */
  DxEngine(Elem src, Elem dst, OutFormat out_format);
  ~DxEngine();
  DxEngine(const DxEngine&) = delete;
  DxEngine& operator=(const DxEngine&) = delete;

  void init(const TConv3DBackpropInputTiling* tiling);
  void set_weight(const void* w);
  void set_grad_output(const void* dy);
  void set_single_shape(uint64_t m, uint64_t k, uint32_t n);
  void set_start_position(uint32_t din, int32_t ho_start);
  bool iterate(DxCounters& ctx);
  /** The current block into `out` (dst elements): NDC1HWC0 relative to out (add in the dst type
   * when atomic is 1, overwrite when 0; sequential: no write), or for NCDHW the NZ block
   * [ceil(baseUseN/16)][baseUseM][16] at out[GetBlockIdx() * baseM * baseN] (a workspace the
   * kernel transposes). Nothing when needComputeFlag_ is false. */
  void get_tensor_c(const DxCounters& ctx, void* out, uint8_t atomic, bool sequential);
  void end();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tbex::ascendc
