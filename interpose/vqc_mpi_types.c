/* vqc_mpi_types.c: what a ledger line says of an MPI datatype (its digest
 * name, the basic elements of one item, a readable form of a derived
 * type) and of a reduction. */
#include "vqc_mpi_internal.h"

/* ---- datatypes */

basic basics[NBASICS];
int nbasics;
unsigned char basic_slots[BASIC_SLOTS];

static void add_basic(MPI_Datatype h, const char *dtype, const char *name) {
  if (h == MPI_DATATYPE_NULL || nbasics >= (int)(sizeof basics /
                                                 sizeof basics[0]))
    return;
  basic b = {.h = h, .dtype = dtype, .name = name};
  /* A basic type's extents never change: asked once here, not twice per
   * collective by the buffer checks (span). */
  b.extents = PMPI_Type_get_extent(h, &b.lb, &b.extent) == MPI_SUCCESS &&
              PMPI_Type_get_true_extent(h, &b.true_lb, &b.true_extent) ==
                  MPI_SUCCESS;
  /* Some handles name one type twice (MPI_LONG_LONG and
   * MPI_LONG_LONG_INT): the first entry answers. */
  unsigned i = basic_slot(h);
  while (basic_slots[i] != 0) {
    if (basics[basic_slots[i] - 1].h == h) return;
    i = (i + 1) & (BASIC_SLOTS - 1);
  }
  basics[nbasics++] = b;
  basic_slots[i] = (unsigned char)nbasics;
}

/* A Fortran type's digest name, from its size in this build (the Fortran
 * compiler's: -fdefault-integer-8 makes MPI_INTEGER 8 bytes): kind 'i'
 * integer, 'f' real, 'c' complex; "" when MPI gives it no size (a kind
 * the compiler lacks). */
static const char *fortran_dtype(MPI_Datatype h, char kind) {
  int size = 0;
  if (h == MPI_DATATYPE_NULL || PMPI_Type_size(h, &size) != MPI_SUCCESS)
    return "";
  switch (kind) {
  case 'i':
    return size == 1 ? "int8" : size == 2 ? "int16" : size == 4 ? "int32"
           : size == 8 ? "int64" : "";
  case 'f':
    return size == 2 ? "float16" : size == 4 ? "float32"
           : size == 8 ? "float64" : "";
  default:
    return size == 8 ? "complex64" : size == 16 ? "complex128" : "";
  }
}

/* The Fortran basic types (a Fortran program's calls reach the wrappers
 * through vqc_mpi_fortran.c with these handles). */
static void fortran_basics(void) {
#define F(h, kind) add_basic(h, fortran_dtype(h, kind), #h)
  F(MPI_INTEGER, 'i');
  F(MPI_REAL, 'f');
  F(MPI_DOUBLE_PRECISION, 'f');
  F(MPI_COMPLEX, 'c');
  F(MPI_DOUBLE_COMPLEX, 'c');
  F(MPI_INTEGER1, 'i');
  F(MPI_INTEGER2, 'i');
  F(MPI_INTEGER4, 'i');
  F(MPI_INTEGER8, 'i');
  F(MPI_REAL4, 'f');
  F(MPI_REAL8, 'f');
  F(MPI_COMPLEX8, 'c');
  F(MPI_COMPLEX16, 'c');
#undef F
  /* No digest name: compared by "mpi_type" only in the report. */
  add_basic(MPI_LOGICAL, "", "MPI_LOGICAL");
  add_basic(MPI_CHARACTER, "", "MPI_CHARACTER");
  add_basic(MPI_2INTEGER, "", "MPI_2INTEGER");
  add_basic(MPI_2REAL, "", "MPI_2REAL");
  add_basic(MPI_2DOUBLE_PRECISION, "", "MPI_2DOUBLE_PRECISION");
}

