/* Safetensors for the runtime of a library written by `kiln aot` (see kiln_aot.h): pasted into
 * NAME.c after kiln_aot_common.c. A strict reader of weights files and embedded weights (as
 * runtime/Safetensors.cpp and runtime/Json.cpp read them: the same checks, the same messages) and
 * an atomic writer laid out as kiln's serializeSafetensors. Parameters reach the target through
 * kaot_target_take_params and kaot_target_param_bytes (kiln_aot_common.c). */

/* ---------------------------------------------------------------- safetensors: the header's JSON */
/* A strict reader (as runtime/Json.cpp): RFC 8259 syntax, valid UTF-8, no duplicate keys, at most
 * 64 levels. kaot_jvalue validates (and skips) one value; the header is validated whole first, then
 * walked again for its meaning, so a syntax error anywhere wins over a semantic one. */

typedef struct { size_t off, len; const char* ptr; } kaot_key;
typedef struct {
  const unsigned char* s;
  size_t n, pos;
  const char* what;
  kaot_buf pool; /* the decoded keys of the objects being read */
  kaot_key* keys;
  size_t nkeys, capkeys;
} kaot_json;

KAOT_FN int kaot_jfail(const kaot_json* j, const char* reason) {
  return kaot_fail(KILN_AOT_E_FORMAT, "%s: header: invalid json at byte %zu: %s", j->what, j->pos, reason);
}
KAOT_FN int kaot_oom(const char* what) { return kaot_fail(KILN_AOT_E_MEMORY, "%s: out of memory", what); }
static inline int kaot_peek(const kaot_json* j) { return j->pos < j->n ? j->s[j->pos] : -1; }
static inline bool kaot_digit(int c) { return c >= '0' && c <= '9'; }
KAOT_FN void kaot_ws(kaot_json* j) {
  while (j->pos < j->n && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' || j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
    ++j->pos;
}
KAOT_FN const char* kaot_kind(const kaot_json* j) {
  switch (kaot_peek(j)) {
    case '{': return "object";
    case '[': return "array";
    case '"': return "string";
    case 't': case 'f': return "boolean";
    case 'n': return "null";
    default: return "number";
  }
}

KAOT_FN int kaot_hex4(kaot_json* j, uint32_t* u) {
  *u = 0;
  for (int i = 0; i < 4; ++i) {
    if (j->pos >= j->n) return kaot_jfail(j, "unterminated \\u escape");
    int c = j->s[j->pos++];
    *u <<= 4;
    if (kaot_digit(c)) *u |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') *u |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') *u |= (uint32_t)(c - 'A' + 10);
    else return kaot_jfail(j, "invalid hex digit in \\u escape");
  }
  return 0;
}

