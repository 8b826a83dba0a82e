/* test_tensor.c: unit tests for vqc/tensor.h: creation for every dtype,
 * contiguity, views that share storage, reshape rules, contiguous copies and
 * their origin link, reference counts, borrowed memory, argument checking,
 * and device storage (VQC_ENODEVICE without a GPU, a round trip with one).
 *
 * Values are small integers, exact in every dtype, so every comparison is
 * exact. Run under the sanitizer build (VQC_SANITIZE=ON) too: the refcount and
 * wrap tests are the ones ASan guards (use after free, freeing caller
 * memory). */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "vqc/status.h"
#include "vqc/tensor.h"

/* ---- helpers */

static void make2(vqc_tensor *t, vqc_dtype dt, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  cr_assert_eq(vqc_tensor_empty(t, dt, 2, shape, VQC_DEVICE_CPU), VQC_OK, "%s",
               vqc_last_error());
}

/* t[i][j] = 10*i + j: exact in every dtype (uint8 too, for i, j < 10). */
static void fill2(vqc_tensor *t) {
  for (int64_t i = 0; i < t->shape[0]; i++)
    for (int64_t j = 0; j < t->shape[1]; j++)
      vqc_tensor_set(t, (int64_t[]){i, j}, (double)(10 * i + j));
}

static double get2(const vqc_tensor *t, int64_t i, int64_t j) {
  return vqc_tensor_get(t, (int64_t[]){i, j});
}

static long refs(const vqc_tensor *t) {
  return __atomic_load_n(&t->storage->refs, __ATOMIC_SEQ_CST);
}

/* ---- dtypes */

Test(tensor, dtype_table) {
  const char *names[] = {"float32", "float64", "int32", "int64", "uint8"};
  const size_t sizes[] = {4, 8, 4, 8, 1};
  for (int i = 0; i < VQC_DTYPE_COUNT; i++) {
    vqc_dtype dt = (vqc_dtype)i;
    cr_assert_eq(vqc_dtype_size(dt), sizes[i]);
    cr_assert_str_eq(vqc_dtype_name(dt), names[i]);
    cr_assert_eq(vqc_dtype_digest_code(dt), i + 1); /* README: never renumber */
    vqc_dtype back;
    cr_assert_eq(vqc_dtype_from_name(names[i], &back), VQC_OK);
    cr_assert_eq(back, dt);
  }
  cr_assert_eq(vqc_dtype_size(VQC_DTYPE_COUNT), 0);
  cr_assert_str_eq(vqc_dtype_name((vqc_dtype)99), "?");
  cr_assert_eq(vqc_dtype_digest_code((vqc_dtype)-1), 0);
  vqc_dtype dt;
  cr_assert_eq(vqc_dtype_from_name("float16", &dt), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "float16") != NULL, "%s",
            vqc_last_error());
  cr_assert_eq(vqc_dtype_from_name(NULL, &dt), VQC_EINVAL);
}

/* ---- creation */

Test(tensor, create_every_dtype) {
  uint64_t prev_id = 0;
  for (int i = 0; i < VQC_DTYPE_COUNT; i++) {
    vqc_dtype dt = (vqc_dtype)i;
    int64_t shape[3] = {2, 3, 4};
    vqc_tensor e, z;
    cr_assert_eq(vqc_tensor_empty(&e, dt, 3, shape, VQC_DEVICE_CPU), VQC_OK);
    cr_assert_eq(vqc_tensor_zeros(&z, dt, 3, shape, VQC_DEVICE_CPU), VQC_OK);
    for (int k = 0; k < 2; k++) {
      vqc_tensor *t = k == 0 ? &e : &z;
      cr_assert_eq(t->dtype, dt);
      cr_assert_eq(t->ndim, 3);
      cr_assert_eq(t->shape[0], 2);
      cr_assert_eq(t->shape[2], 4);
      cr_assert_eq(t->strides[0], 12);
      cr_assert_eq(t->strides[1], 4);
      cr_assert_eq(t->strides[2], 1);
      cr_assert_eq(t->offset, 0);
      cr_assert_eq(vqc_tensor_numel(t), 24);
      cr_assert_eq(vqc_tensor_nbytes(t), 24 * vqc_dtype_size(dt));
      cr_assert(vqc_tensor_is_contiguous(t));
      cr_assert_eq(t->storage->nbytes, 24 * vqc_dtype_size(dt));
      cr_assert(t->storage->owned);
      cr_assert_eq(t->storage->device, VQC_DEVICE_CPU);
      cr_assert_eq(refs(t), 1);
      cr_assert(!vqc_tensor_has_origin(t));
      cr_assert_eq(vqc_tensor_data(t), t->storage->data);
      /* ids are unique and increase within this thread */
      cr_assert_gt(t->storage->id, prev_id);
      prev_id = t->storage->id;
    }
    for (int64_t a = 0; a < 2; a++)
      for (int64_t b = 0; b < 3; b++)
        for (int64_t c = 0; c < 4; c++) {
          int64_t idx[3] = {a, b, c};
          cr_assert_eq(vqc_tensor_get(&z, idx), 0.0);
          double v = (double)(a * 12 + b * 4 + c); /* 0..23: exact everywhere */
          if (dt != VQC_U8 && (a + b + c) % 2) v = -v; /* signed values too */
          vqc_tensor_set(&e, idx, v);
          cr_assert_eq(vqc_tensor_get(&e, idx), v, "dtype %s", vqc_dtype_name(dt));
        }
    /* the bytes really are laid out row-major: last element at the end */
    if (dt == VQC_F32) cr_assert_eq(((float *)e.storage->data)[23], 23.0f); /* 1+2+3 even */
    if (dt == VQC_I64) cr_assert_eq(((int64_t *)e.storage->data)[22], -22);
    if (dt == VQC_U8) cr_assert_eq(((uint8_t *)e.storage->data)[23], 23);
    vqc_tensor_free(&e);
    vqc_tensor_free(&z);
    cr_assert_null(e.storage);
  }
}

