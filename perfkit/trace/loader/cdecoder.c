/* perfkit.trace.loader.cdecoder: the compiled decoder of one chunk of Chrome-trace events (issue 52).
 *
 * decode(chunk) reads the bytes of a JSON array of events (b"[{...},{...}]", any buffer) and returns,
 * for the fields perfkit reads (the ones perfkit/trace/loader/events.py declares), their columns:
 *
 *   (n, codes, uniques, values, kinds, objects)
 *     codes:   6 bytes objects of n int32, one per coded field (ph, cat, name, pid, tid, args.rank):
 *              each event's index into that field's uniques
 *     uniques: 6 lists, the distinct values of each coded field in first-seen order, as msgspec
 *              decodes them (str, int or None; the default of an absent field: None for ph, cat and
 *              rank, "" for name, pid and tid)
 *     values:  13 bytes objects of n float64, one per numeric field (ts, dur, id, then the args
 *              fields in the order of NUMERIC_FIELDS below), NaN where absent or null; None for a
 *              field no event of the chunk carries
 *     kinds:   13 bytes objects of n uint8 (0 absent, 1 null, 2 an integer, 3 a float, 4 an object) or None
 *     objects: 13 lists or None: the values of kind 4 (a string, or an integer past 2**53 in an id
 *              field), whose index in the list is their float64 value
 *
 * or a str saying what it does not handle, and where: the caller then decodes the chunk with msgspec
 * (perfkit.trace.loader.decode), which produces the exact result or the exact failure. So this parser
 * only has to be right on what it accepts, and it accepts less than msgspec, never more: any JSON
 * error, a value of a type msgspec refuses, a float name, pid, tid or rank (int 1 and float 1.0 are one
 * value to a Python dict: not worth reproducing), an integer past int64 there, and a number of more
 * than 400 characters are all refused. Skipped values are validated (grammar,
 * escapes, strict UTF-8) but not converted.
 *
 * Every read goes through the cursor checks below (p < end before *p); the input is never written.
 * The GIL is held throughout (the uniques are Python objects).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { F_PH, F_CAT, F_NAME, F_PID, F_TID, F_RANK, N_CODED };
enum { V_TS, V_DUR, V_ID, V_EXTERNAL_ID, V_DEVICE, V_STREAM, V_CORRELATION, V_EXTERNAL_ID_OLD, V_BYTES,
       V_SIZE, V_PYTHON_PARENT, V_PYTHON_ID, V_ALLOC_BYTES, N_VALUES };
enum { K_ABSENT = 0, K_NULL = 1, K_INT = 2, K_FLOAT = 3, K_OBJECT = 4 };
enum { T_NULL, T_STR, T_INT };  /* the type of a coded value */
enum { OK = 0, REFUSED = 1, PY_ERROR = -1 };

#define MAX_DEPTH 64          /* nesting of a skipped value (msgspec recurses deeper; deeper: refused) */
#define MAX_NUMBER_CHARS 400  /* longer numbers are refused rather than copied */
#define EXACT_INT (1LL << 53) /* ids past this need their exact Python int */

/* ---------------------------------------------------------------- growable buffers */

typedef struct { char *data; size_t len, cap; } Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (extra > SIZE_MAX / 2 - b->len) return -1;
    size_t need = b->len + extra;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* ---------------------------------------------------------------- the parser's state */

typedef struct {  /* one coded value of the event being read */
    int tag;
    const char *s;  /* T_STR: its UTF-8 bytes, in the input (no escapes) or in the field's scratch */
    size_t len;
    long long i;    /* T_INT */
} Token;

typedef struct { uint64_t hash; int tag; size_t off, len; long long i; int32_t code; } Entry;

typedef struct {  /* the distinct values of one coded field: hash table -> code, and the Python objects */
    Entry *slots;
    size_t mask, used;
    Buf arena;          /* the bytes of the string keys */
    PyObject *uniques;  /* list */
    Entry *last;        /* the entry of the previous event (consecutive events often share a value) */
    Buf scratch;        /* the decoded bytes of an escaped string of the event being read */
} Dict;