/* The string at j->pos, decoded into `out` when not NULL. */
KAOT_FN int kaot_jstring(kaot_json* j, kaot_buf* out) {
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (kaot_peek(j) != '"') return kaot_jfail(j, "expected '\"'");
  ++j->pos;
  for (;;) {
    if (j->pos >= j->n) return kaot_jfail(j, "unterminated string");
    unsigned char c = j->s[j->pos], u8[4];
    size_t len = 1;
    if (c == '"') {
      ++j->pos;
      return 0;
    }
    if (c < 0x20) return kaot_jfail(j, "control character in a string");
    if (c >= 0x80) {
      len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      if (len == 0 || c > 0xF4 || j->pos + len > j->n) return kaot_jfail(j, "invalid utf-8 in a string");
      uint32_t cp = c & (0x7Fu >> len);
      for (size_t i = 1; i < len; ++i) {
        if ((j->s[j->pos + i] & 0xC0) != 0x80) return kaot_jfail(j, "invalid utf-8 in a string");
        cp = (cp << 6) | (j->s[j->pos + i] & 0x3Fu);
      }
      if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kaot_jfail(j, "invalid utf-8 in a string");
      memcpy(u8, j->s + j->pos, len);
      j->pos += len;
    } else if (c != '\\') {
      u8[0] = c;
      ++j->pos;
    } else {
      if (++j->pos >= j->n) return kaot_jfail(j, "unterminated escape");
      unsigned char e = j->s[j->pos++];
      uint32_t cp, lo;
      int rc;
      switch (e) {
        case '"': case '\\': case '/': u8[0] = e; break;
        case 'b': u8[0] = '\b'; break;
        case 'f': u8[0] = '\f'; break;
        case 'n': u8[0] = '\n'; break;
        case 'r': u8[0] = '\r'; break;
        case 't': u8[0] = '\t'; break;
        case 'u':
          if ((rc = kaot_hex4(j, &cp))) return rc;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return kaot_jfail(j, "unpaired low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (j->n - j->pos < 2 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u')
              return kaot_jfail(j, "unpaired high surrogate in \\u escape");
            j->pos += 2;
            if ((rc = kaot_hex4(j, &lo))) return rc;
            if (lo < 0xDC00 || lo > 0xDFFF) return kaot_jfail(j, "unpaired high surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          if (cp < 0x80) {
            u8[0] = (unsigned char)cp;
          } else if (cp < 0x800) {
            len = 2;
            u8[0] = (unsigned char)(0xC0 | (cp >> 6));
          } else if (cp < 0x10000) {
            len = 3;
            u8[0] = (unsigned char)(0xE0 | (cp >> 12));
          } else {
            len = 4;
            u8[0] = (unsigned char)(0xF0 | (cp >> 18));
          }
          for (size_t i = 1; i < len; ++i) u8[i] = (unsigned char)(0x80 | ((cp >> (6 * (len - 1 - i))) & 0x3F));
          break;
        default: --j->pos; return kaot_jfail(j, "invalid escape");
      }
    }
    if (out && kaot_put(out, u8, len)) return kaot_oom(j->what);
  }
}

KAOT_FN int kaot_digits(kaot_json* j) {
  size_t d = j->pos;
  while (kaot_digit(kaot_peek(j))) ++j->pos;
  return j->pos == d ? kaot_jfail(j, "expected a digit") : 0;
}
KAOT_FN int kaot_jnumber(kaot_json* j) {
  int rc = 0;
  if (kaot_peek(j) == '-') ++j->pos;
  if (kaot_peek(j) == '0') {
    ++j->pos;
    if (kaot_digit(kaot_peek(j))) return kaot_jfail(j, "leading zeros are not allowed");
  } else if ((rc = kaot_digits(j))) {
    return rc;
  }
  if (kaot_peek(j) == '.' && (++j->pos, (rc = kaot_digits(j)))) return rc;
  if (kaot_peek(j) == 'e' || kaot_peek(j) == 'E') {
    ++j->pos;
    if (kaot_peek(j) == '+' || kaot_peek(j) == '-') ++j->pos;
    return kaot_digits(j);
  }
  return 0;
}

KAOT_FN int kaot_keycmp(const void* a, const void* b) {
  const kaot_key *x = (const kaot_key*)a, *y = (const kaot_key*)b;
  int r = memcmp(x->ptr, y->ptr, x->len < y->len ? x->len : y->len);
  return r ? r : (x->len > y->len) - (x->len < y->len);
}

KAOT_FN int kaot_jvalue(kaot_json* j, int depth) {
  int rc = 0, c = kaot_peek(j);
  const char* word = c == 't' ? "true" : c == 'f' ? "false" : "null";
  if (depth >= 64) return kaot_jfail(j, "nesting deeper than 64 levels");
  if (c < 0) return kaot_jfail(j, "unexpected end of input");
  if (c == '"') return kaot_jstring(j, NULL);
  if (c == 't' || c == 'f' || c == 'n') {
    if (j->n - j->pos < strlen(word) || memcmp(j->s + j->pos, word, strlen(word)) != 0) return kaot_jfail(j, "unknown literal");
    j->pos += strlen(word);
    return 0;
  }
  if (c != '{' && c != '[') return kaot_jnumber(j);
  size_t base = j->nkeys, pool0 = j->pool.n;
  char close = c == '{' ? '}' : ']';
  ++j->pos;
  kaot_ws(j);
  if (kaot_peek(j) == close) return ++j->pos, 0;
  for (;;) {
    kaot_ws(j);
    if (c == '{') {
      size_t off = j->pool.n;
      if (kaot_peek(j) != '"') return kaot_jfail(j, "expected a string key");
      if ((rc = kaot_jstring(j, &j->pool))) return rc;
      if (kaot_reserve((void**)&j->keys, &j->capkeys, j->nkeys + 1, sizeof(kaot_key))) return kaot_oom(j->what);
      j->keys[j->nkeys++] = (kaot_key){off, j->pool.n - off, NULL};
      kaot_ws(j);
      if (kaot_peek(j) != ':') return kaot_jfail(j, "expected ':'");
      ++j->pos;
      kaot_ws(j);
    }
    if ((rc = kaot_jvalue(j, depth + 1))) return rc;
    kaot_ws(j);
    if (kaot_peek(j) == ',') {
      ++j->pos;
      continue;
    }
    if (kaot_peek(j) != close) return kaot_jfail(j, close == '}' ? "expected '}'" : "expected ']'");
    ++j->pos;
    break;
  }
  size_t count = j->nkeys - base;
  for (size_t i = 0; i < count; ++i) j->keys[base + i].ptr = j->pool.p + j->keys[base + i].off;
  if (count > 1) qsort(j->keys + base, count, sizeof(kaot_key), kaot_keycmp);
  for (size_t i = 1; i < count; ++i)
    if (kaot_keycmp(&j->keys[base + i - 1], &j->keys[base + i]) == 0) {
      char q[256];
      return kaot_fail(KILN_AOT_E_FORMAT, "%s: header: invalid json: duplicate key %s", j->what,
                       kaot_q(q, j->keys[base + i].ptr, j->keys[base + i].len));
    }
  j->nkeys = base;
  j->pool.n = pool0;
  return 0;
}

/* Integers as std::from_chars reads them: [-]digits, nothing else, no overflow. */
KAOT_FN bool kaot_u64(const unsigned char* s, size_t n, uint64_t* v) {
  *v = 0;
  if (n == 0) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!kaot_digit(s[i]) || *v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10) return false;
    *v = *v * 10 + (uint64_t)(s[i] - '0');
  }
  return true;
}
KAOT_FN bool kaot_i64(const unsigned char* s, size_t n, int64_t* v) {
  bool neg = n > 0 && s[0] == '-';
  uint64_t u;
  if (!kaot_u64(s + neg, n - neg, &u) || u > (uint64_t)INT64_MAX + neg) return false;
  *v = neg ? (int64_t)(0 - u) : (int64_t)u;
  return true;
}