Test(tensor, scalar_and_empty_shapes) {
  vqc_tensor s;
  cr_assert_eq(vqc_tensor_zeros(&s, VQC_F64, 0, NULL, VQC_DEVICE_CPU), VQC_OK);
  cr_assert_eq(vqc_tensor_numel(&s), 1);
  cr_assert_eq(vqc_tensor_nbytes(&s), 8);
  cr_assert(vqc_tensor_is_contiguous(&s));
  vqc_tensor_set(&s, NULL, 2.5);
  cr_assert_eq(vqc_tensor_get(&s, NULL), 2.5);
  char buf[32];
  vqc_tensor_shape_str(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "()");
  vqc_tensor_free(&s);

  vqc_tensor z;
  int64_t shape[2] = {0, 3};
  cr_assert_eq(vqc_tensor_empty(&z, VQC_I32, 2, shape, VQC_DEVICE_CPU), VQC_OK);
  cr_assert_eq(vqc_tensor_numel(&z), 0);
  cr_assert_eq(vqc_tensor_nbytes(&z), 0);
  cr_assert(vqc_tensor_is_contiguous(&z));
  cr_assert_not_null(vqc_tensor_data(&z));
  vqc_tensor r;
  cr_assert_eq(vqc_tensor_reshape(&z, 2, (int64_t[]){3, 0}, &r), VQC_OK);
  cr_assert_eq(vqc_tensor_numel(&r), 0);
  vqc_tensor_free(&r);
  vqc_tensor_free(&z);
}

Test(tensor, shape_str_and_free_edge_cases) {
  vqc_tensor t;
  make2(&t, VQC_F32, 2, 3);
  char buf[32];
  vqc_tensor_shape_str(&t, buf, sizeof buf);
  cr_assert_str_eq(buf, "(2, 3)");
  char tiny[4];
  vqc_tensor_shape_str(&t, tiny, sizeof tiny);
  cr_assert_str_eq(tiny, "(2,"); /* truncated, still terminated */
  vqc_tensor_free(&t);
  vqc_tensor_shape_str(&t, buf, sizeof buf);
  cr_assert_str_eq(buf, "(empty)");
  cr_assert_eq(vqc_tensor_numel(&t), 0);
  cr_assert_null(vqc_tensor_data(&t));
  vqc_tensor_free(&t); /* freeing a zeroed tensor is allowed */
  vqc_tensor_free(NULL);
}

/* ---- contiguity */

Test(tensor, contiguity_rules) {
  vqc_tensor t;
  make2(&t, VQC_F32, 3, 4);
  /* size-1 dims may carry any stride */
  vqc_tensor h = t;
  h.ndim = 3;
  h.shape[0] = 3, h.shape[1] = 1, h.shape[2] = 4;
  h.strides[0] = 4, h.strides[1] = 999, h.strides[2] = 1;
  cr_assert(vqc_tensor_is_contiguous(&h));
  h.strides[0] = 5; /* now rows are not adjacent */
  cr_assert(!vqc_tensor_is_contiguous(&h));

  vqc_tensor tr, rows, cols, one_col;
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &tr), VQC_OK);
  cr_assert(!vqc_tensor_is_contiguous(&tr));
  cr_assert_eq(vqc_tensor_slice(&t, 0, 1, 3, 1, &rows), VQC_OK);
  cr_assert(vqc_tensor_is_contiguous(&rows)); /* whole rows stay contiguous */
  cr_assert_eq(vqc_tensor_slice(&t, 1, 0, 4, 2, &cols), VQC_OK);
  cr_assert(!vqc_tensor_is_contiguous(&cols));
  cr_assert_eq(vqc_tensor_slice(&t, 0, 2, 3, 1, &one_col), VQC_OK);
  cr_assert(vqc_tensor_is_contiguous(&one_col)); /* shape (1, 4) */
  vqc_tensor_free(&tr);
  vqc_tensor_free(&rows);
  vqc_tensor_free(&cols);
  vqc_tensor_free(&one_col);
  vqc_tensor_free(&t);
  cr_assert(!vqc_tensor_is_contiguous(NULL));
}

/* ---- views */

