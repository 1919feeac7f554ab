/* Shared by the stand-in DLLs (test only): a one-shot TCP call to the stand-in server, UTF-8/UTF-16 and JSON text. */
#ifndef BS_STANDIN_COMMON_H
#define BS_STANDIN_COMMON_H

/* Windows 10 headers, so netioapi.h declares the real row layouts. */
#define _WIN32_WINNT 0x0A00
#define WIN32_LEAN_AND_MEAN
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <stddef.h>

#define EXPORT __declspec(dllexport)

/* HRESULT_FROM_WIN32(RPC_S_SERVER_UNAVAILABLE): what a call returns when the server cannot be reached. */
#define STANDIN_UNREACHABLE_HR ((HRESULT)0x800706BAL)
#define STANDIN_UNREACHABLE_WIN32 1722u

typedef struct {
  char *p;
  size_t len, cap;
} sbuf;

void sb_put(sbuf *b, const char *s, size_t n);
void sb_str(sbuf *b, const char *s);
void sb_fmt(sbuf *b, const char *fmt, ...);
/* A JSON string literal of UTF-8 text, or null for NULL. */
void sb_json(sbuf *b, const char *utf8);
void sb_jsonw(sbuf *b, const WCHAR *w);
void sb_free(sbuf *b);

/* JSON object members, comma-separated as they are added. */
typedef struct {
  sbuf b;
  int refused;
} args_t;
void arg_str(args_t *a, const char *name, const char *utf8);
void arg_wstr(args_t *a, const char *name, const WCHAR *w);
void arg_num(args_t *a, const char *name, long long v);
void arg_u64(args_t *a, const char *name, unsigned long long v);
/* A refusal decided in the DLL (bad handle, null pointer): the server records it and answers with `code`. */
void arg_local(args_t *a, unsigned long code, const char *why);

char *utf8_of(const WCHAR *w);          /* malloc'd; NULL for NULL */
WCHAR *wide_of(const char *s);          /* malloc'd */
WCHAR *cotask_wide_of(const char *s);   /* CoTaskMemAlloc'd, as HCN hands out strings */

/* Address bytes (4 or 16) as text: dotted quad, or eight hex groups. */
void addr_text(int v6, const unsigned char *bytes, char *out);
/* Hex text to bytes; the number of bytes, or -1. */
int hex_bytes(const char *hex, unsigned char *out, int max);

typedef struct {
  unsigned long code;
  char *out, *err, *id;
  char **rows;
  int nrows;
  char *raw;
} reply;

/* Sends {"fn":..,"pid":..,"args":{..}} to 127.0.0.1:%BS_STANDIN_PORT%; 0 when the server answered. */
int standin_call(const char *fn, args_t *args, reply *r);
void reply_free(reply *r);
/* Splits a reply row at tabs in place; the number of fields. */
int split_tabs(char *line, char **fields, int max);

#endif
