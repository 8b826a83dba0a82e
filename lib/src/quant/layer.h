/* quant/ owns: the reference quantizers (FSQ, residual FSQ, the VQ codebook
 *   with EMA, k-means, dead codes and the sampler; RVQ), the kernels' API,
 *   and the VQ step on a device built on it (vq_device.c, beside its CPU
 *   twin vq_forward.c).
 * May use: core/ and comm/ (codebook collectives, probes).
 *
 * The public headers quant/ owns (see core/layer.h for how tests/layers.sh
 * uses this list). */
#ifndef VQC_QUANT_LAYER_H
#define VQC_QUANT_LAYER_H

#include "comm/layer.h"
#include "vqc/fsq.h"
#include "vqc/gpu.h"
#include "vqc/rfsq.h"
#include "vqc/rvq.h"
#include "vqc/vq.h"

#endif /* VQC_QUANT_LAYER_H */
