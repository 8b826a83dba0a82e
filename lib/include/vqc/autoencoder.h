/* autoencoder.h: the tiny autoencoder the VQ scenarios train, with a
 * pluggable bottleneck so a VQ, RVQ or FSQ quantizer can sit in the middle.
 *
 *   x (B, din) -> encoder.0 Linear(din, hidden) -> act
 *              -> encoder.2 Linear(hidden, latent)          = z (B, latent)
 *              -> bottleneck                                 = q (B, latent)
 *              -> decoder.0 Linear(latent, hidden) -> act
 *              -> decoder.2 Linear(hidden, din)              = recon (B, din)
 *
 *   loss = mean((recon - x)^2)  +  mean over rows of the bottleneck's
 *          per-row loss (the commitment term of a quantizer)
 *
 * (Parameter names follow torch.nn.Sequential numbering, the activation
 * being layer 1, so traces line up with a PyTorch twin.)
 *
 * Plugging in a quantizer: fill a vqc_bottleneck with your state in `ctx`
 * and three functions; the helpers vqc_commitment_rows and
 * vqc_straight_through_backward implement spec/quantizers.md's commitment
 * loss and straight-through gradient, so an adapter is a few lines:
 *
 *   forward:  quantize z into q (the forward value of z + sg(q - z)); then
 *             vqc_commitment_rows(z, q, rows, dim, commitment_weight, row_loss)
 *   backward: vqc_straight_through_backward(z, q, dq, rows, dim,
 *                                           commitment_weight, dloss_row, dz)
 *   register_state (optional): add the codebook, cluster sizes, EMA sums to
 *             the list with grad = NULL; they appear as "bottleneck.<name>". */
#ifndef VQC_AUTOENCODER_H
#define VQC_AUTOENCODER_H

#include <stdint.h>

#include "vqc/nn.h"
#include "vqc/rng.h"
#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the bottleneck interface ---- */

typedef struct vqc_bottleneck {
  const char *name; /* "identity", "vq", "rvq", "fsq": for messages */
  void *ctx;        /* the quantizer's state; owned by whoever built it, and
                       it must outlive the autoencoder */
  /* z (rows, dim) -> q (rows, dim), the value passed on to the decoder, and
   * row_loss (rows): row i's loss term, such that the bottleneck's loss is the
   * mean of row_loss over the rows (for a quantizer: commitment_weight *
   * mean over d of (q - z)^2). May update training state (EMA) and run
   * collectives; ctx carries the comm, the step and the train/eval flag. */
  vqc_status (*forward)(void *ctx, const float *z, int64_t rows, int64_t dim,
                        float *q, float *row_loss);
  /* Adds to dz (rows, dim) the gradient for z, given dq (rows, dim), the
   * gradient reaching q, and dloss_row, the gradient of the objective with
   * respect to every row_loss entry (grad_scale / rows; so the gradient for
   * the bottleneck's mean loss is dloss_row * rows). z and q are the
   * forward's values. dz arrives zero-filled (the autoencoder clears it), so
   * an adapter may also write it outright. A quantizer passes dq straight
   * through and adds the commitment gradient (vqc_straight_through_backward). */
  vqc_status (*backward)(void *ctx, const float *z, const float *q,
                         const float *dq, int64_t rows, int64_t dim,
                         float dloss_row, float *dz);
  /* Optional (may be NULL): registers replicated state for digests. */
  vqc_status (*register_state)(void *ctx, vqc_param_list *list);
} vqc_bottleneck;

/* q = z, no loss, gradient passed through unchanged. */
vqc_bottleneck vqc_bottleneck_identity(void);

/* row_loss[i] = weight * mean over d of (q[i,d] - z[i,d])^2, each row summed
 * in double and rounded once: spec/quantizers.md's commitment loss
 * commitment_weight * mean((sg(q) - x)^2) is the mean of these over rows. */
void vqc_commitment_rows(const float *z, const float *q, int64_t rows,
                         int64_t dim, float weight, float *row_loss);
/* dz += dq + c * (z - q) with c = dloss_row * weight * 2 / dim rounded to
 * float once: the straight-through gradient of z + sg(q - z) plus the
 * gradient of the commitment rows above (q held constant, as sg does). */
void vqc_straight_through_backward(const float *z, const float *q,
                                   const float *dq, int64_t rows, int64_t dim,
                                   float weight, float dloss_row, float *dz);

/* ---- the model ---- */

typedef struct vqc_autoencoder_config {
  int64_t din;    /* input and reconstruction width */
  int64_t hidden; /* hidden width of encoder and decoder */
  int64_t latent; /* width of z and q */
  vqc_act act;    /* after encoder.0 and decoder.0 */
} vqc_autoencoder_config;

typedef struct vqc_ae_loss {
  double total;      /* recon + bottleneck */
  double recon;      /* mean((recon - x)^2) */
  double bottleneck; /* mean of the bottleneck's row_loss */
} vqc_ae_loss;

typedef struct vqc_autoencoder vqc_autoencoder;

/* Builds the model, drawing the weights from `init` in layer order
 * (encoder.0, encoder.2, decoder.0, decoder.2; each weight then bias), and
 * registers its parameters, then the bottleneck's state under "bottleneck.".
 * bottleneck NULL means the identity; the struct is copied. Free with
 * vqc_autoencoder_destroy. */
vqc_status vqc_autoencoder_create(const vqc_autoencoder_config *cfg,
                                  vqc_rng *init,
                                  const vqc_bottleneck *bottleneck,
                                  vqc_autoencoder **out);
void vqc_autoencoder_destroy(vqc_autoencoder *ae); /* accepts NULL */

/* Forward over x (rows, din); keeps the activations (and a copy of x) for
 * the next backward. rows may be 0 (a rank with an empty shard): then the
 * loss is 0 and backward adds nothing. */
vqc_status vqc_autoencoder_forward(vqc_autoencoder *ae, const float *x,
                                   int64_t rows, vqc_ae_loss *loss);
/* Adds the gradient of grad_scale * loss.total (of the last forward) to
 * every parameter's grad. grad_scale is 1 for a plain mean over this rank's
 * rows; vqc_ddp_loss_scale (ddp.h) gives the factor that makes DDP's 1/W
 * average equal the global-batch mean when shards are uneven. */
vqc_status vqc_autoencoder_backward(vqc_autoencoder *ae, float grad_scale);

/* The trainable parameters (and bottleneck state, grad NULL), in the order
 * of creation. Owned by the model. */
const vqc_param_list *vqc_autoencoder_params(const vqc_autoencoder *ae);
/* The last forward's tensors (owned by the model, valid until the next
 * forward): z and q (rows, latent), recon (rows, din). Any may be NULL. */
void vqc_autoencoder_activations(const vqc_autoencoder *ae, const float **z,
                                 const float **q, const float **recon);

#ifdef __cplusplus
}
#endif
#endif /* VQC_AUTOENCODER_H */