typedef struct {
    const char *base, *end;   /* the input */
    const char *why;          /* what was refused (static text) */
    size_t at;                /* and at which byte */
    Dict dicts[N_CODED];
    Buf key;                  /* the decoded bytes of an escaped key */
    Buf text;                 /* and of an escaped string in a numeric field */
    PyObject *objects[N_VALUES];  /* per numeric field, the values a float64 cannot carry (or NULL) */
    int32_t *codes[N_CODED];  /* the columns, n of cap rows filled */
    double *values[N_VALUES];
    uint8_t *kinds[N_VALUES];
    int present[N_VALUES];    /* whether any event carries the field */
    size_t n, cap;
    Token tok[N_CODED];       /* the event being read */
    double val[N_VALUES];
    uint8_t kind[N_VALUES];
} Parser;

static int refuse(Parser *ps, const char *p, const char *why) {
    ps->why = why;
    ps->at = (size_t)(p - ps->base);
    return REFUSED;
}

#define IS_WS(c) ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t')
#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && IS_WS(*p)) p++;
    return p;
}

/* ---------------------------------------------------------------- strings */

static int hex4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return -1;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        v <<= 4;
        if (IS_DIGIT(c)) v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* The length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF) of 2-4 bytes starting at p, or 0. */
static int utf8_length(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    int n;
    unsigned lo = 0x80, hi = 0xBF;  /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if (end - p < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return 0;
    return n;
}

static int put_utf8(Buf *b, unsigned cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) { out[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    return buf_put(b, out, n);
}

/* One escape sequence at p (just after the backslash). Writes its UTF-8 bytes to out (when not NULL)
 * and returns the byte after it, or NULL (an invalid escape, a lone surrogate: refused). */
static const char *escape(const char *p, const char *end, Buf *out, int *oom) {
    if (p >= end) return NULL;
    char c = *p++, plain;
    switch (c) {
    case '"': plain = '"'; break;
    case '\\': plain = '\\'; break;
    case '/': plain = '/'; break;
    case 'b': plain = '\b'; break;
    case 'f': plain = '\f'; break;
    case 'n': plain = '\n'; break;
    case 'r': plain = '\r'; break;
    case 't': plain = '\t'; break;
    case 'u': {
        unsigned cp, low;
        if (hex4(p, end, &cp) < 0) return NULL;
        p += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return NULL;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end - p < 2 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &low) < 0) return NULL;
            if (low < 0xDC00 || low > 0xDFFF) return NULL;
            p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        if (out && put_utf8(out, cp) < 0) { *oom = 1; return NULL; }
        return p;
    }
    default: return NULL;
    }
    if (out && buf_put(out, &plain, 1) < 0) { *oom = 1; return NULL; }
    return p;
}

/* Whether any of the 8 bytes of w needs a look: '"', '\\', a control character or a byte of a UTF-8
 * sequence (the has-zero-byte and has-less-than tests of Anderson's "Bit Twiddling Hacks": exact on
 * whether any byte matches). */
