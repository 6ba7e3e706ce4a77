/*
 * probewise.throughput.readers._scan: one C pass over a run of Chrome trace events.
 *
 * The trace reader's optional compiled part (docs/reference/chrome-trace.md,
 * "The compiled scanner"). scan() checks that a run of events (the inside of a JSON
 * array) is valid JSON and does, in one pass, what the exact path (Totals.add_exact in
 * _totals.py) does with it: counts the events by category and by whether ``ph`` is "X";
 * for the device-lane spans sums integer nanoseconds per (code, raw name), makes each
 * span's duplicate key (the same Python hash of the same tuple) and its step-join
 * columns; for the launches, their correlation ids and starts. Events whose name starts
 * with "ProfilerStep#" are copied out as a JSON array for Python to decode. Host events,
 * most of a trace, never become Python objects.
 *
 * It never decides what it is not sure of. Where anything is outside what it reads
 * exactly (a key or a ``cat``/``ph`` with escapes or non-ASCII bytes, a ``ts`` or ``dur``
 * of a type the exact path's typed decode rejects or that could be out of a float's
 * range, a device span without a usable start or duration, ``args`` that are not an
 * object or a correlation that is not a 64-bit integer, an integer ``ts`` or ``dur``
 * beyond 64 bits, nanosecond sums beyond 64 bits, a surrogate escape, nesting deeper
 * than MAX_DEPTH, a repeated key it reads, more than MAX_CATS categories), it returns
 * None and the reader takes its pure-Python paths on the same bytes. What it
 * accepts is valid JSON that msgspec also accepts and that the exact path's typed
 * decode reads without a type error, and its totals are the exact path's
 * (tests/throughput/readers/test_chrome_native.py holds them equal).
 *
 * MAX_DEPTH (64) is far below msgspec's own limit at Python's default recursion limit;
 * a program that lowers that limit to under about 100 can make msgspec refuse a run the
 * scanner reads (nesting is not damage, so reading it is the better answer anyway).
 *
 * Memory safety: every read is bounds-checked against ``end``; the input buffer is held
 * (PyObject_GetBuffer) for the whole call and never written.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_CATS 64
#define MAX_DEPTH 64
#define LANE_CODES 5    /* kernel, memcpy, memset, GPU annotation, stream sync */
#define ROWS_CODES 3    /* the codes with rows, keys and step columns */
#define ROLE_LAUNCH 5
#define ROLE_COUNT (-1)

typedef unsigned char uchar;

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Out;

typedef struct {
    const uchar *text; /* the category inside its quotes; NULL: none (missing or null) */
    Py_ssize_t len;
    int role;
    Py_ssize_t count;
    Py_ssize_t not_x;
    PyObject *name; /* str or None */
} Category;

typedef struct {
    const uchar *text; /* the raw name (NULL: a free slot) */
    Py_ssize_t len;
    uint32_t crc;
    int code;
    Py_ssize_t calls;
    long long ns;
    PyObject *crc_obj;
} Name;

typedef struct {
    const uchar *end;
    Category cats[MAX_CATS];
    int ncats;
    PyObject *role;
    Py_ssize_t events;
    Out steps;
    Py_ssize_t nsteps;
    Name *names;  /* the rows by (code, raw name): open addressing, `slots` of them */
    size_t slots; /* a power of two (0: not made yet); at most half are used */
    Name **order; /* the rows in first-seen order */
    Py_ssize_t nnames;
    long long lane_ns[LANE_CODES];
    int lane_seen[LANE_CODES];
    Py_ssize_t spans;
    Out keys, dev_corr, dev_code, dev_ns;
    Out launch_corr, launch_ts;
    PyObject *codes[ROWS_CODES];
} Scan;

/* The event scanner's outcomes: accepted; declined (None to the caller); a Python error. */
enum { DECLINE = 0, ACCEPT = 1, FAILED = -1 };


/* CRC-32 (the polynomial of zlib.crc32), eight bytes a step. */
static uint32_t CRC[8][256];

static void init_crc(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        CRC[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            CRC[t][i] = (CRC[t - 1][i] >> 8) ^ CRC[0][CRC[t - 1][i] & 0xFF];
        }
    }
}