Test(tensor, transpose_shares_storage_and_sees_writes) {
  vqc_tensor t, tr;
  make2(&t, VQC_I32, 2, 3);
  fill2(&t);
  cr_assert_eq(vqc_tensor_transpose(&t, 1, 0, &tr), VQC_OK);
  cr_assert(vqc_tensor_same_storage(&t, &tr));
  cr_assert_eq(refs(&t), 2);
  cr_assert_eq(tr.shape[0], 3);
  cr_assert_eq(tr.shape[1], 2);
  cr_assert_eq(tr.strides[0], 1);
  cr_assert_eq(tr.strides[1], 3);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++) cr_assert_eq(get2(&tr, j, i), get2(&t, i, j));
  vqc_tensor_set(&tr, (int64_t[]){2, 1}, -7); /* = t[1][2] */
  cr_assert_eq(get2(&t, 1, 2), -7);
  vqc_tensor_set(&t, (int64_t[]){0, 1}, 55);
  cr_assert_eq(get2(&tr, 1, 0), 55);
  vqc_tensor_free(&t);
  cr_assert_eq(refs(&tr), 1); /* the view alone keeps the storage */
  cr_assert_eq(get2(&tr, 2, 1), -7);
  vqc_tensor_free(&tr);
}

Test(tensor, slice_shares_storage_and_sees_writes) {
  vqc_tensor t, s;
  make2(&t, VQC_F64, 4, 6);
  fill2(&t);
  /* rows 1 and 3, columns 1, 3, 5 */
  vqc_tensor rows;
  cr_assert_eq(vqc_tensor_slice(&t, 0, 1, 4, 2, &rows), VQC_OK);
  cr_assert_eq(vqc_tensor_slice(&rows, 1, 1, 6, 2, &s), VQC_OK);
  cr_assert_eq(s.shape[0], 2);
  cr_assert_eq(s.shape[1], 3);
  cr_assert_eq(s.strides[0], 12);
  cr_assert_eq(s.strides[1], 2);
  cr_assert_eq(s.offset, 7);
  cr_assert(vqc_tensor_same_storage(&t, &s));
  cr_assert_eq(refs(&t), 3);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++)
      cr_assert_eq(get2(&s, i, j), 10 * (1 + 2 * i) + (1 + 2 * j));
  vqc_tensor_set(&s, (int64_t[]){1, 2}, -1); /* t[3][5] */
  cr_assert_eq(get2(&t, 3, 5), -1);
  /* an empty slice is allowed and names no element */
  vqc_tensor e;
  cr_assert_eq(vqc_tensor_slice(&t, 1, 6, 6, 1, &e), VQC_OK);
  cr_assert_eq(vqc_tensor_numel(&e), 0);
  /* step larger than the range */
  vqc_tensor one;
  cr_assert_eq(vqc_tensor_slice(&t, 1, 2, 4, 5, &one), VQC_OK);
  cr_assert_eq(one.shape[1], 1);
  cr_assert_eq(get2(&one, 0, 0), 2);
  vqc_tensor_free(&one);
  vqc_tensor_free(&e);
  vqc_tensor_free(&rows);
  vqc_tensor_free(&s);
  vqc_tensor_free(&t);
}

Test(tensor, view_alias) {
  vqc_tensor t, v;
  make2(&t, VQC_U8, 2, 2);
  fill2(&t);
  cr_assert_eq(vqc_tensor_view(&t, &v), VQC_OK);
  cr_assert(vqc_tensor_same_storage(&t, &v));
  cr_assert_eq(refs(&t), 2);
  vqc_tensor_set(&v, (int64_t[]){1, 1}, 200);
  cr_assert_eq(get2(&t, 1, 1), 200);
  vqc_tensor_free(&v);
  cr_assert_eq(refs(&t), 1);
  vqc_tensor_free(&t);
}

Test(tensor, reshape_contiguous_views) {
  vqc_tensor t;
  make2(&t, VQC_I64, 2, 6);
  fill2(&t);
  vqc_tensor a, b, c;
  cr_assert_eq(vqc_tensor_reshape(&t, 3, (int64_t[]){3, -1, 2}, &a), VQC_OK);
  cr_assert_eq(a.shape[1], 2);
  cr_assert_eq(a.strides[0], 4);
  cr_assert_eq(a.strides[1], 2);
  cr_assert_eq(a.strides[2], 1);
  cr_assert(vqc_tensor_same_storage(&t, &a));
  /* a[2][0][1] is flat element 9 = t[1][3] */
  cr_assert_eq(vqc_tensor_get(&a, (int64_t[]){2, 0, 1}), 13);
  vqc_tensor_set(&a, (int64_t[]){0, 1, 1}, -3); /* flat 3 = t[0][3] */
  cr_assert_eq(get2(&t, 0, 3), -3);
  cr_assert_eq(vqc_tensor_reshape(&t, 1, (int64_t[]){12}, &b), VQC_OK);
  cr_assert_eq(vqc_tensor_get(&b, (int64_t[]){11}), 15);
  cr_assert_eq(vqc_tensor_reshape(&b, 4, (int64_t[]){1, 12, 1, 1}, &c), VQC_OK);
  cr_assert(vqc_tensor_is_contiguous(&c));
  cr_assert_eq(vqc_tensor_get(&c, (int64_t[]){0, 7, 0, 0}), 11);
  cr_assert_eq(refs(&t), 4);
  vqc_tensor_free(&a);
  vqc_tensor_free(&b);
  vqc_tensor_free(&c);
  vqc_tensor_free(&t);
}