static int special8(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
    return (((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | ((w - ones * 0x20) & ~w) | w) & highs
           ? 1 : 0;
}

/* The string whose opening quote is at p. Returns the byte after its closing quote, or NULL (refused,
 * ps->why set; or a MemoryError, *oom set). When s is not NULL, sets (*s, *len) to its UTF-8 bytes:
 * in the input when it has no escape, else decoded into scratch. */
static const char *string(Parser *ps, const char *p, Buf *scratch, const char **s, size_t *len, int *oom) {
    const char *end = ps->end, *start = ++p;
    int escaped = 0;
    while (p < end) {
        if (!escaped) {  /* 8 plain bytes at a time (an escaped string is copied byte by byte) */
            uint64_t w;
            while (end - p >= 8 && (memcpy(&w, p, 8), !special8(w))) p += 8;
            if (p >= end) break;
        }
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            if (s && !escaped) { *s = start; *len = (size_t)(p - start); }
            else if (s) { *s = scratch->data; *len = scratch->len; }
            return p + 1;
        }
        if (c < 0x20) { refuse(ps, p, "a control character in a string"); return NULL; }
        if (c == '\\') {
            if (s && !escaped) {  /* from here on the string is decoded into scratch */
                escaped = 1;
                scratch->len = 0;
                if (buf_put(scratch, start, (size_t)(p - start)) < 0) { *oom = 1; return NULL; }
            }
            const char *next = escape(p + 1, end, s ? scratch : NULL, oom);
            if (next == NULL) { if (!*oom) refuse(ps, p, "an invalid escape in a string"); return NULL; }
            p = next;
            continue;
        }
        size_t n = 1;
        if (c >= 0x80 && (n = (size_t)utf8_length((const unsigned char *)p, (const unsigned char *)end)) == 0) {
            refuse(ps, p, "a string that is not valid UTF-8");
            return NULL;
        }
        if (escaped && buf_put(scratch, p, n) < 0) { *oom = 1; return NULL; }
        p += n;
    }
    refuse(ps, p, "a string that does not end");
    return NULL;
}

/* ---------------------------------------------------------------- numbers */

typedef struct { int is_int, int_ok; long long i; double d; } Number;

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
                               1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The JSON number at p. Returns the byte after it, or NULL when the bytes are not one (refused) or,
 * with convert, when its value is beyond float64 (msgspec: "Number out of range"). With convert, sets
 * num: is_int (no fraction, no exponent), int_ok and i (the integer, when it fits int64) and d (its
 * float64, correctly rounded: exact for up to 2**53 times a power of ten up to 1e22, else Python's
 * own correctly rounded strtod). */
static const char *number(Parser *ps, const char *p, Number *num, int convert) {
    const char *end = ps->end, *start = p;
    int neg = 0, digits = 0, dropped = 0, is_int = 1;
    long exp10 = 0;
    uint64_t mant = 0;
    if (p < end && *p == '-') { neg = 1; p++; }
    if (p >= end || !IS_DIGIT(*p)) { refuse(ps, p, "an invalid number"); return NULL; }
    if (*p == '0') {
        p++;
        if (p < end && IS_DIGIT(*p)) { refuse(ps, p, "a number with a leading zero"); return NULL; }
    }
    for (; p < end && IS_DIGIT(*p); p++) {
        if (digits < 19) { mant = mant * 10 + (uint64_t)(*p - '0'); digits += mant != 0; }
        else { exp10++; dropped |= *p != '0'; }
    }
    if (p < end && *p == '.') {
        is_int = 0;
        if (++p >= end || !IS_DIGIT(*p)) { refuse(ps, p, "an invalid number"); return NULL; }
        for (; p < end && IS_DIGIT(*p); p++) {
            if (digits < 19) { mant = mant * 10 + (uint64_t)(*p - '0'); digits += mant != 0; exp10--; }
            else dropped |= *p != '0';
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        int eneg = 0;
        long e = 0;
        is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p >= end || !IS_DIGIT(*p)) { refuse(ps, p, "an invalid number"); return NULL; }
        for (; p < end && IS_DIGIT(*p); p++)
            if (e < 100000) e = e * 10 + (*p - '0');
        exp10 += eneg ? -e : e;
    }
    if (!convert) return p;
    num->is_int = is_int;
    num->int_ok = is_int && !dropped && exp10 == 0 && mant <= (uint64_t)INT64_MAX + neg;
    num->i = num->int_ok ? (neg ? (long long)(0 - mant) : (long long)mant) : 0;
    if (mant == 0 && !dropped) {
        num->d = (neg && !is_int) ? -0.0 : 0.0;  /* msgspec reads the integer -0 as 0 */
    } else if (!dropped && mant <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        double d = (double)mant;
        d = exp10 < 0 ? d / POW10[-exp10] : d * POW10[exp10];
        num->d = neg ? -d : d;
    } else {
        char text[MAX_NUMBER_CHARS + 1];
        size_t len = (size_t)(p - start);
        char *stop;
        if (len > MAX_NUMBER_CHARS) { refuse(ps, start, "a number too long"); return NULL; }
        memcpy(text, start, len);
        text[len] = '\0';
        num->d = PyOS_string_to_double(text, &stop, NULL);  /* locale-independent, correctly rounded */
        if (num->d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); refuse(ps, start, "an invalid number"); return NULL; }
        if (stop != text + len) { refuse(ps, start, "an invalid number"); return NULL; }
    }
    if (isinf(num->d)) { refuse(ps, start, "a number beyond float64"); return NULL; }
    return p;
}