/* ---------------------------------------------------------------- safetensors: reading */

typedef struct {
  size_t name_off, name_len, shape_off, index;
  const char* name;
  int dtype, rank;
  uint64_t begin, end;
} kaot_entry;
typedef struct {
  kaot_entry* e;
  size_t n, cap;
  int64_t* dims;
  size_t ndims, capdims;
  kaot_buf names, tmp;
} kaot_tab;

#define KAOT_TRY(x) \
  do {              \
    if ((rc = (x)) != 0) goto done; \
  } while (0)

/* The next member of an object whose syntax is known good: its key into `key`, j->pos at its value.
 * Returns 0 at the closing brace (consumed). */
KAOT_FN int kaot_member(kaot_json* j, kaot_buf* key, bool first, int* rc) {
  kaot_ws(j);
  if (kaot_peek(j) == '}') return ++j->pos, 0;
  if (!first) ++j->pos, kaot_ws(j); /* ',' */
  key->n = 0;
  if ((*rc = kaot_jstring(j, key))) return 0;
  kaot_ws(j);
  ++j->pos; /* ':' */
  kaot_ws(j);
  return 1;
}

KAOT_FN int kaot_parse_entry(kaot_json* j, kaot_tab* T, size_t off, size_t len) {
  static const char* const foreign[] = {"U8", "I8", "U16", "I16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};
  char q[256], where[1400], ts[256];
  size_t pd = 0, ps = 0, po = 0, end, shape_off = T->ndims, spans[3][2] = {{0, 0}};
  int rc = 0, rank = 0, dt = -1, items = 0;
  uint64_t product, bytes, b, e;
  bool overflow = false, empty = false;
  snprintf(where, sizeof where, "%s: tensor %s", j->what, kaot_q(q, T->names.p + off, len));
  if (kaot_peek(j) != '{')
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: expected an object with dtype, shape and data_offsets, found a %s", where, kaot_kind(j));
  ++j->pos;
  for (bool first = true; kaot_member(j, &T->tmp, first, &rc); first = false) {
    if (T->tmp.n == 5 && memcmp(T->tmp.p, "dtype", 5) == 0) pd = j->pos;
    if (T->tmp.n == 5 && memcmp(T->tmp.p, "shape", 5) == 0) ps = j->pos;
    if (T->tmp.n == 12 && memcmp(T->tmp.p, "data_offsets", 12) == 0) po = j->pos;
    if ((rc = kaot_jvalue(j, 0))) return rc;
  }
  if (rc) return rc;
  end = j->pos;
  if (!pd || !ps || !po)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: missing \"%s\"", where, !pd ? "dtype" : !ps ? "shape" : "data_offsets");
  j->pos = pd;
  if (kaot_peek(j) != '"') return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"dtype\" must be a string, found a %s", where, kaot_kind(j));
  T->tmp.n = 0;
  if ((rc = kaot_jstring(j, &T->tmp))) return rc;
  for (int d = 0; d < 7; ++d)
    if (T->tmp.n == strlen(kaot_st_names[d]) && memcmp(T->tmp.p, kaot_st_names[d], T->tmp.n) == 0) dt = d;
  if (dt < 0) {
    bool known = false;
    for (size_t f = 0; f < sizeof foreign / sizeof foreign[0]; ++f)
      known = known || (T->tmp.n == strlen(foreign[f]) && memcmp(T->tmp.p, foreign[f], T->tmp.n) == 0);
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: %s dtype %s (kiln reads F32, F16, BF16, F64, I32, I64 and BOOL)", where,
                     known ? "unsupported" : "unknown", kaot_q(ts, T->tmp.p, T->tmp.n));
  }
  j->pos = ps;
  if (kaot_peek(j) != '[') return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"shape\" must be an array, found a %s", where, kaot_kind(j));
  product = (uint64_t)kaot_dtype_sizes[dt];
  for (++j->pos, kaot_ws(j); kaot_peek(j) != ']'; kaot_ws(j), j->pos += kaot_peek(j) == ',') {
    size_t a = (kaot_ws(j), j->pos);
    int64_t v = -1;
    int c = kaot_peek(j);
    if (c != '-' && !kaot_digit(c))
      return kaot_fail(KILN_AOT_E_FORMAT, "%s: shape entries must be non-negative integers, found %s", where, kaot_kind(j));
    if ((rc = kaot_jnumber(j))) return rc;
    if (!kaot_i64(j->s + a, j->pos - a, &v) || v < 0)
      return kaot_fail(KILN_AOT_E_FORMAT, "%s: shape entries must be non-negative integers, found %.*s", where,
                       (int)(j->pos - a > 100 ? 100 : j->pos - a), (const char*)j->s + a);
    if (kaot_reserve((void**)&T->dims, &T->capdims, T->ndims + 1, sizeof(int64_t))) return kaot_oom(j->what);
    T->dims[T->ndims++] = v;
    ++rank;
    if (v == 0) empty = true;
    else if (product > UINT64_MAX / (uint64_t)v) overflow = true;
    else product *= (uint64_t)v;
  }
  if (overflow || product > (uint64_t)INT64_MAX)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: shape %s is too large (its size in bytes overflows)", where,
                     kaot_type(ts, "", rank, T->dims + shape_off));
  bytes = empty ? 0 : product;
  j->pos = po;
  if (kaot_peek(j) == '[') {
    for (++j->pos, kaot_ws(j); kaot_peek(j) != ']'; kaot_ws(j), j->pos += kaot_peek(j) == ',') {
      kaot_ws(j);
      if (items < 3) spans[items][0] = j->pos;
      if ((rc = kaot_jvalue(j, 0))) return rc;
      if (items < 3) spans[items][1] = j->pos;
      ++items;
    }
  }
  if (items != 2)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"data_offsets\" must be an array of two integers [begin, end]", where);
  if (!kaot_u64(j->s + spans[0][0], spans[0][1] - spans[0][0], &b) || !kaot_u64(j->s + spans[1][0], spans[1][1] - spans[1][0], &e))
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"data_offsets\" must be non-negative integers", where);
  if (b > e) return kaot_fail(KILN_AOT_E_FORMAT, "%s: data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin", where, b, e);
  if (e - b != bytes)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64 " bytes but %s needs %" PRIu64 " bytes",
                     where, b, e, e - b, kaot_type(ts, kaot_st_names[dt], rank, T->dims + shape_off), bytes);
  if (kaot_reserve((void**)&T->e, &T->cap, T->n + 1, sizeof(kaot_entry))) return kaot_oom(j->what);
  T->e[T->n] = (kaot_entry){off, len, shape_off, T->n, NULL, dt, rank, b, e};
  T->n++;
  j->pos = end;
  return 0;
}

