/* utf8.h: text from outside vqcheck made fit for vqcheck's own output.
 *
 * A rank's stderr, the Python bridge's findings, live records and hang
 * markers, tensor names, call sites, command arguments and paths can hold
 * any bytes, and any fixed-size buffer can cut them in the middle of a
 * character. jansson refuses a string that is not UTF-8: json_string()
 * returns NULL, and json_object_set_new(obj, key, NULL) silently leaves the
 * member out, so run.json would later fail vqcheck's own validation (exit
 * 2, no reports). Every string from such a source goes into run.json, a
 * report or JUnit through this one module (issue 23: "vqcheck's own output
 * is always valid").
 *
 * The rule, one for every caller:
 *   - valid UTF-8 is what jansson accepts: no overlong form, no surrogate
 *     (U+D800..U+DFFF), nothing past U+10FFFF;
 *   - each byte that does not start such a character, and every NUL, becomes
 *     '?' (one byte for one, so offsets stay and the length never grows;
 *     a NUL would come back from run.json as \u0000, which vqcheck's own
 *     reader refuses);
 *   - a cut falls only where a character ends;
 *   - where bytes were replaced the caller says so: the finding's
 *     "invalid_utf8" list (findings.h), or a note at the end of the text
 *     (VQC_UTF8_NOTE). '?' rather than U+FFFD keeps a replaced text no longer
 *     than the original, so it still fits the buffer it came from. */
#ifndef VQC_UTF8_H
#define VQC_UTF8_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Options of vqc_utf8_copy and vqc_json_text_opts (bits). */
enum {
  /* b is the end of a longer text (a stderr tail): continuation bytes at
   * its start, the rest of a character cut off before it, are dropped
   * rather than replaced (reported as VQC_UTF8_CUT). */
  VQC_UTF8_TAIL = 1u << 0,
  /* Control characters other than newline and tab become '?' too (text
   * shown in a terminal or a report as it is). */
  VQC_UTF8_NO_CONTROLS = 1u << 1,
  /* vqc_json_text_opts only: when a byte was replaced, the text ends with
   * VQC_UTF8_NOTE_TEXT, so the reader is told. */
  VQC_UTF8_NOTE = 1u << 2,
};

/* What was done (bits, returned). */
enum {
  VQC_UTF8_REPLACED = 1u << 0, /* a byte became '?' */
  VQC_UTF8_CUT = 1u << 1,      /* the text did not fit, or lost its head */
};

#define VQC_UTF8_NOTE_TEXT " (invalid UTF-8 replaced by '?')"

/* The length (1..4) of the valid UTF-8 character at s[0..n); 0 when s does
 * not start with one (a byte that cannot start a character, one cut short
 * by n, an overlong form, a surrogate, a code point past U+10FFFF). A NUL
 * is a valid character of length 1 here (vqc_utf8_copy replaces it). */
size_t vqc_utf8_char_len(const char *s, size_t n);

/* Whether s[0..n) is valid UTF-8 without NUL bytes. */
bool vqc_utf8_valid(const char *s, size_t n);

/* Copies b[0..n) into out (cap >= 1 bytes, always NUL-terminated) by the
 * rule above, with opts; stops before the first character that does not
 * fit in cap - 1 bytes. out may be b (the output is never longer than what
 * it has read). Returns what was done (VQC_UTF8_REPLACED, VQC_UTF8_CUT);
 * *len (may be NULL) gets the length written. */
unsigned vqc_utf8_copy(char *out, size_t cap, const char *b, size_t n,
                       unsigned opts, size_t *len);

/* The NUL-terminated s cleaned in place (vqc_utf8_copy, no cut: out = s). */
unsigned vqc_utf8_clean(char *s, unsigned opts);

/* A JSON string (new reference) of b[0..n) by the rule above, with opts;
 * *done (may be NULL) gets what was done, or-ed in. b may be NULL (n 0):
 * "". Never NULL while memory lasts (then a JSON "?"), so a member set
 * from it is never missing. */
json_t *vqc_json_text_opts(const char *b, size_t n, unsigned opts,
                           unsigned *done);

/* vqc_json_text_opts(s, n, 0, NULL): the plain case. */
json_t *vqc_json_text(const char *s, size_t n);

/* json_loadb(b, n, flags, err) for a line another program wrote, by the
 * rule above: a \uD800..\uDFFF escape that is not half of a surrogate pair
 * (what Python's json.dumps writes for a name decoded with
 * "surrogateescape"; jansson refuses the whole text) reads as '?', and
 * *mended (may be NULL) is set. Any other fault is json_loadb's, in err. */
json_t *vqc_json_loadb_mended(const char *b, size_t n, size_t flags,
                              json_error_t *err, bool *mended);

/* The number of lone surrogate escapes in the JSON text b[0..n), each
 * rewritten in place as \u003f ('?', the same six bytes). */
size_t vqc_json_mend_surrogates(char *b, size_t n);

#endif /* VQC_UTF8_H */