/* ---------------------------------------------------------------- skipped values */

static const char *literal(Parser *ps, const char *p, const char *word, size_t n) {
    if ((size_t)(ps->end - p) < n || memcmp(p, word, n) != 0) { refuse(ps, p, "an invalid literal"); return NULL; }
    return p + n;
}

/* A value perfkit does not read, validated (msgspec checks that skipped values are JSON too). */
static const char *skip_value(Parser *ps, const char *p, int depth, int *oom) {
    const char *end = ps->end;
    if (p >= end) { refuse(ps, p, "the chunk ends inside an event"); return NULL; }
    switch (*p) {
    case '"': return string(ps, p, NULL, NULL, NULL, oom);
    case 't': return literal(ps, p, "true", 4);
    case 'f': return literal(ps, p, "false", 5);
    case 'n': return literal(ps, p, "null", 4);
    case '[': case '{': {
        char close = *p == '[' ? ']' : '}';
        if (depth >= MAX_DEPTH) { refuse(ps, p, "a value nested too deep"); return NULL; }
        p = skip_ws(p + 1, end);
        if (p < end && *p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (p >= end || *p != '"') { refuse(ps, p, "an object key that is not a string"); return NULL; }
                if ((p = string(ps, p, NULL, NULL, NULL, oom)) == NULL) return NULL;
                p = skip_ws(p, end);
                if (p >= end || *p != ':') { refuse(ps, p, "a key without ':'"); return NULL; }
                p = skip_ws(p + 1, end);
            }
            if ((p = skip_value(ps, p, depth + 1, oom)) == NULL) return NULL;
            p = skip_ws(p, end);
            if (p < end && *p == close) return p + 1;
            if (p >= end || *p != ',') { refuse(ps, p, "a missing ',' in a value"); return NULL; }
            p = skip_ws(p + 1, end);
        }
    }
    default:
        return number(ps, p, NULL, 0);
    }
}

/* ---------------------------------------------------------------- the fields perfkit reads */

/* A value of a coded field: a string or null, and for name, pid, tid and rank an integer too. */
static const char *coded_value(Parser *ps, const char *p, int field, int *oom) {
    Token *t = &ps->tok[field];
    if (p >= ps->end) { refuse(ps, p, "the chunk ends inside an event"); return NULL; }
    if (*p == '"') {
        t->tag = T_STR;
        return string(ps, p, &ps->dicts[field].scratch, &t->s, &t->len, oom);
    }
    if (*p == 'n') { t->tag = T_NULL; return literal(ps, p, "null", 4); }
    if (field != F_PH && field != F_CAT && (*p == '-' || IS_DIGIT(*p))) {
        Number num;
        const char *next = number(ps, p, &num, 1);
        if (next == NULL) return NULL;
        if (!num.is_int) { refuse(ps, p, "a float where a name, pid, tid or rank goes"); return NULL; }
        if (!num.int_ok) { refuse(ps, p, "an integer beyond int64 where a name, pid, tid or rank goes"); return NULL; }
        t->tag = T_INT;
        t->i = num.i;
        return next;
    }
    refuse(ps, p, "a value of a type the decoder does not read there");
    return NULL;
}

/* Keeps obj (a reference is stolen) as the value of the numeric field of the event being read: its
 * index in the field's objects. */
static int keep_object(Parser *ps, int field, PyObject *obj) {
    if (obj == NULL) return PY_ERROR;
    if (ps->objects[field] == NULL && (ps->objects[field] = PyList_New(0)) == NULL) { Py_DECREF(obj); return PY_ERROR; }
    ps->val[field] = (double)PyList_GET_SIZE(ps->objects[field]);
    ps->kind[field] = K_OBJECT;
    int failed = PyList_Append(ps->objects[field], obj);
    Py_DECREF(obj);
    return failed ? PY_ERROR : OK;
}