void init_basics(void) {
#define B(h, d) add_basic(h, d, #h)
  B(MPI_DOUBLE, "float64");
  B(MPI_FLOAT, "float32");
  B(MPI_INT, "int32");
  B(MPI_LONG, sizeof(long) == 8 ? "int64" : "int32");
  B(MPI_LONG_LONG, "int64");
  B(MPI_CHAR, "int8");
  B(MPI_BYTE, "uint8");
  B(MPI_UNSIGNED_CHAR, "uint8");
  B(MPI_SIGNED_CHAR, "int8");
  B(MPI_SHORT, "int16");
  B(MPI_UNSIGNED_SHORT, "uint16");
  B(MPI_UNSIGNED, "uint32");
  B(MPI_UNSIGNED_LONG, sizeof(long) == 8 ? "uint64" : "uint32");
  B(MPI_UNSIGNED_LONG_LONG, "uint64");
  B(MPI_INT8_T, "int8");
  B(MPI_INT16_T, "int16");
  B(MPI_INT32_T, "int32");
  B(MPI_INT64_T, "int64");
  B(MPI_UINT8_T, "uint8");
  B(MPI_UINT16_T, "uint16");
  B(MPI_UINT32_T, "uint32");
  B(MPI_UINT64_T, "uint64");
  B(MPI_C_BOOL, "bool");
  B(MPI_C_FLOAT_COMPLEX, "complex64");
  B(MPI_C_DOUBLE_COMPLEX, "complex128");
  B(MPI_AINT, "int64");
  B(MPI_OFFSET, "int64");
  B(MPI_COUNT, "int64");
  /* No digest name: compared by "mpi_type" only in the report. */
  B(MPI_LONG_DOUBLE, "");
  B(MPI_WCHAR, "");
  B(MPI_FLOAT_INT, "");
  B(MPI_DOUBLE_INT, "");
  B(MPI_LONG_INT, "");
  B(MPI_2INT, "");
  B(MPI_SHORT_INT, "");
  B(MPI_LONG_DOUBLE_INT, "");
  B(MPI_PACKED, "");
#undef B
  fortran_basics();
}


static const char MIXED[] = "mixed";

static void note_leaf(const char **leaf, const char *name) {
  if (!*leaf) *leaf = name;
  else if (*leaf != MIXED && strcmp(*leaf, name) != 0) *leaf = MIXED;
}

static const char *combiner_name(int c) {
  switch (c) {
  case MPI_COMBINER_DUP: return "dup";
  case MPI_COMBINER_CONTIGUOUS: return "contiguous";
  case MPI_COMBINER_VECTOR: return "vector";
  case MPI_COMBINER_HVECTOR: return "hvector";
  case MPI_COMBINER_INDEXED: return "indexed";
  case MPI_COMBINER_HINDEXED: return "hindexed";
  case MPI_COMBINER_INDEXED_BLOCK: return "indexed_block";
  case MPI_COMBINER_HINDEXED_BLOCK: return "hindexed_block";
  case MPI_COMBINER_STRUCT: return "struct";
  case MPI_COMBINER_SUBARRAY: return "subarray";
  case MPI_COMBINER_DARRAY: return "darray";
  case MPI_COMBINER_RESIZED: return "resized";
  default: return "derived";
  }
}

/* The basic elements of one item of t (a type signature's length), the
 * basic type's MPI name in *leaf (MIXED for several; the digest name in
 * *dleaf likewise); -1 when it cannot be told. */