/* Walks the (valid) header: the tensors' entries into T, "__metadata__" checked and skipped. */
KAOT_FN int kaot_parse_header(kaot_json* j, kaot_tab* T) {
  int rc = 0;
  j->pos = 1;
  for (bool first = true;; first = false) {
    kaot_ws(j);
    if (kaot_peek(j) == '}') return 0;
    if (!first) ++j->pos, kaot_ws(j); /* ',' */
    size_t off = T->names.n;
    if ((rc = kaot_jstring(j, &T->names))) return rc;
    size_t len = T->names.n - off;
    kaot_ws(j);
    ++j->pos;
    kaot_ws(j);
    if (len != 12 || memcmp(T->names.p + off, "__metadata__", 12) != 0) {
      if ((rc = kaot_parse_entry(j, T, off, len))) return rc;
      continue;
    }
    T->names.n = off;
    if (kaot_peek(j) != '{') return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"__metadata__\" must be an object of strings", j->what);
    ++j->pos;
    for (bool f = true; kaot_member(j, &T->tmp, f, &rc); f = false) {
      char q[256];
      if (kaot_peek(j) != '"')
        return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"__metadata__\" value for %s must be a string, found a %s", j->what,
                         kaot_q(q, T->tmp.p, T->tmp.n), kaot_kind(j));
      if ((rc = kaot_jstring(j, NULL))) return rc;
    }
    if (rc) return rc;
  }
}