Test(tensor, reshape_strided_views_when_strides_allow) {
  vqc_tensor t, rows, split, tr, tr3;
  make2(&t, VQC_F32, 4, 6);
  fill2(&t);
  /* every other row: shape (2, 6), strides (12, 1); splitting the last dim
   * needs no copy */
  cr_assert_eq(vqc_tensor_slice(&t, 0, 0, 4, 2, &rows), VQC_OK);
  cr_assert_eq(vqc_tensor_reshape(&rows, 3, (int64_t[]){2, 2, 3}, &split),
               VQC_OK);
  cr_assert_eq(split.strides[0], 12);
  cr_assert_eq(split.strides[1], 3);
  cr_assert_eq(split.strides[2], 1);
  cr_assert_eq(vqc_tensor_get(&split, (int64_t[]){1, 1, 2}), 25); /* t[2][5] */
  /* a transpose only gains or loses size-1 dims */
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &tr), VQC_OK);
  cr_assert_eq(vqc_tensor_reshape(&tr, 3, (int64_t[]){6, 1, 4}, &tr3), VQC_OK);
  cr_assert(vqc_tensor_same_storage(&t, &tr3));
  for (int64_t i = 0; i < 6; i++)
    for (int64_t j = 0; j < 4; j++)
      cr_assert_eq(vqc_tensor_get(&tr3, (int64_t[]){i, 0, j}), 10 * j + i);
  vqc_tensor_set(&tr3, (int64_t[]){5, 0, 3}, -9);
  cr_assert_eq(get2(&t, 3, 5), -9);
  vqc_tensor_free(&tr3);
  vqc_tensor_free(&tr);
  vqc_tensor_free(&split);
  vqc_tensor_free(&rows);
  vqc_tensor_free(&t);
}

Test(tensor, reshape_non_viewable_fails_with_eshape) {
  vqc_tensor t, tr, rows, out;
  make2(&t, VQC_F32, 2, 3);
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &tr), VQC_OK);
  vqc_clear_error();
  cr_assert_eq(vqc_tensor_reshape(&tr, 1, (int64_t[]){6}, &out), VQC_ESHAPE);
  cr_assert(strstr(vqc_last_error(), "vqc_tensor_contiguous") != NULL, "%s",
            vqc_last_error());
  cr_assert_null(out.storage); /* out is zeroed on failure */
  cr_assert_eq(refs(&t), 2);   /* and holds no reference */
  /* (3, 2) transposed -> (2, 3) keeps the element count but not the order */
  cr_assert_eq(vqc_tensor_reshape(&tr, 2, (int64_t[]){2, 3}, &out), VQC_ESHAPE);
  /* every other row of (4, 6): (2, 6) strides (12, 1) cannot be flattened */
  vqc_tensor big;
  make2(&big, VQC_F32, 4, 6);
  cr_assert_eq(vqc_tensor_slice(&big, 0, 0, 4, 2, &rows), VQC_OK);
  cr_assert_eq(vqc_tensor_reshape(&rows, 1, (int64_t[]){12}, &out), VQC_ESHAPE);
  cr_assert_eq(vqc_tensor_reshape(&rows, 2, (int64_t[]){4, 3}, &out), VQC_ESHAPE);
  /* element count and -1 errors */
  cr_assert_eq(vqc_tensor_reshape(&t, 1, (int64_t[]){7}, &out), VQC_ESHAPE);
  cr_assert(strstr(vqc_last_error(), "6 elements") != NULL, "%s",
            vqc_last_error());
  cr_assert_eq(vqc_tensor_reshape(&t, 2, (int64_t[]){-1, -1}, &out), VQC_ESHAPE);
  cr_assert_eq(vqc_tensor_reshape(&t, 2, (int64_t[]){-1, 4}, &out), VQC_ESHAPE);
  cr_assert_eq(vqc_tensor_reshape(&t, 2, (int64_t[]){-2, -3}, &out), VQC_ESHAPE);
  cr_assert_eq(vqc_tensor_reshape(&t, 5, (int64_t[]){1, 1, 1, 2, 3}, &out),
               VQC_EINVAL);
  vqc_tensor_free(&rows);
  vqc_tensor_free(&big);
  vqc_tensor_free(&tr);
  vqc_tensor_free(&t);
}

/* ---- copies and the origin link */

Test(tensor, contiguous_of_contiguous_is_a_view) {
  vqc_tensor t, c;
  make2(&t, VQC_F32, 2, 3);
  fill2(&t);
  cr_assert_eq(vqc_tensor_contiguous(&t, &c), VQC_OK);
  cr_assert(vqc_tensor_same_storage(&t, &c));
  cr_assert(!vqc_tensor_has_origin(&c));
  cr_assert_eq(refs(&t), 2);
  vqc_tensor o;
  cr_assert_eq(vqc_tensor_origin_view(&c, VQC_F32, &o), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_copy_to_origin(&c), VQC_EINVAL);
  vqc_tensor_free(&c);
  vqc_tensor_free(&t);
}