static PyObject *exact_int(const char *start, const char *stop) {
    char text[MAX_NUMBER_CHARS + 1];
    size_t len = (size_t)(stop - start);
    if (len > MAX_NUMBER_CHARS) return NULL;
    memcpy(text, start, len);
    text[len] = '\0';
    return PyLong_FromString(text, NULL, 10);
}

/* A numeric field: a number, a string or null. ts and dur (time) hold float64s; an id holds an integer
 * where float64 carries it exactly. Strings and larger integers are kept as Python objects (K_OBJECT):
 * perfkit.trace.loader.values reads them as the pure-Python path does. */
static const char *numeric_value(Parser *ps, const char *p, int field, int *oom) {
    if (p >= ps->end) { refuse(ps, p, "the chunk ends inside an event"); return NULL; }
    if (*p == 'n') { ps->kind[field] = K_NULL; return literal(ps, p, "null", 4); }
    if (*p == '"') {
        const char *s;
        size_t len;
        const char *next = string(ps, p, &ps->text, &s, &len, oom);
        if (next == NULL) return NULL;
        return keep_object(ps, field, PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "strict")) == OK ? next : NULL;
    }
    if (*p != '-' && !IS_DIGIT(*p)) { refuse(ps, p, "a numeric field that is neither a number nor a string"); return NULL; }
    Number num;
    const char *next = number(ps, p, &num, 1);
    if (next == NULL) return NULL;
    int time = field == V_TS || field == V_DUR;
    if (num.is_int && !time && (!num.int_ok || num.i > EXACT_INT || num.i < -EXACT_INT)) {
        PyObject *exact = exact_int(p, next);
        if (exact == NULL && !PyErr_Occurred()) { refuse(ps, p, "an integer too long"); return NULL; }
        return keep_object(ps, field, exact) == OK ? next : NULL;
    }
    ps->kind[field] = num.is_int ? K_INT : K_FLOAT;
    ps->val[field] = num.d;
    return next;
}

#define KEY(word) (len == sizeof(word) - 1 && memcmp(s, word, sizeof(word) - 1) == 0)

/* Which field of an event the key (s, len) names: sets *coded (F_PH..F_TID) or *numeric (V_TS, V_DUR,
 * V_ID), or neither (args and the keys perfkit does not read). */
static void event_field(const char *s, size_t len, int *coded, int *numeric) {
    *coded = *numeric = -1;
    switch (len) {
    case 2: if (KEY("ph")) *coded = F_PH; else if (KEY("ts")) *numeric = V_TS; else if (KEY("id")) *numeric = V_ID; break;
    case 3:
        if (KEY("cat")) *coded = F_CAT; else if (KEY("pid")) *coded = F_PID; else if (KEY("tid")) *coded = F_TID;
        else if (KEY("dur")) *numeric = V_DUR;
        break;
    case 4: if (KEY("name")) *coded = F_NAME; break;
    }
}

/* Which field of an event's args the key names: V_EXTERNAL_ID..V_ALLOC_BYTES, N_VALUES for rank (a
 * coded field), -1 for the keys perfkit does not read. */
static int arg_field(const char *s, size_t len) {
    switch (len) {
    case 4: return KEY("size") ? V_SIZE : KEY("rank") ? N_VALUES : -1;
    case 5: return KEY("bytes") ? V_BYTES : KEY("Bytes") ? V_ALLOC_BYTES : -1;
    case 6: return KEY("device") ? V_DEVICE : KEY("stream") ? V_STREAM : -1;
    case 9: return KEY("Python id") ? V_PYTHON_ID : -1;
    case 11:
        return KEY("External id") ? V_EXTERNAL_ID : KEY("correlation") ? V_CORRELATION
               : KEY("external id") ? V_EXTERNAL_ID_OLD : -1;
    case 16: return KEY("Python parent id") ? V_PYTHON_PARENT : -1;
    default: return -1;
    }
}

static void clear_args(Parser *ps) {
    for (int f = V_EXTERNAL_ID; f < N_VALUES; f++) ps->kind[f] = K_ABSENT;
    ps->tok[F_RANK].tag = T_NULL;
}

