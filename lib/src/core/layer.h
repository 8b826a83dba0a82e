/* core/ owns: status codes, tensors and storage (core/cuda/ on a device), the
 *   RNGs, digests, the clock, file helpers and the fault list.
 * May use: nothing else of libvqcheck (libc, libxxhash, jansson, CUDA runtime).
 *
 * This header names the public headers core/ owns (tests/layers.sh reads it to
 * check that every folder of lib/src includes only its own layer and those
 * below: core <- comm <- quant <- train), and includes them all, so it also
 * shows that the layer compiles on its own. */
#ifndef VQC_CORE_LAYER_H
#define VQC_CORE_LAYER_H

#include "vqc/clock.h"
#include "vqc/digest.h"
#include "vqc/fault.h"
#include "vqc/fsutil.h"
#include "vqc/gpu_base.h"
#include "vqc/py_random.h"
#include "vqc/rng.h"
#include "vqc/status.h"
#include "vqc/tensor.h"
#include "vqc/version.h"

#endif /* VQC_CORE_LAYER_H */