static uint32_t crc32_of(const uchar *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t one = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24);
        c = CRC[7][one & 0xFF] ^ CRC[6][(one >> 8) & 0xFF] ^ CRC[5][(one >> 16) & 0xFF] ^
            CRC[4][one >> 24] ^ CRC[3][p[4]] ^ CRC[2][p[5]] ^ CRC[1][p[6]] ^ CRC[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        c = CRC[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}

static int out_put(Out *o, const void *from, Py_ssize_t n) {
    if (o->len + n + 1 > o->cap) {
        Py_ssize_t cap = o->cap ? o->cap : 1 << 12;
        while (cap < o->len + n + 1) {
            cap *= 2;
        }
        char *grown = PyMem_Realloc(o->data, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->data = grown;
        o->cap = cap;
    }
    memcpy(o->data + o->len, from, (size_t)n);
    o->len += n;
    return 0;
}

static PyObject *out_bytes(Out *o) {
    return PyBytes_FromStringAndSize(o->data ? o->data : "", o->len);
}
/* 0: an ordinary byte inside a string; 1: '"'; 2: '\\'; 3: a control byte; 4: >= 0x80 */
static uchar STRING_CLASS[256];
static uchar IS_WS[256];
static uchar IS_DIGIT[256];

static void init_tables(void) {
    for (int c = 0; c < 256; c++) {
        STRING_CLASS[c] = c < 0x20 ? 3 : c >= 0x80 ? 4 : 0;
        IS_DIGIT[c] = c >= '0' && c <= '9';
    }
    STRING_CLASS['"'] = 1;
    STRING_CLASS['\\'] = 2;
    IS_WS[' '] = IS_WS['\t'] = IS_WS['\n'] = IS_WS['\r'] = 1;
}

static inline const uchar *skip_ws(const uchar *p, const uchar *end) {
    while (p < end && IS_WS[*p]) {
        p++;
    }
    return p;
}

static int hex4(const uchar *p, unsigned *value) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        uchar c = p[i];
        unsigned h;
        if (c >= '0' && c <= '9') {
            h = c - '0';
        } else if (c >= 'a' && c <= 'f') {
            h = c - 'a' + 10;
        } else if (c >= 'A' && c <= 'F') {
            h = c - 'A' + 10;
        } else {
            return 0;
        }
        v = v * 16 + h;
    }
    *value = v;
    return 1;
}

#define HAS_ESCAPE 1
#define HAS_HIGH 2

/* p: just after the opening quote. Returns just after the closing quote, or NULL. */
static const uchar *scan_string(const uchar *p, const uchar *end, int *flags) {
    int found = 0;
    for (;;) {
        while (end - p >= 4 && !(STRING_CLASS[p[0]] | STRING_CLASS[p[1]] | STRING_CLASS[p[2]] |
                                 STRING_CLASS[p[3]])) {
            p += 4;
        }
        while (p < end && STRING_CLASS[*p] == 0) {
            p++;
        }
        if (p >= end) {
            return NULL;
        }
        switch (STRING_CLASS[*p]) {
        case 1:
            *flags = found;
            return p + 1;
        case 2: {
            found |= HAS_ESCAPE;
            if (end - p < 2) {
                return NULL;
            }
            uchar c = p[1];
            if (c == 'u') {
                unsigned v;
                if (end - p < 6 || !hex4(p + 2, &v)) {
                    return NULL;
                }
                p += 6;
                if (v >= 0xDC00 && v <= 0xDFFF) {
                    return NULL; /* a low surrogate alone */
                }
                if (v >= 0xD800 && v <= 0xDBFF) { /* must be followed by its low half */
                    unsigned low;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &low) ||
                        low < 0xDC00 || low > 0xDFFF) {
                        return NULL;
                    }
                    p += 6;
                }
            } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                       c == 'r' || c == 't') {
                p += 2;
            } else {
                return NULL;
            }
            break;
        }
        case 3:
            return NULL;
        default: /* 4: a byte of a multi-byte character; msgspec checks only where it decodes */
            found |= HAS_HIGH;
            p++;
        }
    }
}

static int double_of(const uchar *p, const uchar *q, double *value);

/* A JSON number. strict: a ts or dur, which the exact path decodes into a float where it
 * is not an integer literal: decline where that float would overflow (msgspec refuses
 * it; an underflow is 0.0 for both). */
