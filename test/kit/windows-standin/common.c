/* The stand-in DLLs' side of the wire: one TCP connection per call, a JSON line out, a few text lines back. */
#include "common.h"
#include <objbase.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    b->p = realloc(b->p, cap);
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

void sb_fmt(sbuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void sb_json(sbuf *b, const char *s) {
  if (!s) {
    sb_str(b, "null");
    return;
  }
  sb_put(b, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      sb_put(b, e, 2);
    } else if (c < 0x20) {
      sb_fmt(b, "\\u%04x", c);
    } else {
      sb_put(b, (const char *)&c, 1);
    }
  }
  sb_put(b, "\"", 1);
}

void sb_jsonw(sbuf *b, const WCHAR *w) {
  char *s = utf8_of(w);
  sb_json(b, s);
  free(s);
}

void sb_free(sbuf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

static void arg_name(args_t *a, const char *name) {
  if (a->b.len) sb_put(&a->b, ",", 1);
  sb_json(&a->b, name);
  sb_put(&a->b, ":", 1);
}

void arg_str(args_t *a, const char *name, const char *utf8) {
  arg_name(a, name);
  sb_json(&a->b, utf8);
}

void arg_wstr(args_t *a, const char *name, const WCHAR *w) {
  arg_name(a, name);
  sb_jsonw(&a->b, w);
}

void arg_num(args_t *a, const char *name, long long v) {
  arg_name(a, name);
  sb_fmt(&a->b, "%lld", v);
}

/* 64-bit values (LUIDs) as decimal strings: JSON numbers lose precision past 2^53. */
void arg_u64(args_t *a, const char *name, unsigned long long v) {
  char t[32];
  snprintf(t, sizeof t, "%llu", v);
  arg_str(a, name, t);
}

void arg_local(args_t *a, unsigned long code, const char *why) {
  if (a->refused) return; /* the first reason wins, as the real call would stop there */
  a->refused = 1;
  arg_num(a, "local", (long long)code);
  arg_str(a, "why", why);
}

char *utf8_of(const WCHAR *w) {
  if (!w) return NULL;
  int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
  char *s = malloc(n > 0 ? n : 1);
  if (n > 0) WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL);
  else s[0] = 0;
  return s;
}

WCHAR *wide_of(const char *s) {
  int n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
  WCHAR *w = malloc(sizeof(WCHAR) * (n > 0 ? n : 1));
  if (n > 0) MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n);
  else w[0] = 0;
  return w;
}

WCHAR *cotask_wide_of(const char *s) {
  int n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
  if (n <= 0) n = 1;
  WCHAR *w = CoTaskMemAlloc(sizeof(WCHAR) * n);
  if (!w) return NULL;
  if (MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n) <= 0) w[0] = 0;
  return w;
}

void addr_text(int v6, const unsigned char *b, char *out) {
  if (!v6) {
    sprintf(out, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
    return;
  }
  out[0] = 0;
  for (int i = 0; i < 8; i++) sprintf(out + strlen(out), i ? ":%x" : "%x", (b[2 * i] << 8) | b[2 * i + 1]);
}

int hex_bytes(const char *hex, unsigned char *out, int max) {
  int n = 0;
  while (hex[0] && hex[1]) {
    unsigned v;
    if (n >= max || sscanf(hex, "%2x", &v) != 1) return -1;
    out[n++] = (unsigned char)v;
    hex += 2;
  }
  return hex[0] ? -1 : n;
}

static int send_all(SOCKET s, const char *p, size_t n) {
  while (n) {
    int k = send(s, p, n > 65536 ? 65536 : (int)n, 0);
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static int parse_reply(reply *r) {
  char *line = r->raw, *end;
  int first = 1, cap = 0;
  while (line && *line) {
    end = strchr(line, '\n');
    if (end) *end = 0;
    if (first) {
      char *stop;
      r->code = strtoul(line, &stop, 10);
      if (stop == line) return -1;
      first = 0;
    } else if (line[0] && line[1] == ' ') {
      char *v = line + 2;
      if (line[0] == 'O') r->out = v;
      else if (line[0] == 'E') r->err = v;
      else if (line[0] == 'I') r->id = v;
      else if (line[0] == 'R') {
        if (r->nrows == cap) {
          cap = cap ? cap * 2 : 16;
          r->rows = realloc(r->rows, sizeof(char *) * cap);
        }
        r->rows[r->nrows++] = v;
      }
    }
    line = end ? end + 1 : NULL;
  }
  return first ? -1 : 0;
}

int standin_call(const char *fn, args_t *args, reply *r) {
  char port[16];
  WSADATA wsa;
  sbuf req = {0}, got = {0};
  int rc = -1;
  memset(r, 0, sizeof *r);
  DWORD n = GetEnvironmentVariableA("BS_STANDIN_PORT", port, sizeof port);
  if (n == 0 || n >= sizeof port) {
    OutputDebugStringA("stand-in: BS_STANDIN_PORT is not set\n");
    return -1;
  }
  if (WSAStartup(MAKEWORD(2, 2), &wsa)) return -1;
  SOCKET s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  if (s != INVALID_SOCKET) {
    struct sockaddr_in sa;
    DWORD timeout = 60000;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((u_short)atoi(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, (const char *)&timeout, sizeof timeout);
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) == 0) {
      sb_str(&req, "{\"fn\":");
      sb_json(&req, fn);
      sb_fmt(&req, ",\"pid\":%lu,\"args\":{", (unsigned long)GetCurrentProcessId());
      if (args && args->b.p) sb_str(&req, args->b.p);
      sb_str(&req, "}}\n");
      if (send_all(s, req.p, req.len) == 0) {
        char buf[4096];
        int k;
        shutdown(s, SD_SEND);
        while ((k = recv(s, buf, sizeof buf, 0)) > 0) sb_put(&got, buf, (size_t)k);
        if (k == 0 && got.p) {
          r->raw = got.p;
          got.p = NULL;
          rc = parse_reply(r);
        }
      }
    }
    closesocket(s);
  }
  WSACleanup();
  sb_free(&req);
  sb_free(&got);
  if (rc) reply_free(r);
  return rc;
}

void reply_free(reply *r) {
  free(r->raw);
  free(r->rows);
  memset(r, 0, sizeof *r);
}

int split_tabs(char *line, char **fields, int max) {
  int n = 0;
  while (n < max) {
    fields[n++] = line;
    char *t = strchr(line, '\t');
    if (!t) break;
    *t = 0;
    line = t + 1;
  }
  return n;
}