static long long decode(MPI_Datatype t, const char **leaf, const char **dleaf,
                        int depth) {
  int ni = 0, na = 0, nd = 0, comb = 0;
  if (depth > 16 ||
      PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
    return -1;
  if (comb == MPI_COMBINER_NAMED) {
    const basic *b = basic_of(t);
    note_leaf(leaf, b ? b->name : "MPI_?");
    note_leaf(dleaf, b ? b->dtype : "");
    return 1;
  }
  int *ints = malloc(sizeof *ints * (size_t)(ni + 1));
  MPI_Aint *addrs = malloc(sizeof *addrs * (size_t)(na + 1));
  MPI_Datatype *types = malloc(sizeof *types * (size_t)(nd + 1));
  long long n = -1;
  if (!ints || !addrs || !types ||
      PMPI_Type_get_contents(t, ni, na, nd, ints, addrs, types) !=
          MPI_SUCCESS) {
    free(ints);
    free(addrs);
    free(types);
    return -1;
  }
  long long child = nd > 0 && comb != MPI_COMBINER_STRUCT
                        ? decode(types[0], leaf, dleaf, depth + 1)
                        : 0;
  switch (comb) {
  case MPI_COMBINER_DUP:
  case MPI_COMBINER_RESIZED:
    n = child;
    break;
  case MPI_COMBINER_CONTIGUOUS:
    n = (long long)ints[0] * child;
    break;
  case MPI_COMBINER_VECTOR:
  case MPI_COMBINER_HVECTOR:
  case MPI_COMBINER_INDEXED_BLOCK:
  case MPI_COMBINER_HINDEXED_BLOCK:
    n = (long long)ints[0] * ints[1] * child;
    break;
  case MPI_COMBINER_INDEXED:
  case MPI_COMBINER_HINDEXED: {
    long long sum = 0;
    for (int i = 0; i < ints[0]; i++) sum += ints[1 + i];
    n = sum * child;
    break;
  }
  case MPI_COMBINER_STRUCT: {
    n = 0;
    for (int i = 0; i < ints[0] && n >= 0; i++) {
      const long long c = decode(types[i], leaf, dleaf, depth + 1);
      n = c < 0 ? -1 : n + (long long)ints[1 + i] * c;
    }
    break;
  }
  case MPI_COMBINER_SUBARRAY: {
    n = child;
    for (int i = 0; i < ints[0]; i++) n *= ints[1 + ints[0] + i];
    break;
  }
  default: { /* darray and the rest: by size */
    int st = 0, sc = 0;
    if (child > 0 && PMPI_Type_size(t, &st) == MPI_SUCCESS &&
        PMPI_Type_size(types[0], &sc) == MPI_SUCCESS && sc > 0)
      n = (long long)(st / sc) * child;
    break;
  }
  }
  if (child < 0) n = -1;
  for (int i = 0; i < nd; i++) {
    int a, b, c, k = 0;
    if (PMPI_Type_get_envelope(types[i], &a, &b, &c, &k) == MPI_SUCCESS &&
        k != MPI_COMBINER_NAMED)
      PMPI_Type_free(&types[i]);
  }
  free(ints);
  free(addrs);
  free(types);
  return n;
}

/* ---- derived types, decoded once
 *
 * Decoding a derived type (its envelope and contents down the tree, with
 * allocations, and a readable name) took 3.2 us per collective on the
 * project's VM: a loop of MPI_Bcast on one contiguous type cost that per
 * call, where a basic type costs 0.2 us. What it says is kept per handle
 * (KEPT_TYPES of them, the oldest replaced), until MPI_Type_free (a new
 * type may get the handle) or MPI_Type_set_name (the readable name
 * changes), both wrapped here. */
#define KEPT_TYPES 64

typedef struct kept_type {
  MPI_Datatype h;
  tinfo info;
} kept_type;

static kept_type kept[KEPT_TYPES];
static int nkept, kept_next;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

static bool kept_find(MPI_Datatype t, tinfo *out) {
  bool found = false;
  if (g.multi) pthread_mutex_lock(&kept_lock);
  for (int i = 0; i < nkept && !found; i++)
    if (kept[i].h == t) {
      *out = kept[i].info;
      found = true;
    }
  if (g.multi) pthread_mutex_unlock(&kept_lock);
  return found;
}

static void kept_add(MPI_Datatype t, const tinfo *info) {
  if (g.multi) pthread_mutex_lock(&kept_lock);
  bool there = false;
  for (int i = 0; i < nkept && !there; i++) there = kept[i].h == t;
  if (!there) {
    const int i = nkept < KEPT_TYPES ? nkept++ : kept_next++ % KEPT_TYPES;
    kept[i] = (kept_type){.h = t, .info = *info};
  }
  if (g.multi) pthread_mutex_unlock(&kept_lock);
}

static void kept_forget(MPI_Datatype t) {
  if (g.multi) pthread_mutex_lock(&kept_lock);
  for (int i = 0; i < nkept; i++)
    if (kept[i].h == t) kept[i].h = MPI_DATATYPE_NULL;
  if (g.multi) pthread_mutex_unlock(&kept_lock);
}

int MPI_Type_free(MPI_Datatype *t) {
  const MPI_Datatype h = t ? *t : MPI_DATATYPE_NULL;
  const int rc = PMPI_Type_free(t);
  if (h != MPI_DATATYPE_NULL) kept_forget(h);
  if (rc == MPI_SUCCESS && h != MPI_DATATYPE_NULL)
    obj_freed(OBJ_TYPE, OBJ_KEY(h)); /* vqc_mpi_leaks.c */
  return rc;
}

int MPI_Type_set_name(MPI_Datatype t, const char *name) {
  const int rc = PMPI_Type_set_name(t, name);
  kept_forget(t);
  return rc;
}

/* (type_info, vqc_mpi_internal.h, answers a named basic type itself) */
void type_info_full(MPI_Datatype t, tinfo *out) {
  out->dtype = "";
  out->elems = 0;
  out->extra[0] = '\0';
  if (t == MPI_DATATYPE_NULL) return;
  const basic *b = basic_of(t);
  if (b) {
    out->dtype = b->dtype;
    out->elems = 1;
    if (!b->dtype[0])
      snprintf(out->extra, sizeof out->extra, "\"mpi_type\":\"%s\",",
               b->name);
    return;
  }
  if (kept_find(t, out)) return;
  const char *leaf = NULL, *dleaf = NULL;
  long long n = decode(t, &leaf, &dleaf, 0);
  int ni, na, nd, comb = 0;
  PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb);
  char user[MPI_MAX_OBJECT_NAME + 1] = "", name[160], esc[200];
  int ln = 0;
  (void)PMPI_Type_get_name(t, user, &ln);
  if (n < 0) n = 0;
  snprintf(name, sizeof name, "%s%s%s of %lld %s%s", user, user[0] ? " (" : "",
           combiner_name(comb), n, leaf && leaf != MIXED ? leaf : "mixed",
           user[0] ? ")" : "");
  json_esc(esc, sizeof esc, name);
  snprintf(out->extra, sizeof out->extra, "\"mpi_type\":\"%.170s\",", esc);
  out->dtype = dleaf && dleaf != MIXED ? dleaf : "";
  out->elems = n;
  kept_add(t, out);
}

/* (vqc_mpi_internal.h) type_info_full's dtype: decoded once per type. */
const char *type_element(MPI_Datatype t) {
  tinfo info;
  type_info_full(t, &info);
  return info.dtype;
}

const char *redop_name(MPI_Op op) {
  if (op == MPI_SUM) return "sum";
  if (op == MPI_MAX) return "max";
  if (op == MPI_MIN) return "min";
  if (op == MPI_PROD) return "product";
  if (op == MPI_BAND) return "band";
  if (op == MPI_BOR) return "bor";
  if (op == MPI_BXOR) return "bxor";
  if (op == MPI_LAND) return "land";
  if (op == MPI_LOR) return "lor";
  if (op == MPI_LXOR) return "lxor";
  if (op == MPI_MAXLOC) return "maxloc";
  if (op == MPI_MINLOC) return "minloc";
  if (op == MPI_REPLACE) return "replace";
  if (op == MPI_NO_OP) return "no_op";
  return "user";
}