static const uchar *scan_number(const uchar *p, const uchar *end, int strict) {
    const uchar *start = p;
    Py_ssize_t digits = 0;
    int fraction = 0, exponent = 0;
    if (p < end && *p == '-') {
        p++;
    }
    if (p >= end) {
        return NULL;
    }
    if (*p == '0') {
        p++;
        digits = 1;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && IS_DIGIT[*p]) {
            p++;
            digits++;
        }
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        fraction = 1;
        p++;
        if (p >= end || !IS_DIGIT[*p]) {
            return NULL;
        }
        while (p < end && IS_DIGIT[*p]) {
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        exponent = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        const uchar *first = p;
        while (p < end && IS_DIGIT[*p]) {
            p++;
        }
        if (p == first) {
            return NULL;
        }
    }
    if (strict && !fraction && !exponent && digits > 19) {
        return NULL; /* beyond int64: never a real start or duration, and msgspec refuses
                        integers past sys.get_int_max_str_digits() (640 at the least) */
    }
    if (strict && (exponent || (fraction && digits > 300))) {
        double v;
        if (!double_of(start, p, &v) || !isfinite(v)) {
            return NULL;
        }
    }
    return p;
}

/* After a member or an element, at p: 1 when another follows (*pp at it), 0 when the
 * container closes (*pp after its close), -1 when neither (invalid). */
static int next_member(const uchar **pp, const uchar *end, uchar close) {
    const uchar *p = *pp == NULL ? NULL : skip_ws(*pp, end);
    if (p == NULL || p >= end) {
        return -1;
    }
    if (*p == ',') {
        *pp = skip_ws(p + 1, end);
        return 1;
    }
    *pp = p + 1;
    return *p == close ? 0 : -1;
}

static const uchar *skip_value(const uchar *p, const uchar *end, int depth);

static const uchar *skip_container(const uchar *p, const uchar *end, int depth, int object) {
    if (depth > MAX_DEPTH) {
        return NULL;
    }
    uchar close = object ? '}' : ']';
    p = skip_ws(p + 1, end);
    if (p < end && *p == close) {
        return p + 1;
    }
    for (;;) {
        if (object) {
            int flags;
            if (p >= end || *p != '"') {
                return NULL;
            }
            p = scan_string(p + 1, end, &flags);
            if (p == NULL) {
                return NULL;
            }
            p = skip_ws(p, end);
            if (p >= end || *p != ':') {
                return NULL;
            }
            p = skip_ws(p + 1, end);
        }
        p = skip_value(p, end, depth + 1);
        int more = next_member(&p, end, close);
        if (more <= 0) {
            return more == 0 ? p : NULL;
        }
    }
}

static inline int literal(const uchar *p, const uchar *end, const char *word, Py_ssize_t n) {
    return end - p >= n && memcmp(p, word, (size_t)n) == 0;
}

static const uchar *skip_value(const uchar *p, const uchar *end, int depth) {
    if (p >= end) {
        return NULL;
    }
    int flags;
    switch (*p) {
    case '"':
        return scan_string(p + 1, end, &flags);
    case '{':
        return skip_container(p, end, depth, 1);
    case '[':
        return skip_container(p, end, depth, 0);
    case 't':
        return literal(p, end, "true", 4) ? p + 4 : NULL;
    case 'f':
        return literal(p, end, "false", 5) ? p + 5 : NULL;
    case 'n':
        return literal(p, end, "null", 4) ? p + 4 : NULL;
    default:
        if (*p == '-' || IS_DIGIT[*p]) {
            return scan_number(p, end, 0);
        }
        return NULL;
    }
}


enum { K_OTHER, K_PH, K_CAT, K_NAME, K_TS, K_DUR, K_ARGS };

static int key_of(const uchar *k, Py_ssize_t n) {
    switch (n) {
    case 2:
        if (k[0] == 'p' && k[1] == 'h') return K_PH;
        if (k[0] == 't' && k[1] == 's') return K_TS;
        break;
    case 3:
        if (memcmp(k, "cat", 3) == 0) return K_CAT;
        if (memcmp(k, "dur", 3) == 0) return K_DUR;
        break;
    case 4:
        if (memcmp(k, "name", 4) == 0) return K_NAME;
        if (memcmp(k, "args", 4) == 0) return K_ARGS;
        break;
    }
    return K_OTHER;
}

