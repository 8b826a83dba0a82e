/* vqc.h: the whole public API of libvqcheck in one include. */
#ifndef VQC_VQC_H
#define VQC_VQC_H
#include "vqc/status.h"
#include "vqc/version.h"
/* core */
#include "vqc/tensor.h"
#include "vqc/rng.h"
#include "vqc/clock.h"
#include "vqc/digest.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/fsutil.h"
#include "vqc/watchdog.h"
#include "vqc/probe.h"
#include "vqc/fault.h"
#include "vqc/gpu.h"
/* reference quantizers */
#include "vqc/fsq.h"
#include "vqc/vq.h"
#include "vqc/rvq.h"
#include "vqc/rfsq.h"
#include "vqc/py_random.h"
/* what scenarios train */
#include "vqc/nn.h"
#include "vqc/autoencoder.h"
#include "vqc/bottleneck.h"
#include "vqc/optim.h"
#include "vqc/ddp.h"
#include "vqc/data.h"
#include "vqc/clip.h"
#endif