KAOT_FN int kaot_by_offset(const void* a, const void* b) {
  const kaot_entry *x = *(const kaot_entry* const*)a, *y = *(const kaot_entry* const*)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}
KAOT_FN int kaot_by_name(const void* a, const void* b) {
  const kaot_entry *x = *(const kaot_entry* const*)a, *y = *(const kaot_entry* const*)b;
  int r = memcmp(x->name, y->name, x->name_len < y->name_len ? x->name_len : y->name_len);
  return r ? r : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Where the bytes come from: a file (fd) or memory (the embedded weights). */
typedef struct {
  int fd;
  const unsigned char* mem;
  uint64_t size;
  const char* what;
} kaot_src;

KAOT_FN int kaot_read(const kaot_src* s, uint64_t off, void* dst, uint64_t n) {
  unsigned char* d = (unsigned char*)dst;
  if (s->mem) {
    if (n) memcpy(d, s->mem + off, (size_t)n);
    return 0;
  }
  while (n > 0) {
    ssize_t r = pread(s->fd, d, n > (1u << 30) ? (1u << 30) : (size_t)n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      char eb[128];
      return kaot_fail(KILN_AOT_E_IO, "%s: %s", s->what, r < 0 ? KAOT_STRERROR(errno, eb) : "unexpected end of file (was it changed while being read?)");
    }
    d += r, off += (uint64_t)r, n -= (uint64_t)r;
  }
  return 0;
}

/* Reads every parameter from `src` into fresh buffers; only when all of them are read and valid do
 * they replace the context's parameters. */
KAOT_FN int kaot_load(kiln_aot_context* c, const kaot_src* src) {
  const kiln_aot_program* p = KAOT_BASE(c)->p;
  const char* what = src->what;
  unsigned char len8[8];
  uint64_t n = 0, data, expected = 0;
  kaot_json j;
  kaot_tab T;
  kaot_entry **byoff = NULL, **byname = NULL;
  void** fresh = NULL;
  char q[256], t1[256], t2[256];
  int rc = 0;
  memset(&j, 0, sizeof j);
  memset(&T, 0, sizeof T);
  if (src->size < 8)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: not a safetensors file: %" PRIu64 " bytes, shorter than the 8-byte header length", what, src->size);
  if ((rc = kaot_read(src, 0, len8, 8))) return rc;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len8[i];
  if (n > 100000000)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: header length %" PRIu64 " exceeds the limit of 100000000 bytes (not a safetensors file?)", what, n);
  if (n > src->size - 8)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: header length %" PRIu64 " exceeds the %" PRIu64 " bytes after the length field (file truncated?)",
                     what, n, src->size - 8);
  data = 8 + n;
  j.s = (unsigned char*)malloc((size_t)n + 1);
  j.n = (size_t)n;
  j.what = what;
  if (!j.s || kaot_put(&j.pool, "", 0) || kaot_put(&T.names, "", 0) || kaot_put(&T.tmp, "", 0)) KAOT_TRY(kaot_oom(what));
  KAOT_TRY(kaot_read(src, 8, (void*)j.s, n));
  if (n == 0 || j.s[0] != '{') KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: the header must be a json object starting with '{'", what));
  KAOT_TRY(kaot_jvalue(&j, 0));
  kaot_ws(&j);
  if (j.pos != j.n) KAOT_TRY(kaot_jfail(&j, "unexpected characters after the value"));
  KAOT_TRY(kaot_parse_header(&j, &T));

  /* The tensors must tile the data buffer: sorted by offset, each begins where the previous ends. */
  byoff = (kaot_entry**)malloc((T.n + 1) * sizeof(kaot_entry*));
  byname = (kaot_entry**)malloc((T.n + 1) * sizeof(kaot_entry*));
  fresh = (void**)calloc((size_t)p->num_params + 1, sizeof(void*));
  if (!byoff || !byname || !fresh) KAOT_TRY(kaot_oom(what));
  for (size_t i = 0; i < T.n; ++i) {
    T.e[i].name = T.names.p + T.e[i].name_off;
    byoff[i] = byname[i] = &T.e[i];
  }
  qsort(byoff, T.n, sizeof(kaot_entry*), kaot_by_offset);
  for (size_t i = 0; i < T.n; ++i) {
    const kaot_entry* e = byoff[i];
    if (e->end > src->size - data)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the %" PRIu64 "-byte data buffer",
                         what, kaot_q(q, e->name, e->name_len), e->begin, e->end, src->size - data));
    if (e->begin < expected)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor %s ([%" PRIu64 ", %" PRIu64 "])",
                         what, kaot_q(q, e->name, e->name_len), e->begin, e->end, kaot_q(t1, byoff[i - 1]->name, byoff[i - 1]->name_len),
                         byoff[i - 1]->begin, byoff[i - 1]->end));
    if (e->begin != expected)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] leave a gap: bytes [%" PRIu64 ", %" PRIu64 ") belong to no tensor",
                         what, kaot_q(q, e->name, e->name_len), e->begin, e->end, expected, e->begin));
    expected = e->end;
  }
  if (expected != src->size - data)
    KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: the data buffer has %" PRIu64 " bytes but the tensors cover only %" PRIu64, what,
                       src->size - data, expected));

  /* Every parameter, with exactly its type; other tensors are ignored. */
  qsort(byname, T.n, sizeof(kaot_entry*), kaot_by_name);
  for (int i = 0; i < p->num_params; ++i) {
    const kiln_aot_tensor* t = &p->params[i];
    kaot_entry key, *kp = &key, **found;
    key.name = t->name;
    key.name_len = strlen(t->name);
    found = T.n ? (kaot_entry**)bsearch(&kp, byname, T.n, sizeof(kaot_entry*), kaot_by_name) : NULL;
    if (!found)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: no tensor %s: parameter %d of %s (%s) is missing", what,
                         kaot_q(q, t->name, key.name_len), i, p->name, kaot_type(t1, kaot_dtype_names[t->dtype], t->rank, t->shape)));
    const kaot_entry* e = *found;
    bool same = e->dtype == t->dtype && e->rank == t->rank;
    for (int d = 0; same && d < t->rank; ++d) same = T.dims[e->shape_off + (size_t)d] == t->shape[d];
    if (!same)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s is %s, expected %s (parameter %d of %s)", what, kaot_q(q, t->name, key.name_len),
                         kaot_type(t1, kaot_dtype_names[e->dtype], e->rank, T.dims + e->shape_off),
                         kaot_type(t2, kaot_dtype_names[t->dtype], t->rank, t->shape), i, p->name));
    if (!(fresh[i] = kaot_alloc(t->bytes))) KAOT_TRY(kaot_oom(what));
    KAOT_TRY(kaot_read(src, data + e->begin, fresh[i], (uint64_t)t->bytes));
    for (int64_t k = 0; t->dtype == KILN_AOT_BOOL && k < t->bytes; ++k)
      if (((unsigned char*)fresh[i])[k] > 1)
        KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s: BOOL element %" PRId64 " has byte value %d (must be 0 or 1)", what,
                           kaot_q(q, t->name, key.name_len), k, ((unsigned char*)fresh[i])[k]));
  }
  KAOT_TRY(kaot_target_take_params(c, fresh));