/* A string the exact path reads as str: no escapes, ASCII only (anything else declines). */
static const uchar *plain_string(const uchar *p, const uchar *end, const uchar **text,
                                 Py_ssize_t *len) {
    int flags;
    const uchar *after = scan_string(p + 1, end, &flags);
    if (after == NULL || flags) {
        return NULL;
    }
    *text = p + 1;
    *len = after - 1 - (p + 1);
    return after;
}

static int is_int_literal(const uchar *p, const uchar *q) {
    for (; p < q; p++) {
        if (*p == '.' || *p == 'e' || *p == 'E') {
            return 0;
        }
    }
    return 1;
}

/* An integer literal (JSON grammar already checked) as int64; 0 when out of range. */
static int int64_of(const uchar *p, const uchar *q, long long *value) {
    int negative = *p == '-';
    unsigned long long v = 0;
    p += negative;
    if (q - p > 19) {
        return 0;
    }
    for (; p < q; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (18446744073709551615ULL - d) / 10) {
            return 0;
        }
        v = v * 10 + d;
    }
    if (negative) {
        if (v > 9223372036854775808ULL) {
            return 0;
        }
        *value = v == 9223372036854775808ULL ? (-9223372036854775807LL - 1) : -(long long)v;
    } else {
        if (v > 9223372036854775807ULL) {
            return 0;
        }
        *value = (long long)v;
    }
    return 1;
}

/* A number literal as the double Python's float() makes of it (locale-free). */
static int double_of(const uchar *p, const uchar *q, double *value) {
    char text[72];
    if (q - p >= (Py_ssize_t)sizeof text) {
        return 0;
    }
    memcpy(text, p, (size_t)(q - p));
    text[q - p] = '\0';
    char *stop = NULL;
    double v = PyOS_string_to_double(text, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (stop != text + (q - p)) {
        return 0;
    }
    *value = v;
    return 1;
}

/* A number literal as msgspec reads it into ``int | float``: an int64 (``*is_int``) or a
 * double; 0 where it is neither (an integer beyond 64 bits, a literal too long). */
static int number_of(const uchar *p, const uchar *q, int *is_int, long long *i, double *d) {
    *is_int = is_int_literal(p, q);
    return *is_int ? int64_of(p, q, i) : double_of(p, q, d);
}

/* args.correlation, read as msgspec reads it into an int64 (or None): 0 declines. */
static int correlation_of(const uchar *p, const uchar *end, int *has, long long *value) {
    int seen = 0;
    *has = 0;
    if (p == NULL) {
        return 1; /* no args: the default {} */
    }
    if (*p != '{') {
        return 0;
    }
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') {
        return 1;
    }
    for (;;) {
        int flags;
        if (p >= end || *p != '"') {
            return 0;
        }
        const uchar *key = p + 1;
        p = scan_string(key, end, &flags);
        if (p == NULL || (flags & HAS_ESCAPE)) {
            return 0;
        }
        int is_corr = p - 1 - key == 11 && memcmp(key, "correlation", 11) == 0;
        p = skip_ws(p, end);
        if (p >= end || *p != ':') {
            return 0;
        }
        p = skip_ws(p + 1, end);
        if (is_corr) {
            if (seen) {
                return 0;
            }
            seen = 1;
            if (literal(p, end, "null", 4)) {
                p += 4;
            } else if (p < end && (*p == '-' || IS_DIGIT[*p])) {
                const uchar *q = scan_number(p, end, 0);
                if (q == NULL || !is_int_literal(p, q) || !int64_of(p, q, value)) {
                    return 0;
                }
                *has = 1;
                p = q;
            } else {
                return 0;
            }
        } else {
            p = skip_value(p, end, 3);
        }
        int more = next_member(&p, end, '}');
        if (more <= 0) {
            return more == 0;
        }
    }
}