/* One object, an event (in_args 0) or its args (1): each key read into its field, the others skipped. Duplicate keys:
 * the last value wins, as in msgspec (a second "args" replaces the first one's fields). */
static const char *object(Parser *ps, const char *p, int in_args, int *oom) {
    const char *end = ps->end;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') return p + 1;
    for (;;) {
        const char *key;
        size_t len;
        int coded = -1, numeric = -1;
        if (p >= end || *p != '"') { refuse(ps, p, "an object key that is not a string"); return NULL; }
        if ((p = string(ps, p, &ps->key, &key, &len, oom)) == NULL) return NULL;
        p = skip_ws(p, end);
        if (p >= end || *p != ':') { refuse(ps, p, "a key without ':'"); return NULL; }
        p = skip_ws(p + 1, end);
        if (in_args) {
            int f = arg_field(key, len);
            if (f == N_VALUES) coded = F_RANK;
            else numeric = f;
        } else if (event_field(key, len, &coded, &numeric), len == 4 && memcmp(key, "args", 4) == 0) {
            clear_args(ps);
            if (p < end && *p == '{') p = object(ps, p, 1, oom);
            else if (p < end && *p == 'n') p = literal(ps, p, "null", 4);
            else { refuse(ps, p, "args that are not an object"); return NULL; }
            goto next;
        }
        if (coded >= 0) p = coded_value(ps, p, coded, oom);
        else if (numeric >= 0) p = numeric_value(ps, p, numeric, oom);
        else p = skip_value(ps, p, 2, oom);
    next:
        if (p == NULL) return NULL;
        p = skip_ws(p, end);
        if (p < end && *p == '}') return p + 1;
        if (p >= end || *p != ',') { refuse(ps, p, "a missing ',' between fields"); return NULL; }
        p = skip_ws(p + 1, end);
    }
}

/* ---------------------------------------------------------------- coded values -> codes */

static uint64_t hash_token(const Token *t) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)t->tag << 56);
    if (t->tag == T_INT) return (h ^ (uint64_t)t->i) * 0xBF58476D1CE4E5B9ULL;
    if (t->tag == T_NULL) return h;
    const char *s = t->s;
    size_t n = t->len;
    h ^= n * 0x94D049BB133111EBULL;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94D049BB133111EBULL;
    return h ^ (h >> 29);
}

static int same(const Dict *d, const Entry *e, const Token *t) {
    if (e->tag != t->tag) return 0;
    if (t->tag == T_INT) return e->i == t->i;
    return t->tag == T_NULL || (e->len == t->len && memcmp(d->arena.data + e->off, t->s, t->len) == 0);
}

static PyObject *token_object(const Token *t) {
    if (t->tag == T_NULL) Py_RETURN_NONE;
    if (t->tag == T_INT) return PyLong_FromLongLong(t->i);
    return PyUnicode_DecodeUTF8(t->s, (Py_ssize_t)t->len, "strict");
}

static int dict_grow(Dict *d) {
    size_t size = d->slots ? (d->mask + 1) * 2 : 64;
    Entry *slots = PyMem_Malloc(size * sizeof(Entry));
    if (slots == NULL) return -1;
    for (size_t k = 0; k < size; k++) slots[k].code = -1;  /* -1: an empty slot */
    for (size_t k = 0; d->slots && k <= d->mask; k++) {
        if (d->slots[k].code < 0) continue;
        size_t at = d->slots[k].hash & (size - 1);
        while (slots[at].code >= 0) at = (at + 1) & (size - 1);
        slots[at] = d->slots[k];
    }
    PyMem_Free(d->slots);
    d->slots = slots;
    d->mask = size - 1;
    d->last = NULL;
    return 0;
}