done:
  for (int i = 0; fresh && i < p->num_params; ++i) kaot_free(fresh[i]);
  free(fresh), free(byoff), free(byname), free((void*)j.s), free(j.pool.p), free(j.keys);
  free(T.e), free(T.dims), free(T.names.p), free(T.tmp.p);
  return rc;
}

KAOT_FN int kaot_load_file(kiln_aot_context* c, const char* path) {
  char what[1100], eb[128];
  struct stat st;
  int rc, fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return kaot_fail(KILN_AOT_E_IO, "cannot open weights file '%s': %s", path, KAOT_STRERROR(errno, eb));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bool failed = fstat(fd, &st) != 0;
    rc = kaot_fail(KILN_AOT_E_IO, "cannot read weights file '%s': %s", path, failed ? KAOT_STRERROR(errno, eb) : "not a regular file");
    close(fd);
    return rc;
  }
  snprintf(what, sizeof what, "'%s'", path);
  kaot_src s = {fd, NULL, (uint64_t)st.st_size, what};
  rc = kaot_load(c, &s);
  close(fd);
  return rc;
}

/* ---------------------------------------------------------------- safetensors: writing */
/* As kiln's serializeSafetensors without metadata: tensors by element size (largest first), then
 * by name; compact JSON; the header padded with spaces to a multiple of 8 bytes. */