static Category *category(Scan *s, const uchar *text, Py_ssize_t len) {
    for (int i = 0; i < s->ncats; i++) {
        Category *c = &s->cats[i];
        if (c->len == len &&
            (text == NULL ? c->text == NULL
                          : c->text != NULL && memcmp(c->text, text, (size_t)len) == 0)) {
            return c;
        }
    }
    if (s->ncats == MAX_CATS) {
        return NULL; /* declines */
    }
    PyObject *name = text == NULL ? Py_NewRef(Py_None)
                                  : PyUnicode_DecodeASCII((const char *)text, len, NULL);
    if (name == NULL) {
        return NULL;
    }
    PyObject *answer = PyObject_CallOneArg(s->role, name);
    if (answer == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    long role = PyLong_AsLong(answer);
    Py_DECREF(answer);
    if (role == -1 && PyErr_Occurred()) {
        Py_DECREF(name);
        return NULL;
    }
    if (role < ROLE_COUNT || role > ROLE_LAUNCH) {
        Py_DECREF(name);
        PyErr_SetString(PyExc_ValueError, "scan(): a role is -1 (count only), 0-4 or 5");
        return NULL;
    }
    Category *c = &s->cats[s->ncats++];
    c->text = text;
    c->len = len;
    c->role = (int)role;
    c->count = 0;
    c->not_x = 0;
    c->name = name;
    return c;
}

typedef struct {
    const uchar *ts, *ts_end; /* NULL: missing or null */
    const uchar *dur, *dur_end; /* NULL: missing, null or a string */
    const uchar *name, *name_end;
    const uchar *args, *args_end;
    int is_x;
} Fields;

static const uchar NULL_NAME[] = "null";
static const uchar EMPTY_ARGS[] = "{}";

static size_t name_slot(const Scan *s, uint32_t crc, int code) {
    return (crc ^ (uint32_t)code * 0x9E3779B9u) & (s->slots - 1);
}

/* Double the name table (or make it): every row moves to its slot in the new one. */
static int grow_names(Scan *s) {
    size_t slots = s->slots ? s->slots * 2 : 256;
    Name *names = PyMem_Calloc(slots, sizeof(Name));
    Name **order = PyMem_Malloc(slots / 2 * sizeof(Name *));
    if (names == NULL || order == NULL) {
        PyMem_Free(names);
        PyMem_Free(order);
        PyErr_NoMemory();
        return -1;
    }
    s->slots = slots;
    for (Py_ssize_t i = 0; i < s->nnames; i++) {
        const Name *old = s->order[i];
        size_t slot = name_slot(s, old->crc, old->code);
        while (names[slot].text != NULL) {
            slot = (slot + 1) & (slots - 1);
        }
        names[slot] = *old;
        order[i] = &names[slot];
    }
    PyMem_Free(s->names);
    PyMem_Free(s->order);
    s->names = names;
    s->order = order;
    return 0;
}

/* The (code, raw name) row of a device span: found or added (NULL: failed). The table
 * is open addressing, at most half full: it doubles as it fills. */
static Name *name_row(Scan *s, int code, const uchar *text, Py_ssize_t len) {
    if ((size_t)s->nnames >= s->slots / 2 && grow_names(s) < 0) {
        return NULL;
    }
    uint32_t crc = crc32_of(text, len);
    size_t slot = name_slot(s, crc, code);
    for (;;) {
        Name *n = &s->names[slot];
        if (n->text == NULL) {
            n->crc_obj = PyLong_FromUnsignedLong(crc);
            if (n->crc_obj == NULL) {
                return NULL;
            }
            n->text = text;
            n->len = len;
            n->crc = crc;
            n->code = code;
            s->order[s->nnames++] = n;
            return n;
        }
        if (n->crc == crc && n->code == code && n->len == len &&
            memcmp(n->text, text, (size_t)len) == 0) {
            return n;
        }
        slot = (slot + 1) & (s->slots - 1);
    }
}

/* Python's round() of a float, to an int64 (the value is known to be in range). */
static long long py_round(double x) {
    double rounded = round(x);
    if (fabs(x - rounded) == 0.5) {
        rounded = 2.0 * round(x / 2.0);
    }
    return (long long)rounded;
}

/* A device-lane span: its nanoseconds, row, key and step columns. 0 declines, -1 fails. */
static int lane_span(Scan *s, int code, const Fields *f) {
    long long ns, v;
    double d;
    int is_int;
    PyObject *ts;
    if (f->ts == NULL || f->dur == NULL) {
        return 0; /* no start or no numeric duration: the exact path says what it is */
    }
    if (!number_of(f->dur, f->dur_end, &is_int, &v, &d)) {
        return 0;
    }
    if (is_int ? v < 0 || v >= 1000000000000000LL : !(d >= 0.0 && d < 1e15)) {
        return 0; /* malformed: the exact path counts it */
    }
    ns = is_int ? v * 1000 : py_round(d * 1000.0);
    if (ns > LLONG_MAX - s->lane_ns[code]) {
        return 0; /* a sum past int64 (the exact path sums Python ints): decline */
    }
    s->lane_ns[code] += ns;
    if (code >= ROWS_CODES) {
        return 1;
    }
    if (!number_of(f->ts, f->ts_end, &is_int, &v, &d)) {
        return 0;
    }
    ts = is_int ? PyLong_FromLongLong(v) : PyFloat_FromDouble(d);
    if (ts == NULL) {
        return -1;
    }
    int has_corr;
    long long corr;
    if (!correlation_of(f->args, f->args_end, &has_corr, &corr)) {
        Py_DECREF(ts);
        return 0;
    }
    const uchar *name = f->name ? f->name : NULL_NAME;
    Py_ssize_t name_len = f->name ? f->name_end - f->name : 4;
    Name *row = name_row(s, code, name, name_len);
    if (row == NULL) {
        Py_DECREF(ts);
        return PyErr_Occurred() ? -1 : 0;
    }
    const uchar *args = f->args ? f->args : EMPTY_ARGS;
    Py_ssize_t args_len = f->args ? f->args_end - f->args : 2;
    PyObject *args_crc = PyLong_FromUnsignedLong(crc32_of(args, args_len));
    PyObject *ns_obj = PyLong_FromLongLong(ns);
    PyObject *key = NULL;
    if (args_crc != NULL && ns_obj != NULL) {
        key = PyTuple_Pack(5, s->codes[code], row->crc_obj, args_crc, ts, ns_obj);
    }
    Py_DECREF(ts);
    Py_XDECREF(args_crc);
    Py_XDECREF(ns_obj);
    if (key == NULL) {
        return -1;
    }
    Py_hash_t hash = PyObject_Hash(key);
    Py_DECREF(key);
    if (hash == -1 && PyErr_Occurred()) {
        return -1;
    }
    long long key64 = (long long)hash;
    signed char code8 = (signed char)code;
    if (ns > LLONG_MAX - row->ns) {
        return 0;
    }
    row->calls++;
    row->ns += ns;
    s->spans++;
    if (out_put(&s->keys, &key64, 8) < 0) {
        return -1;
    }
    if (has_corr && (out_put(&s->dev_corr, &corr, 8) < 0 || out_put(&s->dev_code, &code8, 1) < 0 ||
                     out_put(&s->dev_ns, &ns, 8) < 0)) {
        return -1;
    }
    return 1;
}

/* A launch (runtime call): its correlation id and start, where it has both. */
static int launch(Scan *s, const Fields *f) {
    int has_corr, is_int;
    long long corr, v;
    double ts;
    if (!correlation_of(f->args, f->args_end, &has_corr, &corr)) {
        return 0;
    }
    if (!has_corr || f->ts == NULL) {
        return 1;
    }
    if (!number_of(f->ts, f->ts_end, &is_int, &v, &ts)) {
        return 0;
    }
    if (is_int) {
        ts = (double)v;
    }
    if (out_put(&s->launch_corr, &corr, 8) < 0 || out_put(&s->launch_ts, &ts, 8) < 0) {
        return -1;
    }
    return 1;
}

static const char STEP_PREFIX[] = "\"ProfilerStep#";

/* One event object at p ('{'). Returns the byte after it, or NULL: *status says why. */
static const uchar *scan_event(Scan *s, const uchar *p, int *status) {
    const uchar *end = s->end;
    const uchar *start = p;
    const uchar *cat = NULL;
    Py_ssize_t cat_len = 0;
    Fields f;
    unsigned seen = 0;
    memset(&f, 0, sizeof f);
    *status = DECLINE;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') {
        p++;
    } else {
        for (;;) {
            int flags;
            if (p >= end || *p != '"') {
                return NULL;
            }
            const uchar *key = p + 1;
            p = scan_string(key, end, &flags);
            if (p == NULL || (flags & HAS_ESCAPE)) {
                return NULL; /* an escaped key could spell one of ours */
            }
            int which = key_of(key, p - 1 - key);
            if (which != K_OTHER) {
                if (seen & (1u << which)) {
                    return NULL;
                }
                seen |= 1u << which;
            }
            p = skip_ws(p, end);
            if (p >= end || *p != ':') {
                return NULL;
            }
            p = skip_ws(p + 1, end);
            if (p >= end) {
                return NULL;
            }
            const uchar *value = p;
            switch (which) {
            case K_PH:
            case K_CAT:
                if (*p == '"') {
                    const uchar *text;
                    Py_ssize_t len;
                    p = plain_string(p, end, &text, &len);
                    if (p != NULL && which == K_PH) {
                        f.is_x = len == 1 && text[0] == 'X';
                    } else if (p != NULL) {
                        cat = text;
                        cat_len = len;
                    }
                } else if (literal(p, end, "null", 4)) {
                    p += 4;
                } else {
                    return NULL;
                }
                break;
            case K_TS:
            case K_DUR:
                if (*p == '-' || IS_DIGIT[*p]) {
                    p = scan_number(p, end, 1);
                    if (which == K_TS) {
                        f.ts = value;
                        f.ts_end = p;
                    } else {
                        f.dur = value;
                        f.dur_end = p;
                    }
                } else if (literal(p, end, "null", 4)) {
                    p += 4;
                } else if (which == K_DUR && *p == '"') {
                    p = scan_string(p + 1, end, &flags);
                    if (p != NULL && (flags & HAS_HIGH)) {
                        return NULL; /* msgspec checks UTF-8 where it makes a str */
                    }
                } else {
                    return NULL;
                }
                break;
            case K_NAME:
                p = skip_value(p, end, 2);
                f.name = value;
                f.name_end = p;
                break;
            case K_ARGS:
                p = skip_value(p, end, 2);
                f.args = value;
                f.args_end = p;
                break;
            default:
                p = skip_value(p, end, 2);
            }
            int more = next_member(&p, end, '}');
            if (more < 0) {
                return NULL;
            }
            if (more == 0) {
                break;
            }
        }
    }
    Category *c = category(s, cat, cat_len);
    if (c == NULL) {
        *status = PyErr_Occurred() ? FAILED : DECLINE;
        return NULL;
    }
    c->count++;
    c->not_x += !f.is_x;
    s->events++;
    int done = 1;
    if (c->role == ROLE_LAUNCH) {
        done = launch(s, &f);
    } else if (c->role >= 0) {
        s->lane_seen[c->role] = 1; /* the exact path sums a code it saw, spans or not */
        if (f.is_x) {
            done = lane_span(s, c->role, &f);
        }
    }
    if (done <= 0) {
        *status = done < 0 ? FAILED : DECLINE;
        return NULL;
    }
    if (f.name != NULL && f.name_end - f.name >= (Py_ssize_t)(sizeof STEP_PREFIX - 1) &&
        memcmp(f.name, STEP_PREFIX, sizeof STEP_PREFIX - 1) == 0) {
        if (out_put(&s->steps, s->nsteps ? "," : "[", 1) < 0 ||
            out_put(&s->steps, start, p - start) < 0) {
            *status = FAILED;
            return NULL;
        }
        s->nsteps++;
    }
    *status = ACCEPT;
    return p;
}