/* The code of t (adding it to the field's uniques when new), or -1 with a Python error set. */
static int32_t code_of(Dict *d, const Token *t) {
    if (d->last && same(d, d->last, t)) return d->last->code;
    if (d->slots == NULL || (d->used + 1) * 2 > d->mask + 1) {
        if (dict_grow(d) < 0) { PyErr_NoMemory(); return -1; }
    }
    uint64_t h = hash_token(t);
    size_t at = h & d->mask;
    for (; d->slots[at].code >= 0; at = (at + 1) & d->mask) {
        if (d->slots[at].hash == h && same(d, &d->slots[at], t)) { d->last = &d->slots[at]; return d->last->code; }
    }
    Py_ssize_t code = PyList_GET_SIZE(d->uniques);
    if (code >= INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "too many distinct values"); return -1; }
    PyObject *obj = token_object(t);
    if (obj == NULL) return -1;
    int failed = PyList_Append(d->uniques, obj);
    Py_DECREF(obj);
    if (failed) return -1;
    Entry *e = &d->slots[at];
    e->hash = h; e->tag = t->tag; e->i = t->i; e->len = t->tag == T_STR ? t->len : 0; e->off = d->arena.len;
    if (t->tag == T_STR && buf_put(&d->arena, t->s, t->len) < 0) { PyErr_NoMemory(); return -1; }
    e->code = (int32_t)code;
    d->used++;
    d->last = e;
    return e->code;
}

/* ---------------------------------------------------------------- events -> columns */

static int grow_columns(Parser *ps) {
    size_t cap = ps->cap ? ps->cap * 2 : 4096;
    for (int f = 0; f < N_CODED; f++) {
        int32_t *c = PyMem_Realloc(ps->codes[f], cap * sizeof(int32_t));
        if (c == NULL) return -1;
        ps->codes[f] = c;
    }
    for (int f = 0; f < N_VALUES; f++) {
        double *v = PyMem_Realloc(ps->values[f], cap * sizeof(double));
        if (v == NULL) return -1;
        ps->values[f] = v;
        uint8_t *k = PyMem_Realloc(ps->kinds[f], cap);
        if (k == NULL) return -1;
        ps->kinds[f] = k;
    }
    ps->cap = cap;
    return 0;
}

static void start_event(Parser *ps) {
    for (int f = 0; f < N_CODED; f++) {
        ps->tok[f].tag = (f == F_NAME || f == F_PID || f == F_TID) ? T_STR : T_NULL;  /* "" or None */
        ps->tok[f].s = "";
        ps->tok[f].len = 0;
    }
    memset(ps->kind, K_ABSENT, sizeof ps->kind);
}

static int end_event(Parser *ps) {
    if (ps->n == ps->cap && grow_columns(ps) < 0) { PyErr_NoMemory(); return PY_ERROR; }
    for (int f = 0; f < N_CODED; f++) {
        int32_t code = code_of(&ps->dicts[f], &ps->tok[f]);
        if (code < 0) return PY_ERROR;
        ps->codes[f][ps->n] = code;
    }
    for (int f = 0; f < N_VALUES; f++) {
        uint8_t k = ps->kind[f];
        ps->values[f][ps->n] = k >= K_INT ? ps->val[f] : NAN;  /* K_OBJECT: the index in objects */
        ps->kinds[f][ps->n] = k;
        ps->present[f] |= k != K_ABSENT;
    }
    ps->n++;
    return OK;
}

/* The whole chunk: '[', events separated by ',', ']', and nothing after but whitespace. */
static int parse_chunk(Parser *ps) {
    const char *p = skip_ws(ps->base, ps->end), *end = ps->end;
    int oom = 0;
    if (p >= end || *p != '[') return refuse(ps, p, "a chunk that is not an array");
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']') return skip_ws(p + 1, end) == end ? OK : refuse(ps, p + 1, "bytes after the array");
    for (;;) {
        if (p >= end || *p != '{') return refuse(ps, p, "an element that is not an object");
        start_event(ps);
        if ((p = object(ps, p, 0, &oom)) == NULL) {
            if (oom) { PyErr_NoMemory(); return PY_ERROR; }
            return PyErr_Occurred() ? PY_ERROR : REFUSED;
        }
        if (end_event(ps) != OK) return PY_ERROR;
        p = skip_ws(p, end);
        if (p < end && *p == ']') break;
        if (p >= end || *p != ',') return refuse(ps, p, "a missing ',' between events");
        p = skip_ws(p + 1, end);
    }
    return skip_ws(p + 1, end) == end ? OK : refuse(ps, p + 1, "bytes after the array");
}

