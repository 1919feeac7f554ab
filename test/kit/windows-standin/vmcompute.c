/*
 * Test-only vmcompute.dll: HNSCall (the V1 HNS entry point hcsshim uses for an endpoint's host attach), forwarded
 * to the stand-in server, which answers HNS's {"Success":..} response document.
 */
#include "common.h"
#include <objbase.h>

EXPORT HRESULT WINAPI HNSCall(PCWSTR method, PCWSTR path, PCWSTR request, PWSTR *response) {
  args_t a = {0};
  reply r;
  HRESULT hr;
  arg_wstr(&a, "method", method);
  arg_wstr(&a, "path", path);
  arg_wstr(&a, "request", request);
  if (!response) arg_local(&a, 0x80004003ul /* E_POINTER */, "null response pointer");
  else *response = NULL;
  if (standin_call("HNSCall", &a, &r)) {
    sb_free(&a.b);
    if (response) *response = cotask_wide_of("{\"Success\":false,\"Error\":\"stand-in server unreachable\"}");
    return STANDIN_UNREACHABLE_HR;
  }
  hr = (HRESULT)r.code;
  if (response && r.out) *response = cotask_wide_of(r.out);
  reply_free(&r);
  sb_free(&a.b);
  return hr;
}