Test(tensor, contiguous_of_transpose_copies_and_links_origin) {
  for (int k = 0; k < VQC_DTYPE_COUNT; k++) {
    vqc_dtype dt = (vqc_dtype)k;
    vqc_tensor t, tr, c;
    make2(&t, dt, 3, 4);
    fill2(&t);
    cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &tr), VQC_OK);
    cr_assert_eq(vqc_tensor_contiguous(&tr, &c), VQC_OK);
    cr_assert(!vqc_tensor_same_storage(&c, &t));
    cr_assert(vqc_tensor_is_contiguous(&c));
    cr_assert_eq(c.shape[0], 4);
    cr_assert_eq(c.shape[1], 3);
    cr_assert_eq(c.dtype, dt);
    cr_assert_eq(refs(&c), 1);
    cr_assert_eq(refs(&t), 3); /* t, tr and the copy's origin */
    /* the bytes of the copy are the transpose, row-major */
    for (int64_t i = 0; i < 4; i++)
      for (int64_t j = 0; j < 3; j++) {
        cr_assert_eq(get2(&c, i, j), 10 * j + i, "%s", vqc_dtype_name(dt));
        int64_t flat[1] = {i * 3 + j};
        vqc_tensor flat_view;
        cr_assert_eq(vqc_tensor_reshape(&c, 1, (int64_t[]){12}, &flat_view),
                     VQC_OK);
        cr_assert_eq(vqc_tensor_get(&flat_view, flat), 10 * j + i);
        vqc_tensor_free(&flat_view);
      }
    cr_assert(vqc_tensor_has_origin(&c));
    cr_assert_eq(c.origin.storage, t.storage);
    cr_assert_eq(c.origin.offset, tr.offset);
    cr_assert_eq(c.origin.ndim, 2);
    cr_assert_eq(c.origin.shape[0], 4);
    cr_assert_eq(c.origin.strides[0], 1);
    cr_assert_eq(c.origin.strides[1], 4);

    /* a write to the copy does not reach the source until copied back */
    vqc_tensor_set(&c, (int64_t[]){3, 2}, 99); /* tr[3][2] = t[2][3] */
    cr_assert_eq(get2(&t, 2, 3), 23);
    cr_assert_eq(vqc_tensor_copy_to_origin(&c), VQC_OK);
    cr_assert_eq(get2(&t, 2, 3), 99);
    cr_assert_eq(get2(&t, 1, 2), 12); /* the rest unchanged */

    vqc_tensor o;
    cr_assert_eq(vqc_tensor_origin_view(&c, dt, &o), VQC_OK);
    cr_assert(vqc_tensor_same_storage(&o, &t));
    cr_assert_eq(refs(&t), 4);
    for (int64_t i = 0; i < 4; i++)
      for (int64_t j = 0; j < 3; j++) cr_assert_eq(get2(&o, i, j), get2(&tr, i, j));
    vqc_tensor wrong;
    vqc_dtype other = dt == VQC_F32 ? VQC_F64 : VQC_F32;
    cr_assert_eq(vqc_tensor_origin_view(&c, other, &wrong), VQC_EDTYPE);

    vqc_tensor_free(&o);
    vqc_tensor_free(&c);
    cr_assert_eq(refs(&t), 2); /* the copy dropped its origin reference */
    vqc_tensor_free(&tr);
    vqc_tensor_free(&t);
  }
}

/* Freeing the source (every view of it) before the copy must keep the origin
 * valid: under ASan, a use after free here fails the test. */
Test(tensor, origin_outlives_its_source) {
  vqc_tensor t, tr, c, o;
  make2(&t, VQC_F64, 2, 3);
  fill2(&t);
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &tr), VQC_OK);
  cr_assert_eq(vqc_tensor_contiguous(&tr, &c), VQC_OK);
  vqc_storage *src = t.storage;
  vqc_tensor_free(&t);
  vqc_tensor_free(&tr);
  cr_assert_eq(__atomic_load_n(&src->refs, __ATOMIC_SEQ_CST), 1);
  cr_assert_eq(vqc_tensor_origin_view(&c, VQC_F64, &o), VQC_OK);
  cr_assert_eq(o.storage, src);
  cr_assert_eq(get2(&o, 2, 1), 12);
  vqc_tensor_set(&c, (int64_t[]){0, 1}, -4);
  cr_assert_eq(vqc_tensor_copy_to_origin(&c), VQC_OK);
  cr_assert_eq(get2(&o, 0, 1), -4);
  vqc_tensor_free(&c); /* the origin view now holds the last reference */
  cr_assert_eq(get2(&o, 0, 1), -4);
  vqc_tensor_free(&o);
}

Test(tensor, copy_strided_every_dtype) {
  for (int k = 0; k < VQC_DTYPE_COUNT; k++) {
    vqc_dtype dt = (vqc_dtype)k;
    vqc_tensor src, dst, dst_t;
    make2(&src, dt, 3, 2);
    fill2(&src);
    int64_t shape[2] = {2, 3};
    cr_assert_eq(vqc_tensor_zeros(&dst, dt, 2, shape, VQC_DEVICE_CPU), VQC_OK);
    /* write into a strided destination: dst^T has shape (3, 2) */
    cr_assert_eq(vqc_tensor_transpose(&dst, 0, 1, &dst_t), VQC_OK);
    cr_assert_eq(vqc_tensor_copy(&dst_t, &src), VQC_OK);
    for (int64_t i = 0; i < 2; i++)
      for (int64_t j = 0; j < 3; j++) cr_assert_eq(get2(&dst, i, j), 10 * j + i);
    /* to(): a contiguous copy without origin, even from a strided view */
    vqc_tensor moved;
    cr_assert_eq(vqc_tensor_to(&dst_t, VQC_DEVICE_CPU, &moved), VQC_OK);
    cr_assert(vqc_tensor_is_contiguous(&moved));
    cr_assert(!vqc_tensor_has_origin(&moved));
    cr_assert(!vqc_tensor_same_storage(&moved, &dst));
    for (int64_t i = 0; i < 3; i++)
      for (int64_t j = 0; j < 2; j++) cr_assert_eq(get2(&moved, i, j), 10 * i + j);
    vqc_tensor_free(&moved);
    vqc_tensor_free(&dst_t);
    vqc_tensor_free(&dst);
    vqc_tensor_free(&src);
  }
}