/* ---------------------------------------------------------------- the module */

static PyObject *column_bytes(const void *data, size_t n) {
    return PyBytes_FromStringAndSize(n ? (const char *)data : "", (Py_ssize_t)n);
}

static PyObject *result(Parser *ps) {
    PyObject *codes = PyTuple_New(N_CODED), *uniques = PyTuple_New(N_CODED);
    PyObject *values = PyTuple_New(N_VALUES), *kinds = PyTuple_New(N_VALUES), *objects = PyTuple_New(N_VALUES);
    PyObject *out = NULL;
    if (!codes || !uniques || !values || !kinds || !objects) goto done;
    for (int f = 0; f < N_CODED; f++) {
        PyObject *c = column_bytes(ps->codes[f], ps->n * sizeof(int32_t));
        if (c == NULL) goto done;
        PyTuple_SET_ITEM(codes, f, c);
        Py_INCREF(ps->dicts[f].uniques);
        PyTuple_SET_ITEM(uniques, f, ps->dicts[f].uniques);
    }
    for (int f = 0; f < N_VALUES; f++) {
        PyObject *v = ps->present[f] ? column_bytes(ps->values[f], ps->n * sizeof(double)) : Py_NewRef(Py_None);
        PyObject *k = ps->present[f] ? column_bytes(ps->kinds[f], ps->n) : Py_NewRef(Py_None);
        if (v == NULL || k == NULL) { Py_XDECREF(v); Py_XDECREF(k); goto done; }
        PyTuple_SET_ITEM(values, f, v);
        PyTuple_SET_ITEM(kinds, f, k);
        PyTuple_SET_ITEM(objects, f, Py_NewRef(ps->objects[f] ? ps->objects[f] : Py_None));
    }
    out = Py_BuildValue("(nOOOOO)", (Py_ssize_t)ps->n, codes, uniques, values, kinds, objects);
done:
    Py_XDECREF(codes); Py_XDECREF(uniques); Py_XDECREF(values); Py_XDECREF(kinds); Py_XDECREF(objects);
    return out;
}

static void parser_free(Parser *ps) {
    for (int f = 0; f < N_CODED; f++) {
        PyMem_Free(ps->dicts[f].slots);
        PyMem_Free(ps->dicts[f].arena.data);
        PyMem_Free(ps->dicts[f].scratch.data);
        Py_XDECREF(ps->dicts[f].uniques);
        PyMem_Free(ps->codes[f]);
    }
    for (int f = 0; f < N_VALUES; f++) {
        PyMem_Free(ps->values[f]);
        PyMem_Free(ps->kinds[f]);
        Py_XDECREF(ps->objects[f]);
    }
    PyMem_Free(ps->key.data);
    PyMem_Free(ps->text.data);
}

static PyObject *decode(PyObject *module, PyObject *chunk) {
    Py_buffer view;
    Parser ps;
    PyObject *out = NULL;
    (void)module;
    if (PyObject_GetBuffer(chunk, &view, PyBUF_SIMPLE) < 0) return NULL;
    memset(&ps, 0, sizeof ps);
    ps.base = view.buf;
    ps.end = ps.base + view.len;
    for (int f = 0; f < N_CODED; f++)
        if ((ps.dicts[f].uniques = PyList_New(0)) == NULL) goto done;
    switch (parse_chunk(&ps)) {
    case OK: out = result(&ps); break;
    case REFUSED: out = PyUnicode_FromFormat("%s at byte %zu", ps.why, ps.at); break;
    default: break;  /* a Python error (MemoryError) is set */
    }
done:
    parser_free(&ps);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef METHODS[] = {
    {"decode", decode, METH_O,
     "decode(chunk) -> (n, codes, uniques, values, kinds, objects), or a str saying what it does not handle "
     "(the caller then decodes the chunk with msgspec). See perfkit/trace/loader/native.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "cdecoder", "perfkit's compiled chunk decoder.", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_cdecoder(void) { return PyModule_Create(&MODULE); }
