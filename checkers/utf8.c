/* utf8.c: text from outside made valid UTF-8 for vqcheck's own output (see
 * utf8.h). Needs nothing but jansson, so the fuzz targets build it on its
 * own. */
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t vqc_utf8_char_len(const char *s, size_t n) {
  if (n == 0) return 0;
  const unsigned char *u = (const unsigned char *)s;
  const unsigned c = u[0];
  size_t len;
  uint32_t v;
  /* Lead bytes as jansson's utf.c takes them: 0xC0, 0xC1 would only start
   * an overlong form, 0xF5.. a code point past U+10FFFF. */
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    v = c & 0x07;
  } else {
    return 0;
  }
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((u[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (u[i] & 0x3F);
  }
  if ((len == 3 && v < 0x800) || (len == 4 && v < 0x10000)) return 0;
  if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  return len;
}

bool vqc_utf8_valid(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    const size_t l = vqc_utf8_char_len(s + i, n - i);
    if (l == 0 || s[i] == '\0') return false;
    i += l;
  }
  return true;
}

unsigned vqc_utf8_copy(char *out, size_t cap, const char *b, size_t n,
                       unsigned opts, size_t *len) {
  unsigned done = 0;
  size_t i = 0, k = 0;
  if (!b) n = 0;
  if (opts & VQC_UTF8_TAIL) {
    /* At most 3: the rest of one character; more is garbage (replaced). */
    while (i < n && i < 3 && ((unsigned char)b[i] & 0xC0) == 0x80) i++;
    if (i > 0) done |= VQC_UTF8_CUT;
  }
  while (i < n) {
    size_t l = vqc_utf8_char_len(b + i, n - i);
    const unsigned char c = (unsigned char)b[i];
    bool bad = l == 0 || c == 0 ||
               ((opts & VQC_UTF8_NO_CONTROLS) && l == 1 &&
                (c < 0x20 || c == 0x7F) && c != '\n' && c != '\t');
    if (bad) l = 1;
    if (k + l > cap - 1) { /* the next character does not fit */
      done |= VQC_UTF8_CUT;
      break;
    }
    if (bad) {
      out[k] = '?';
      done |= VQC_UTF8_REPLACED;
    } else {
      memmove(out + k, b + i, l); /* out may be b: k <= i */
    }
    k += l;
    i += l;
  }
  out[k] = '\0';
  if (len) *len = k;
  return done;
}

unsigned vqc_utf8_clean(char *s, unsigned opts) {
  const size_t n = strlen(s);
  return vqc_utf8_copy(s, n + 1, s, n, opts, NULL);
}

json_t *vqc_json_text_opts(const char *b, size_t n, unsigned opts,
                           unsigned *done) {
  if (!b) n = 0;
  const size_t note = (opts & VQC_UTF8_NOTE) ? strlen(VQC_UTF8_NOTE_TEXT) : 0;
  char *out = malloc(n + note + 1);
  if (!out) return json_string("?");
  size_t k = 0;
  const unsigned d = vqc_utf8_copy(out, n + 1, b, n, opts, &k);
  if ((d & VQC_UTF8_REPLACED) && note) {
    memcpy(out + k, VQC_UTF8_NOTE_TEXT, note + 1);
    k += note;
  }
  if (done) *done |= d;
  json_t *j = json_stringn(out, k);
  free(out);
  return j ? j : json_string("?");
}

json_t *vqc_json_text(const char *s, size_t n) {
  return vqc_json_text_opts(s, n, 0, NULL);
}

/* The value of the 4 hex digits at s[0..4), or -1. */
static long hex4(const char *s) {
  long v = 0;
  for (int i = 0; i < 4; i++) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

size_t vqc_json_mend_surrogates(char *b, size_t n) {
  size_t mended = 0;
  size_t i = 0;
  while (i + 1 < n) {
    if (b[i] != '\\') {
      i++;
      continue;
    }
    if (b[i + 1] != 'u' || i + 6 > n) {
      i += 2; /* \" \\ \n ...: the escaped byte is not an escape start */
      continue;
    }
    const long u = hex4(b + i + 2);
    const bool high = u >= 0xD800 && u <= 0xDBFF;
    const bool low = u >= 0xDC00 && u <= 0xDFFF;
    if (high && i + 12 <= n && b[i + 6] == '\\' && b[i + 7] == 'u') {
      const long v = hex4(b + i + 8);
      if (v >= 0xDC00 && v <= 0xDFFF) { /* a pair: one character */
        i += 12;
        continue;
      }
    }
    if (high || low) {
      memcpy(b + i + 2, "003f", 4);
      mended++;
    }
    i += 6;
  }
  return mended;
}

json_t *vqc_json_loadb_mended(const char *b, size_t n, size_t flags,
                              json_error_t *err, bool *mended) {
  if (mended) *mended = false;
  json_t *j = json_loadb(b, n, flags, err);
  if (j || !b) return j;
  char *copy = malloc(n ? n : 1);
  if (!copy) return NULL;
  memcpy(copy, b, n);
  if (vqc_json_mend_surrogates(copy, n) > 0) {
    json_error_t again;
    j = json_loadb(copy, n, flags, &again);
    if (j && mended) *mended = true;
    if (!j && err) *err = again;
  }
  free(copy);
  return j;
}