Test(tensor, copy_4d_with_mixed_strides) {
  /* (2, 3, 2, 2) source permuted twice so neither side is contiguous */
  int64_t shape[4] = {2, 3, 2, 2};
  vqc_tensor a, b, at, bt;
  cr_assert_eq(vqc_tensor_empty(&a, VQC_I32, 4, shape, VQC_DEVICE_CPU), VQC_OK);
  int32_t *pa = a.storage->data;
  for (int i = 0; i < 24; i++) pa[i] = i;
  int64_t shape_b[4] = {2, 2, 2, 3};
  cr_assert_eq(vqc_tensor_zeros(&b, VQC_I32, 4, shape_b, VQC_DEVICE_CPU), VQC_OK);
  cr_assert_eq(vqc_tensor_transpose(&a, 1, 3, &at), VQC_OK); /* (2,2,2,3) */
  cr_assert_eq(vqc_tensor_copy(&b, &at), VQC_OK);
  int32_t *pb = b.storage->data;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 2; k++)
        for (int l = 0; l < 3; l++)
          cr_assert_eq(pb[((i * 2 + j) * 2 + k) * 3 + l],
                       pa[((i * 3 + l) * 2 + k) * 2 + j]);
  /* and back through strided destination: a^T <- b, a unchanged */
  cr_assert_eq(vqc_tensor_transpose(&b, 1, 3, &bt), VQC_OK);
  cr_assert_eq(vqc_tensor_copy(&a, &bt), VQC_OK);
  for (int i = 0; i < 24; i++) cr_assert_eq(pa[i], i);
  vqc_tensor_free(&bt);
  vqc_tensor_free(&at);
  vqc_tensor_free(&b);
  vqc_tensor_free(&a);
}

/* ---- borrowed memory */

Test(tensor, wrap_does_not_free_caller_memory) {
  /* Stack memory: a free() of it by the library would crash (and ASan names
   * it), so reaching the end proves the library left it alone. */
  float data[6] = {0, 1, 2, 3, 4, 5};
  vqc_tensor t, v;
  cr_assert_eq(vqc_tensor_wrap(&t, data, VQC_F32, 2, (int64_t[]){2, 3}), VQC_OK);
  cr_assert(!t.storage->owned);
  cr_assert_eq(t.storage->nbytes, sizeof data);
  cr_assert_eq(vqc_tensor_data(&t), (void *)data);
  cr_assert_eq(get2(&t, 1, 2), 5);
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &v), VQC_OK);
  vqc_tensor_set(&v, (int64_t[]){1, 0}, 42); /* t[0][1] = data[1] */
  cr_assert_eq(data[1], 42.0f);
  vqc_tensor_free(&t);
  vqc_tensor_free(&v);
  data[5] = 7; /* still the caller's */
  cr_assert_eq(data[5], 7.0f);

  cr_assert_eq(vqc_tensor_wrap(&t, NULL, VQC_F32, 1, (int64_t[]){4}), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_wrap(&t, NULL, VQC_F32, 1, (int64_t[]){0}), VQC_OK);
  vqc_tensor_free(&t);
}

/* ---- element conversion */

Test(tensor, set_converts_through_double) {
  vqc_tensor u8, i32, i64, f32;
  int64_t one[1] = {1}, at[1] = {0};
  cr_assert_eq(vqc_tensor_zeros(&u8, VQC_U8, 1, one, VQC_DEVICE_CPU), VQC_OK);
  cr_assert_eq(vqc_tensor_zeros(&i32, VQC_I32, 1, one, VQC_DEVICE_CPU), VQC_OK);
  cr_assert_eq(vqc_tensor_zeros(&i64, VQC_I64, 1, one, VQC_DEVICE_CPU), VQC_OK);
  cr_assert_eq(vqc_tensor_zeros(&f32, VQC_F32, 1, one, VQC_DEVICE_CPU), VQC_OK);
  vqc_tensor_set(&u8, at, 300);
  cr_assert_eq(vqc_tensor_get(&u8, at), 255);
  vqc_tensor_set(&u8, at, -3);
  cr_assert_eq(vqc_tensor_get(&u8, at), 0);
  vqc_tensor_set(&i32, at, -2.7);
  cr_assert_eq(vqc_tensor_get(&i32, at), -2); /* toward zero */
  vqc_tensor_set(&i32, at, 1e12);
  cr_assert_eq(vqc_tensor_get(&i32, at), INT32_MAX);
  vqc_tensor_set(&i32, at, NAN);
  cr_assert_eq(vqc_tensor_get(&i32, at), 0);
  vqc_tensor_set(&i64, at, -1e30);
  cr_assert_eq(((int64_t *)i64.storage->data)[0], INT64_MIN);
  vqc_tensor_set(&i64, at, 9007199254740993.0); /* rounds to 2^53 as a double */
  cr_assert_eq(((int64_t *)i64.storage->data)[0], 9007199254740992LL);
  vqc_tensor_set(&f32, at, 0.1);
  cr_assert_eq(vqc_tensor_get(&f32, at), (double)0.1f);
  vqc_tensor_free(&u8);
  vqc_tensor_free(&i32);
  vqc_tensor_free(&i64);
  vqc_tensor_free(&f32);
}