/* The events of a run, the inside of a JSON array. */
static int scan_run(Scan *s, const uchar *p) {
    const uchar *end = s->end;
    p = skip_ws(p, end);
    if (p == end) {
        return ACCEPT;
    }
    for (;;) {
        int status;
        if (*p != '{') {
            return DECLINE;
        }
        p = scan_event(s, p, &status);
        if (p == NULL) {
            return status;
        }
        p = skip_ws(p, end);
        if (p == end) {
            return ACCEPT;
        }
        if (*p != ',') {
            return DECLINE;
        }
        p = skip_ws(p + 1, end);
        if (p == end) {
            return DECLINE;
        }
    }
}

static PyObject *results(Scan *s) {
    PyObject *counts = PyList_New(s->ncats);
    PyObject *rows = PyList_New(s->nnames);
    PyObject *lane = PyList_New(0);
    PyObject *steps = NULL;
    PyObject *result = NULL;
    if (counts == NULL || rows == NULL || lane == NULL) {
        goto done;
    }
    for (int i = 0; i < s->ncats; i++) {
        Category *c = &s->cats[i];
        PyObject *item = Py_BuildValue("(Onn)", c->name, c->count, c->not_x);
        if (item == NULL) {
            goto done;
        }
        PyList_SET_ITEM(counts, i, item);
    }
    for (Py_ssize_t i = 0; i < s->nnames; i++) {
        Name *n = s->order[i];
        PyObject *item = Py_BuildValue("(iy#nL)", n->code, (const char *)n->text, n->len,
                                       n->calls, n->ns);
        if (item == NULL) {
            goto done;
        }
        PyList_SET_ITEM(rows, i, item);
    }
    for (int code = 0; code < LANE_CODES; code++) {
        if (s->lane_seen[code]) {
            PyObject *item = Py_BuildValue("(iL)", code, s->lane_ns[code]);
            if (item == NULL || PyList_Append(lane, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
    }
    if (s->nsteps) {
        if (out_put(&s->steps, "]", 1) < 0) {
            goto done;
        }
        steps = out_bytes(&s->steps);
    } else {
        steps = Py_NewRef(Py_None);
    }
    if (steps == NULL) {
        goto done;
    }
    result = Py_BuildValue("(nOOOOnNNNNNN)", s->events, counts, steps, rows, lane, s->spans,
                           out_bytes(&s->keys), out_bytes(&s->dev_corr), out_bytes(&s->dev_code),
                           out_bytes(&s->dev_ns), out_bytes(&s->launch_corr),
                           out_bytes(&s->launch_ts));
done:
    Py_XDECREF(counts);
    Py_XDECREF(rows);
    Py_XDECREF(lane);
    Py_XDECREF(steps);
    return result;
}

static void release(Scan *s) {
    for (int i = 0; i < s->ncats; i++) {
        Py_XDECREF(s->cats[i].name);
    }
    for (Py_ssize_t i = 0; i < s->nnames; i++) {
        Py_XDECREF(s->order[i]->crc_obj);
    }
    PyMem_Free(s->names);
    PyMem_Free(s->order);
    Out *outs[] = {&s->steps,    &s->keys,        &s->dev_corr,  &s->dev_code,
                   &s->dev_ns,   &s->launch_corr, &s->launch_ts};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        PyMem_Free(outs[i]->data);
    }
    for (int i = 0; i < ROWS_CODES; i++) {
        Py_XDECREF(s->codes[i]);
    }
}

PyDoc_STRVAR(scan_doc,
             "scan(buf, start, end, role, /)\n--\n\n"
             "Read the events of buf[start:end] (the inside of a JSON array of trace events).\n\n"
             "role(cat) is called once per category of the run (None: no category) and says\n"
             "what its events are: -1 counted only, 0-4 a device-lane code, 5 a launch.\n"
             "Returns None where the pure-Python paths must decide, else (events, counts,\n"
             "steps, rows, lane, spans, keys, device_corr, device_code, device_ns,\n"
             "launch_corr, launch_ts); see probewise/throughput/readers/_native.py.");

static PyObject *scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "scan() takes 4 positional arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    if (stop == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (start < 0 || stop < start || stop > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan(): needs 0 <= start <= end <= len(buf)");
        return NULL;
    }
    Scan *s = PyMem_Calloc(1, sizeof(Scan));
    if (s == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    int status = FAILED;
    for (int i = 0; i < ROWS_CODES; i++) {
        s->codes[i] = PyLong_FromLong(i);
        if (s->codes[i] == NULL) {
            goto done;
        }
    }
    static const uchar nothing[1] = {0};
    const uchar *base = view.buf != NULL ? (const uchar *)view.buf : nothing; /* empty */
    s->end = base + stop;
    s->role = args[3];
    status = scan_run(s, base + start);
    if (status == ACCEPT) {
        result = results(s);
    } else if (status == DECLINE) {
        if (PyErr_Occurred()) { /* a role callback that set an error and returned an int */
            status = FAILED;
        } else {
            result = Py_NewRef(Py_None);
        }
    }
done:
    release(s);
    PyMem_Free(s);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *crc32(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    uint32_t crc = crc32_of((const uchar *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL, scan_doc},
    {"crc32", crc32, METH_O, "crc32(data, /)\n--\n\nzlib.crc32(data), as the scanner computes it."},
    {NULL, NULL, 0, NULL},
};

static int exec_module(PyObject *self) {
    (void)self;
    init_tables(); /* constant tables: filling them again (another interpreter) is harmless */
    init_crc();
    return 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, (void *)exec_module},
#ifdef Py_GIL_DISABLED
    /* No state of its own beyond constant tables: free-threaded builds keep the GIL off. */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "probewise.throughput.readers._scan",
    .m_doc = "One C pass over a run of Chrome trace events (the trace reader's optional "
             "compiled part).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC PyInit__scan(void) {
    return PyModuleDef_Init(&module);
}