typedef struct { const kiln_aot_tensor* t; int index; } kaot_sorted;
KAOT_FN int kaot_save_order(const void* a, const void* b) {
  const kaot_sorted *x = (const kaot_sorted*)a, *y = (const kaot_sorted*)b;
  int sx = kaot_dtype_sizes[x->t->dtype], sy = kaot_dtype_sizes[y->t->dtype], r = strcmp(x->t->name, y->t->name);
  return sx != sy ? (sx > sy ? -1 : 1) : r ? r : x->index - y->index;
}

KAOT_FN int kaot_write_all(int fd, const void* buf, uint64_t n) {
  const unsigned char* s = (const unsigned char*)buf;
  while (n > 0) {
    ssize_t w = write(fd, s, n > (1u << 30) ? (1u << 30) : (size_t)n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    s += w, n -= (uint64_t)w;
  }
  return 0;
}

KAOT_FN int kiln_aot_save_weights(const kiln_aot_context* c, const char* path) {
  static atomic_uint counter;
  static const char digits62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_save_weights: the context is NULL");
  if (!path) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_save_weights: path is NULL", KAOT_CBASE(c)->p->name);
  const kiln_aot_program* p = KAOT_CBASE(c)->p;
  kaot_sorted* order = (kaot_sorted*)malloc(((size_t)p->num_params + 1) * sizeof(kaot_sorted));
  kaot_buf h = {0, 0, 0}, pb = {0, 0, 0};
  char num[128], eb[128], *tmp = (char*)malloc(strlen(path) + 16);
  const char* step = "write failed";
  uint64_t offset = 0;
  int rc = 0, err = 0, fd = -1;
  bool oom = !order || !tmp || kaot_puts(&h, "{");
  for (int i = 0; !oom && i < p->num_params; ++i) order[i] = (kaot_sorted){&p->params[i], i};
  if (!oom) qsort(order, (size_t)p->num_params, sizeof(kaot_sorted), kaot_save_order);
  for (int i = 0; !oom && i < p->num_params; ++i) {
    const kiln_aot_tensor* t = order[i].t;
    oom = (i && kaot_puts(&h, ",")) || kaot_put_quoted(&h, t->name, strlen(t->name)) || kaot_puts(&h, ":{\"dtype\":\"") ||
          kaot_puts(&h, kaot_st_names[t->dtype]) || kaot_puts(&h, "\",\"shape\":[");
    for (int d = 0; !oom && d < t->rank; ++d) {
      snprintf(num, sizeof num, d ? ",%" PRId64 : "%" PRId64, t->shape[d]);
      oom = kaot_puts(&h, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset, offset + (uint64_t)t->bytes);
    oom = oom || kaot_puts(&h, num);
    offset += (uint64_t)t->bytes;
  }
  oom = oom || kaot_puts(&h, "}");
  while (!oom && h.n % 8) oom = kaot_puts(&h, " ");
  if (oom) {
    rc = kaot_fail(KILN_AOT_E_MEMORY, "cannot write '%s': out of memory", path);
    goto done;
  }
  /* A temporary file beside `path`, then renamed over it: a failed write leaves `path` intact. */
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    uint64_t r = (uint64_t)kaot_now_ns() * 0x9E3779B97F4A7C15u ^ ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&counter, 1) * 0xBF58476D1CE4E5B9u;
    size_t n = (size_t)sprintf(tmp, "%s.tmp.", path);
    for (int k = 0; k < 6; ++k, r /= 62) tmp[n++] = digits62[r % 62];
    tmp[n] = 0;
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) {
      rc = kaot_fail(KILN_AOT_E_IO, "cannot write '%s': cannot create '%s': %s", path, tmp, KAOT_STRERROR(errno, eb));
      goto done;
    }
  }
  if (fd < 0) {
    rc = kaot_fail(KILN_AOT_E_IO, "cannot write '%s': no free temporary file name next to it", path);
    goto done;
  }
  unsigned char len8[8];
  for (int i = 0; i < 8; ++i) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
  err = kaot_write_all(fd, len8, 8);
  if (!err) err = kaot_write_all(fd, h.p, h.n);
  for (int i = 0; !err && !rc && i < p->num_params; ++i) {
    const void* bytes = kaot_target_param_bytes(c, order[i].index, &pb, &rc);
    if (bytes) err = kaot_write_all(fd, bytes, (uint64_t)order[i].t->bytes);
  }
  if (rc) { /* the parameters could not be read (a device error): no file */
    close(fd);
    unlink(tmp);
    goto done;
  }
  if (!err && fsync(fd) != 0) err = errno, step = "fsync failed";
  if (close(fd) != 0 && !err) err = errno, step = "close failed";
  if (!err && rename(tmp, path) != 0) err = errno, step = "rename failed";
  if (err) {
    unlink(tmp);
    rc = kaot_fail(KILN_AOT_E_IO, "cannot write '%s': %s: %s", path, step, KAOT_STRERROR(err, eb));
  }
done:
  free(order), free(tmp), free(h.p), free(pb.p);
  return rc;
}