/* ---- argument checking */

Test(tensor, creation_errors) {
  vqc_tensor t;
  int64_t shape[5] = {1, 2, 3, 4, 5};
  cr_assert_eq(vqc_tensor_empty(NULL, VQC_F32, 1, shape, VQC_DEVICE_CPU), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_empty(&t, VQC_F32, 5, shape, VQC_DEVICE_CPU), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "ndim 5") != NULL, "%s", vqc_last_error());
  cr_assert_null(t.storage);
  cr_assert_eq(vqc_tensor_empty(&t, VQC_F32, -1, shape, VQC_DEVICE_CPU), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_empty(&t, VQC_F32, 2, NULL, VQC_DEVICE_CPU), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "shape is NULL") != NULL, "%s",
            vqc_last_error());
  cr_assert_eq(vqc_tensor_zeros(&t, VQC_F32, 2, (int64_t[]){3, -1}, VQC_DEVICE_CPU),
               VQC_ESHAPE);
  cr_assert(strstr(vqc_last_error(), "dim 1 has negative size -1") != NULL, "%s",
            vqc_last_error());
  cr_assert_eq(vqc_tensor_empty(&t, (vqc_dtype)17, 1, shape, VQC_DEVICE_CPU),
               VQC_EDTYPE);
  cr_assert_eq(vqc_tensor_empty(&t, VQC_F32, 1, shape, (vqc_device)5), VQC_EINVAL);
  int64_t huge[2] = {INT64_MAX / 2, 4};
  cr_assert_eq(vqc_tensor_empty(&t, VQC_F64, 2, huge, VQC_DEVICE_CPU), VQC_ESHAPE);
  cr_assert_null(t.storage);
}

Test(tensor, view_and_copy_errors) {
  vqc_tensor t, out, freed;
  make2(&t, VQC_F32, 2, 3);
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 2, &out), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "out of range") != NULL, "%s",
            vqc_last_error());
  cr_assert_eq(vqc_tensor_transpose(&t, -1, 0, &out), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &t), VQC_EINVAL); /* out == t */
  cr_assert_eq(refs(&t), 1);
  cr_assert_eq(vqc_tensor_transpose(NULL, 0, 1, &out), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, NULL), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_slice(&t, 1, 0, 3, 0, &out), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "step 0") != NULL, "%s", vqc_last_error());
  cr_assert_eq(vqc_tensor_slice(&t, 1, 2, 1, 1, &out), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_slice(&t, 1, 0, 4, 1, &out), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_slice(&t, 1, -1, 2, 1, &out), VQC_EINVAL);
  cr_assert_eq(vqc_tensor_slice(&t, 2, 0, 1, 1, &out), VQC_EINVAL);
  cr_assert_eq(refs(&t), 1); /* no failed call kept a reference */

  /* a freed tensor is rejected, not dereferenced */
  make2(&freed, VQC_F32, 2, 3);
  vqc_tensor_free(&freed);
  cr_assert_eq(vqc_tensor_view(&freed, &out), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "empty tensor") != NULL, "%s",
            vqc_last_error());
  cr_assert_eq(vqc_tensor_contiguous(&freed, &out), VQC_EINVAL);

  /* copies need the same dtype and shape */
  vqc_tensor d64, d23;
  make2(&d64, VQC_F64, 2, 3);
  make2(&d23, VQC_F32, 3, 2);
  cr_assert_eq(vqc_tensor_copy(&d64, &t), VQC_EDTYPE);
  cr_assert(strstr(vqc_last_error(), "float64") != NULL, "%s", vqc_last_error());
  cr_assert_eq(vqc_tensor_copy(&d23, &t), VQC_ESHAPE);
  cr_assert(strstr(vqc_last_error(), "(3, 2)") != NULL, "%s", vqc_last_error());
  cr_assert_eq(vqc_tensor_copy(NULL, &t), VQC_EINVAL);

  /* a hand-built view reaching past its storage is refused */
  vqc_tensor bad = t;
  bad.shape[1] = 4;
  cr_assert_eq(vqc_tensor_copy(&bad, &bad), VQC_ESHAPE);
  cr_assert(strstr(vqc_last_error(), "outside its storage") != NULL, "%s",
            vqc_last_error());
  bad = t;
  bad.offset = 1;
  cr_assert_eq(vqc_tensor_view(&bad, &out), VQC_ESHAPE);

  /* element access: NaN and a message, nothing written */
  vqc_clear_error();
  cr_assert(isnan(vqc_tensor_get(&t, (int64_t[]){2, 0})));
  cr_assert(strstr(vqc_last_error(), "index 2 out of range for dim 0") != NULL,
            "%s", vqc_last_error());
  cr_assert(isnan(vqc_tensor_get(&t, NULL)));
  cr_assert(isnan(vqc_tensor_get(NULL, (int64_t[]){0, 0})));
  vqc_tensor_set(&t, (int64_t[]){0, 0}, 1);
  vqc_tensor_set(&t, (int64_t[]){0, -1}, 5);
  cr_assert_eq(get2(&t, 0, 0), 1);

  vqc_tensor_free(&d64);
  vqc_tensor_free(&d23);
  vqc_tensor_free(&t);
}

/* ---- concurrency of ids and reference counts */

enum { THREADS = 4, PER_THREAD = 500 };

