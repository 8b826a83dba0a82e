/* train/ owns: what scenarios train: layers and parameters, optimizers, DDP,
 *   the CLIP loss, the autoencoder and its bottlenecks, synthetic data.
 * May use: core/, comm/ and quant/ (the bottlenecks wrap the quantizers).
 *
 * The public headers train/ owns (see core/layer.h for how tests/layers.sh
 * uses this list). */
#ifndef VQC_TRAIN_LAYER_H
#define VQC_TRAIN_LAYER_H

#include "quant/layer.h"
#include "vqc/autoencoder.h"
#include "vqc/bottleneck.h"
#include "vqc/clip.h"
#include "vqc/data.h"
#include "vqc/ddp.h"
#include "vqc/nn.h"
#include "vqc/optim.h"

#endif /* VQC_TRAIN_LAYER_H */
