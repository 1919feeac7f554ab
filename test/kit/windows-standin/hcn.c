/*
 * Test-only computenetwork.dll: the HCN exports with their real signatures, each forwarded to the stand-in server
 * (test/kit/windows-standin/server.ts), which keeps the objects and HCN's rules. Handles live here: a small block per
 * open object, kept on a list so that a closed, foreign or wrong-kind handle is refused (E_HANDLE) without reading
 * freed memory.
 */
#include "common.h"
#include <objbase.h>
#include <computenetwork.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANDLE_MAGIC 0x48434e48u /* "HNCH" */
#define HR_E_HANDLE 0x80070006ul
#define HR_E_POINTER 0x80004003ul

enum { K_NETWORK, K_ENDPOINT, K_NAMESPACE };
static const char *const KIND[] = {"Network", "Endpoint", "Namespace"};

typedef struct hcn_obj {
  unsigned magic;
  int kind;
  char id[40];
  struct hcn_obj *next;
} hcn_obj;

static SRWLOCK lock = SRWLOCK_INIT;
static hcn_obj *live;

static hcn_obj *find_live(void *h, int kind) {
  hcn_obj *o, *found = NULL;
  AcquireSRWLockShared(&lock);
  for (o = live; o; o = o->next)
    if (o == h) break;
  if (o && o->magic == HANDLE_MAGIC && o->kind == kind) found = o;
  ReleaseSRWLockShared(&lock);
  return found;
}

static hcn_obj *new_obj(int kind, const char *id) {
  hcn_obj *o = calloc(1, sizeof *o);
  o->magic = HANDLE_MAGIC;
  o->kind = kind;
  lstrcpynA(o->id, id, sizeof o->id);
  AcquireSRWLockExclusive(&lock);
  o->next = live;
  live = o;
  ReleaseSRWLockExclusive(&lock);
  return o;
}

static void drop_obj(hcn_obj *h) {
  hcn_obj **p;
  AcquireSRWLockExclusive(&lock);
  for (p = &live; *p; p = &(*p)->next)
    if (*p == h) {
      *p = h->next;
      h->magic = 0;
      free(h);
      break;
    }
  ReleaseSRWLockExclusive(&lock);
}

static void guid_arg(args_t *a, const GUID *g) {
  char t[40];
  if (!g) {
    arg_local(a, HR_E_POINTER, "null GUID pointer");
    return;
  }
  snprintf(t, sizeof t, "%08lx-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", (unsigned long)g->Data1, g->Data2, g->Data3,
           g->Data4[0], g->Data4[1], g->Data4[2], g->Data4[3], g->Data4[4], g->Data4[5], g->Data4[6], g->Data4[7]);
  arg_str(a, "id", t);
}

static void handle_arg(args_t *a, void *h, int kind, const char *name) {
  hcn_obj *o = find_live(h, kind);
  if (o) arg_str(a, name, o->id);
  else arg_local(a, HR_E_HANDLE, h ? "handle is closed, foreign or of another kind" : "null handle");
}

/* Runs the call; the out-strings are CoTaskMemAlloc'd copies of the server's (the caller frees them). */
static HRESULT finish(const char *fn, args_t *a, PWSTR *out, PWSTR *err, char *id_out) {
  reply r;
  HRESULT hr;
  if (out) *out = NULL;
  if (err) *err = NULL;
  if (standin_call(fn, a, &r)) {
    sb_free(&a->b);
    if (err) *err = cotask_wide_of("{\"Success\":false,\"Error\":\"stand-in server unreachable\",\"ErrorCode\":2147944122}");
    return STANDIN_UNREACHABLE_HR;
  }
  hr = (HRESULT)r.code;
  if (out && r.out) *out = cotask_wide_of(r.out);
  if (err && r.err) *err = cotask_wide_of(r.err);
  if (id_out && r.id) lstrcpynA(id_out, r.id, 40);
  reply_free(&r);
  sb_free(&a->b);
  return hr;
}

static void fn_name(char *buf, const char *verb, int kind, const char *tail) {
  snprintf(buf, 64, "Hcn%s%s%s", verb, KIND[kind], tail);
}

static HRESULT do_enumerate(int kind, PCWSTR query, PWSTR *out, PWSTR *err) {
  args_t a = {0};
  char fn[64];
  fn_name(fn, "Enumerate", kind, "s");
  arg_wstr(&a, "query", query);
  if (!out) arg_local(&a, HR_E_POINTER, "null output pointer");
  return finish(fn, &a, out, err, NULL);
}

static HRESULT do_create(int kind, void *network, const GUID *id, PCWSTR settings, void **handle, PWSTR *err) {
  args_t a = {0};
  char fn[64], got[40] = "";
  HRESULT hr;
  fn_name(fn, "Create", kind, "");
  if (kind == K_ENDPOINT) handle_arg(&a, network, K_NETWORK, "network");
  guid_arg(&a, id);
  arg_wstr(&a, "settings", settings);
  if (!handle) arg_local(&a, HR_E_POINTER, "null handle pointer");
  else *handle = NULL;
  hr = finish(fn, &a, NULL, err, got);
  if (SUCCEEDED(hr) && handle && got[0]) *handle = new_obj(kind, got);
  return hr;
}

static HRESULT do_open(int kind, const GUID *id, void **handle, PWSTR *err) {
  args_t a = {0};
  char fn[64], got[40] = "";
  HRESULT hr;
  fn_name(fn, "Open", kind, "");
  guid_arg(&a, id);
  if (!handle) arg_local(&a, HR_E_POINTER, "null handle pointer");
  else *handle = NULL;
  hr = finish(fn, &a, NULL, err, got);
  if (SUCCEEDED(hr) && handle && got[0]) *handle = new_obj(kind, got);
  return hr;
}