typedef struct {
  const vqc_tensor *shared;
  uint64_t ids[PER_THREAD];
} worker_arg;

static void *worker(void *p) {
  worker_arg *w = p;
  int64_t shape[1] = {1};
  for (int i = 0; i < PER_THREAD; i++) {
    vqc_tensor t, v;
    if (vqc_tensor_empty(&t, VQC_U8, 1, shape, VQC_DEVICE_CPU) != VQC_OK) break;
    w->ids[i] = t.storage->id;
    vqc_tensor_free(&t);
    if (vqc_tensor_view(w->shared, &v) == VQC_OK) vqc_tensor_free(&v);
  }
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

Test(tensor, ids_unique_and_refcounts_atomic_across_threads) {
  vqc_tensor shared;
  make2(&shared, VQC_F32, 1, 1);
  static worker_arg args[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i].shared = &shared;
    cr_assert_eq(pthread_create(&th[i], NULL, worker, &args[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  cr_assert_eq(refs(&shared), 1); /* every view's +1 matched by its -1 */
  static uint64_t all[THREADS * PER_THREAD];
  for (int i = 0; i < THREADS; i++)
    memcpy(all + i * PER_THREAD, args[i].ids, sizeof args[i].ids);
  qsort(all, THREADS * PER_THREAD, sizeof all[0], cmp_u64);
  cr_assert_neq(all[0], 0);
  for (int i = 1; i < THREADS * PER_THREAD; i++)
    cr_assert_neq(all[i], all[i - 1], "storage id %llu issued twice",
                  (unsigned long long)all[i]);
  vqc_tensor_free(&shared);
}

/* ---- device storage */

Test(tensor, device_storage) {
  int64_t shape[2] = {3, 4};
  vqc_tensor d;
  if (!vqc_cuda_available()) {
    /* No GPU (or a build without CUDA): every device request says so. */
    vqc_clear_error();
    cr_assert_eq(vqc_tensor_empty(&d, VQC_F32, 2, shape, VQC_DEVICE_CUDA),
                 VQC_ENODEVICE);
    cr_assert_null(d.storage);
    cr_assert(strlen(vqc_last_error()) > 0);
    cr_assert_eq(vqc_tensor_zeros(&d, VQC_F32, 2, shape, VQC_DEVICE_CUDA),
                 VQC_ENODEVICE);
    vqc_tensor h;
    make2(&h, VQC_F32, 3, 4);
    cr_assert_eq(vqc_tensor_to(&h, VQC_DEVICE_CUDA, &d), VQC_ENODEVICE);
    cr_assert_null(d.storage);
    cr_assert_eq(refs(&h), 1);
    vqc_tensor_free(&h);
    return;
  }
  /* A GPU: host -> device -> host round trips, strided on either side. */
  vqc_tensor h, ht, back, dz, dc, hc;
  make2(&h, VQC_F32, 3, 4);
  fill2(&h);
  cr_assert_eq(vqc_tensor_to(&h, VQC_DEVICE_CUDA, &d), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(d.storage->device, VQC_DEVICE_CUDA);
  cr_assert_eq(vqc_tensor_to(&d, VQC_DEVICE_CPU, &back), VQC_OK);
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 4; j++) cr_assert_eq(get2(&back, i, j), 10 * i + j);
  /* a strided host view goes up contiguous */
  vqc_tensor_free(&back);
  cr_assert_eq(vqc_tensor_transpose(&h, 0, 1, &ht), VQC_OK);
  vqc_tensor dt;
  cr_assert_eq(vqc_tensor_to(&ht, VQC_DEVICE_CUDA, &dt), VQC_OK);
  cr_assert_eq(vqc_tensor_to(&dt, VQC_DEVICE_CPU, &back), VQC_OK);
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 3; j++) cr_assert_eq(get2(&back, i, j), 10 * j + i);
  vqc_tensor_free(&back);
  /* contiguous() of a strided device view copies on the device */
  vqc_tensor dtr;
  cr_assert_eq(vqc_tensor_transpose(&d, 0, 1, &dtr), VQC_OK);
  cr_assert_eq(vqc_tensor_contiguous(&dtr, &dc), VQC_OK);
  cr_assert_eq(dc.storage->device, VQC_DEVICE_CUDA);
  cr_assert(vqc_tensor_has_origin(&dc));
  cr_assert_eq(vqc_tensor_to(&dc, VQC_DEVICE_CPU, &hc), VQC_OK);
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 3; j++) cr_assert_eq(get2(&hc, i, j), 10 * j + i);
  cr_assert(isnan(get2(&d, 0, 0))); /* no element access on the device */
  cr_assert_eq(vqc_tensor_zeros(&dz, VQC_F32, 2, shape, VQC_DEVICE_CUDA), VQC_OK);
  vqc_tensor_free(&back);
  cr_assert_eq(vqc_tensor_to(&dz, VQC_DEVICE_CPU, &back), VQC_OK);
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 4; j++) cr_assert_eq(get2(&back, i, j), 0);
  vqc_tensor_free(&back);
  vqc_tensor_free(&hc);
  vqc_tensor_free(&dc);
  vqc_tensor_free(&dtr);
  vqc_tensor_free(&dz);
  vqc_tensor_free(&dt);
  vqc_tensor_free(&ht);
  vqc_tensor_free(&d);
  vqc_tensor_free(&h);
}