static HRESULT do_modify(int kind, void *h, PCWSTR settings, PWSTR *err) {
  args_t a = {0};
  char fn[64];
  fn_name(fn, "Modify", kind, "");
  handle_arg(&a, h, kind, "handle");
  arg_wstr(&a, "settings", settings);
  return finish(fn, &a, NULL, err, NULL);
}

static HRESULT do_query(int kind, void *h, PCWSTR query, PWSTR *props, PWSTR *err) {
  args_t a = {0};
  char fn[64];
  fn_name(fn, "Query", kind, "Properties");
  handle_arg(&a, h, kind, "handle");
  arg_wstr(&a, "query", query);
  if (!props) arg_local(&a, HR_E_POINTER, "null output pointer");
  return finish(fn, &a, props, err, NULL);
}

static HRESULT do_delete(int kind, const GUID *id, PWSTR *err) {
  args_t a = {0};
  char fn[64];
  fn_name(fn, "Delete", kind, "");
  guid_arg(&a, id);
  return finish(fn, &a, NULL, err, NULL);
}

static HRESULT do_close(int kind, void *h) {
  args_t a = {0};
  char fn[64];
  HRESULT hr;
  hcn_obj *o = find_live(h, kind);
  fn_name(fn, "Close", kind, "");
  handle_arg(&a, h, kind, "handle");
  hr = finish(fn, &a, NULL, NULL, NULL);
  if (o) {
    drop_obj(o);
    return S_OK; /* closing is local: it succeeds even when the server is gone */
  }
  return hr;
}

EXPORT HRESULT WINAPI HcnEnumerateNetworks(PCWSTR q, PWSTR *out, PWSTR *err) { return do_enumerate(K_NETWORK, q, out, err); }
EXPORT HRESULT WINAPI HcnCreateNetwork(REFGUID id, PCWSTR s, PHCN_NETWORK h, PWSTR *err) { return do_create(K_NETWORK, NULL, id, s, h, err); }
EXPORT HRESULT WINAPI HcnOpenNetwork(REFGUID id, PHCN_NETWORK h, PWSTR *err) { return do_open(K_NETWORK, id, h, err); }
EXPORT HRESULT WINAPI HcnModifyNetwork(HCN_NETWORK h, PCWSTR s, PWSTR *err) { return do_modify(K_NETWORK, h, s, err); }
EXPORT HRESULT WINAPI HcnQueryNetworkProperties(HCN_NETWORK h, PCWSTR q, PWSTR *p, PWSTR *err) { return do_query(K_NETWORK, h, q, p, err); }
EXPORT HRESULT WINAPI HcnDeleteNetwork(REFGUID id, PWSTR *err) { return do_delete(K_NETWORK, id, err); }
EXPORT HRESULT WINAPI HcnCloseNetwork(HCN_NETWORK h) { return do_close(K_NETWORK, h); }

EXPORT HRESULT WINAPI HcnEnumerateEndpoints(PCWSTR q, PWSTR *out, PWSTR *err) { return do_enumerate(K_ENDPOINT, q, out, err); }
EXPORT HRESULT WINAPI HcnCreateEndpoint(HCN_NETWORK n, REFGUID id, PCWSTR s, PHCN_ENDPOINT h, PWSTR *err) { return do_create(K_ENDPOINT, n, id, s, h, err); }
EXPORT HRESULT WINAPI HcnOpenEndpoint(REFGUID id, PHCN_ENDPOINT h, PWSTR *err) { return do_open(K_ENDPOINT, id, h, err); }
EXPORT HRESULT WINAPI HcnModifyEndpoint(HCN_ENDPOINT h, PCWSTR s, PWSTR *err) { return do_modify(K_ENDPOINT, h, s, err); }
EXPORT HRESULT WINAPI HcnQueryEndpointProperties(HCN_ENDPOINT h, PCWSTR q, PWSTR *p, PWSTR *err) { return do_query(K_ENDPOINT, h, q, p, err); }
EXPORT HRESULT WINAPI HcnDeleteEndpoint(REFGUID id, PWSTR *err) { return do_delete(K_ENDPOINT, id, err); }
EXPORT HRESULT WINAPI HcnCloseEndpoint(HCN_ENDPOINT h) { return do_close(K_ENDPOINT, h); }

EXPORT HRESULT WINAPI HcnEnumerateNamespaces(PCWSTR q, PWSTR *out, PWSTR *err) { return do_enumerate(K_NAMESPACE, q, out, err); }
EXPORT HRESULT WINAPI HcnCreateNamespace(REFGUID id, PCWSTR s, PHCN_NAMESPACE h, PWSTR *err) { return do_create(K_NAMESPACE, NULL, id, s, h, err); }
EXPORT HRESULT WINAPI HcnOpenNamespace(REFGUID id, PHCN_NAMESPACE h, PWSTR *err) { return do_open(K_NAMESPACE, id, h, err); }
EXPORT HRESULT WINAPI HcnModifyNamespace(HCN_NAMESPACE h, PCWSTR s, PWSTR *err) { return do_modify(K_NAMESPACE, h, s, err); }
EXPORT HRESULT WINAPI HcnQueryNamespaceProperties(HCN_NAMESPACE h, PCWSTR q, PWSTR *p, PWSTR *err) { return do_query(K_NAMESPACE, h, q, p, err); }
EXPORT HRESULT WINAPI HcnDeleteNamespace(REFGUID id, PWSTR *err) { return do_delete(K_NAMESPACE, id, err); }
EXPORT HRESULT WINAPI HcnCloseNamespace(HCN_NAMESPACE h) { return do_close(K_NAMESPACE, h); }
