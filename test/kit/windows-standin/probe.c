/*
 * Test client for the stand-in DLLs: loads them from System32 by full path (as the product does) and runs a script,
 * one call per line, fields separated by tabs; prints one JSON line per call. "~" passes NULL for a string, GUID
 * or out-pointer. Handles are kept in named slots; "null" is a NULL handle and "foreign" a pointer HCN never gave.
 * `layout` prints sizes and offsets of the IP Helper structs as mingw's headers declare them.
 */
#include "common.h"
#include <iphlpapi.h>
#include <objbase.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef HRESULT(WINAPI *enum_fn)(PCWSTR, PWSTR *, PWSTR *);
typedef HRESULT(WINAPI *create_fn)(const GUID *, PCWSTR, void **, PWSTR *);
typedef HRESULT(WINAPI *create_ep_fn)(void *, const GUID *, PCWSTR, void **, PWSTR *);
typedef HRESULT(WINAPI *open_fn)(const GUID *, void **, PWSTR *);
typedef HRESULT(WINAPI *modify_fn)(void *, PCWSTR, PWSTR *);
typedef HRESULT(WINAPI *query_fn)(void *, PCWSTR, PWSTR *, PWSTR *);
typedef HRESULT(WINAPI *delete_fn)(const GUID *, PWSTR *);
typedef HRESULT(WINAPI *close_fn)(void *);
typedef HRESULT(WINAPI *hnscall_fn)(PCWSTR, PCWSTR, PCWSTR, PWSTR *);
typedef VOID(WINAPI *init_route_fn)(PMIB_IPFORWARD_ROW2);
typedef DWORD(WINAPI *route_fn)(const MIB_IPFORWARD_ROW2 *);
typedef DWORD(WINAPI *table_fn)(ADDRESS_FAMILY, PMIB_IPFORWARD_TABLE2 *);
typedef VOID(WINAPI *free_fn)(PVOID);
typedef VOID(WINAPI *init_if_fn)(PMIB_IPINTERFACE_ROW);
typedef DWORD(WINAPI *if_fn)(PMIB_IPINTERFACE_ROW);
typedef DWORD(WINAPI *alias_to_luid_fn)(const WCHAR *, PNET_LUID);
typedef DWORD(WINAPI *luid_to_alias_fn)(const NET_LUID *, PWSTR, SIZE_T);
typedef DWORD(WINAPI *luid_to_index_fn)(const NET_LUID *, PNET_IFINDEX);

static HMODULE hcn, vmc, iph;

static HMODULE load(const char *name) {
  char path[MAX_PATH];
  UINT n = GetSystemDirectoryA(path, MAX_PATH);
  snprintf(path + n, MAX_PATH - n, "\\%s", name);
  HMODULE m = LoadLibraryA(path);
  if (!m) {
    printf("{\"fatal\":\"LoadLibrary %s failed: %lu\"}\n", name, GetLastError());
    exit(2);
  }
  return m;
}

static void *need(HMODULE m, const char *name) {
  void *p = (void *)GetProcAddress(m, name);
  if (!p) {
    printf("{\"fatal\":\"missing export %s\"}\n", name);
    exit(2);
  }
  return p;
}

static struct {
  char name[32];
  void *h;
} slots[128];
static int nslots;
static int foreign_block[16];

static void **slot(const char *name) {
  if (!strcmp(name, "~")) return NULL;
  for (int i = 0; i < nslots; i++)
    if (!strcmp(slots[i].name, name)) return &slots[i].h;
  if (nslots == 128) exit(3);
  lstrcpynA(slots[nslots].name, name, 32);
  slots[nslots].h = NULL;
  return &slots[nslots++].h;
}

static void *handle(const char *name) {
  if (!strcmp(name, "null")) return NULL;
  if (!strcmp(name, "foreign")) return foreign_block;
  return *slot(name);
}

static WCHAR *wstr(const char *s) { return strcmp(s, "~") ? wide_of(s) : NULL; }

static GUID *guid(const char *s, GUID *g) {
  unsigned long d1;
  unsigned d2, d3, b[8];
  if (!strcmp(s, "~")) return NULL;
  memset(g, 0, sizeof *g);
  if (sscanf(s, "%8lx-%4x-%4x-%2x%2x-%2x%2x%2x%2x%2x%2x", &d1, &d2, &d3, &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6],
             &b[7]) == 11) {
    g->Data1 = d1;
    g->Data2 = (USHORT)d2;
    g->Data3 = (USHORT)d3;
    for (int i = 0; i < 8; i++) g->Data4[i] = (UCHAR)b[i];
  }
  return g;
}

static ADDRESS_FAMILY family(const char *s) {
  if (!strcmp(s, "4")) return AF_INET;
  if (!strcmp(s, "6")) return AF_INET6;
  return (ADDRESS_FAMILY)atoi(s);
}

/* "text" into a SOCKADDR_INET of `fam`; "-" leaves it unspecified (family 0). */
static void sockaddr_set(SOCKADDR_INET *a, ADDRESS_FAMILY fam, const char *text) {
  memset(a, 0, sizeof *a);
  if (!strcmp(text, "-")) return;
  a->si_family = fam;
  if (fam == AF_INET6) inet_pton(AF_INET6, text, &a->Ipv6.sin6_addr);
  else inet_pton(AF_INET, text, &a->Ipv4.sin_addr);
}

static void sockaddr_print(sbuf *b, const SOCKADDR_INET *a) {
  char t[64] = "";
  if (a->si_family == AF_INET) addr_text(0, (const unsigned char *)&a->Ipv4.sin_addr, t);
  else if (a->si_family == AF_INET6) addr_text(1, (const unsigned char *)&a->Ipv6.sin6_addr, t);
  sb_json(b, t);
}

static void route_print(sbuf *b, const MIB_IPFORWARD_ROW2 *r) {
  sb_fmt(b, "{\"family\":%u,\"luid\":\"%llu\",\"index\":%lu,\"destination\":", r->DestinationPrefix.Prefix.si_family,
         (unsigned long long)r->InterfaceLuid.Value, (unsigned long)r->InterfaceIndex);
  sockaddr_print(b, &r->DestinationPrefix.Prefix);
  sb_fmt(b, ",\"prefixLength\":%u,\"nextHopFamily\":%u,\"nextHop\":", r->DestinationPrefix.PrefixLength, r->NextHop.si_family);
  sockaddr_print(b, &r->NextHop);
  sb_fmt(b,
         ",\"sitePrefixLength\":%u,\"validLifetime\":%lu,\"preferredLifetime\":%lu,\"metric\":%lu,\"protocol\":%d,"
         "\"loopback\":%u,\"autoconfigureAddress\":%u,\"publish\":%u,\"immortal\":%u,\"age\":%lu,\"origin\":%d}",
         r->SitePrefixLength, (unsigned long)r->ValidLifetime, (unsigned long)r->PreferredLifetime, (unsigned long)r->Metric,
         (int)r->Protocol, r->Loopback, r->AutoconfigureAddress, r->Publish, r->Immortal, (unsigned long)r->Age, (int)r->Origin);
}

static void if_print(sbuf *b, const MIB_IPINTERFACE_ROW *r) {
  sb_fmt(b, "{\"family\":%u,\"luid\":\"%llu\",\"index\":%lu,\"forwarding\":%u,\"sitePrefixLength\":%lu,\"metric\":%lu,\"nlMtu\":%lu}",
         r->Family, (unsigned long long)r->InterfaceLuid.Value, (unsigned long)r->InterfaceIndex, r->ForwardingEnabled,
         (unsigned long)r->SitePrefixLength, (unsigned long)r->Metric, (unsigned long)r->NlMtu);
}

static void out_str(sbuf *b, const char *name, PWSTR s) {
  sb_fmt(b, ",\"%s\":", name);
  sb_jsonw(b, s);
  if (s) CoTaskMemFree(s);
}

/* Route rows from script fields: family luid index dest/len nexthop metric protocol. */
static void route_from(MIB_IPFORWARD_ROW2 *row, char **f) {
  ADDRESS_FAMILY fam = family(f[0]);
  char dest[80];
  lstrcpynA(dest, f[3], sizeof dest);
  char *slash = strchr(dest, '/');
  if (slash) *slash = 0;
  row->InterfaceLuid.Value = _strtoui64(f[1], NULL, 10);
  row->InterfaceIndex = strtoul(f[2], NULL, 10);
  sockaddr_set(&row->DestinationPrefix.Prefix, fam, dest);
  row->DestinationPrefix.PrefixLength = (UINT8)(slash ? atoi(slash + 1) : 0);
  sockaddr_set(&row->NextHop, fam, f[4]);
  if (strcmp(f[5], "-")) row->Metric = strtoul(f[5], NULL, 10);
  if (strcmp(f[6], "-")) row->Protocol = (NL_ROUTE_PROTOCOL)atoi(f[6]);
}

#define FIELD(S, F) sb_fmt(&b, "%s\"%s\":%u", first ? "" : ",", #F, (unsigned)offsetof(S, F)), first = 0
#define STRUCT_START(S) sb_fmt(&b, "%s\"%s\":{\"size\":%u,\"align\":%u,\"fields\":{", nstruct++ ? "," : "", #S, (unsigned)sizeof(S), (unsigned)__alignof__(S)), first = 1
#define STRUCT_END() sb_str(&b, "}}")

static void layout(void) {
  sbuf b = {0};
  int first, nstruct = 0;
  sb_str(&b, "{\"fn\":\"layout\",\"layout\":{");
  STRUCT_START(NET_LUID);
  FIELD(NET_LUID, Value);
  STRUCT_END();
  STRUCT_START(SOCKADDR_IN);
  FIELD(SOCKADDR_IN, sin_family);
  FIELD(SOCKADDR_IN, sin_port);
  FIELD(SOCKADDR_IN, sin_addr);
  FIELD(SOCKADDR_IN, sin_zero);
  STRUCT_END();
  STRUCT_START(SOCKADDR_IN6);
  FIELD(SOCKADDR_IN6, sin6_family);
  FIELD(SOCKADDR_IN6, sin6_port);
  FIELD(SOCKADDR_IN6, sin6_flowinfo);
  FIELD(SOCKADDR_IN6, sin6_addr);
  FIELD(SOCKADDR_IN6, sin6_scope_id);
  STRUCT_END();
  STRUCT_START(SOCKADDR_INET);
  FIELD(SOCKADDR_INET, Ipv4);
  FIELD(SOCKADDR_INET, Ipv6);
  FIELD(SOCKADDR_INET, si_family);
  STRUCT_END();
  STRUCT_START(IP_ADDRESS_PREFIX);
  FIELD(IP_ADDRESS_PREFIX, Prefix);
  FIELD(IP_ADDRESS_PREFIX, PrefixLength);
  STRUCT_END();
  STRUCT_START(MIB_IPFORWARD_ROW2);
  FIELD(MIB_IPFORWARD_ROW2, InterfaceLuid);
  FIELD(MIB_IPFORWARD_ROW2, InterfaceIndex);
  FIELD(MIB_IPFORWARD_ROW2, DestinationPrefix);
  FIELD(MIB_IPFORWARD_ROW2, DestinationPrefix.Prefix);
  FIELD(MIB_IPFORWARD_ROW2, DestinationPrefix.PrefixLength);
  FIELD(MIB_IPFORWARD_ROW2, NextHop);
  FIELD(MIB_IPFORWARD_ROW2, SitePrefixLength);
  FIELD(MIB_IPFORWARD_ROW2, ValidLifetime);
  FIELD(MIB_IPFORWARD_ROW2, PreferredLifetime);
  FIELD(MIB_IPFORWARD_ROW2, Metric);
  FIELD(MIB_IPFORWARD_ROW2, Protocol);
  FIELD(MIB_IPFORWARD_ROW2, Loopback);
  FIELD(MIB_IPFORWARD_ROW2, AutoconfigureAddress);
  FIELD(MIB_IPFORWARD_ROW2, Publish);
  FIELD(MIB_IPFORWARD_ROW2, Immortal);
  FIELD(MIB_IPFORWARD_ROW2, Age);
  FIELD(MIB_IPFORWARD_ROW2, Origin);
  STRUCT_END();
  STRUCT_START(MIB_IPFORWARD_TABLE2);
  FIELD(MIB_IPFORWARD_TABLE2, NumEntries);
  FIELD(MIB_IPFORWARD_TABLE2, Table);
  STRUCT_END();
  STRUCT_START(MIB_IPINTERFACE_ROW);
  FIELD(MIB_IPINTERFACE_ROW, Family);
  FIELD(MIB_IPINTERFACE_ROW, InterfaceLuid);
  FIELD(MIB_IPINTERFACE_ROW, InterfaceIndex);
  FIELD(MIB_IPINTERFACE_ROW, MaxReassemblySize);
  FIELD(MIB_IPINTERFACE_ROW, InterfaceIdentifier);
  FIELD(MIB_IPINTERFACE_ROW, MinRouterAdvertisementInterval);
  FIELD(MIB_IPINTERFACE_ROW, MaxRouterAdvertisementInterval);
  FIELD(MIB_IPINTERFACE_ROW, AdvertisingEnabled);
  FIELD(MIB_IPINTERFACE_ROW, ForwardingEnabled);
  FIELD(MIB_IPINTERFACE_ROW, WeakHostSend);
  FIELD(MIB_IPINTERFACE_ROW, WeakHostReceive);
  FIELD(MIB_IPINTERFACE_ROW, UseAutomaticMetric);
  FIELD(MIB_IPINTERFACE_ROW, UseNeighborUnreachabilityDetection);
  FIELD(MIB_IPINTERFACE_ROW, ManagedAddressConfigurationSupported);
  FIELD(MIB_IPINTERFACE_ROW, OtherStatefulConfigurationSupported);
  FIELD(MIB_IPINTERFACE_ROW, AdvertiseDefaultRoute);
  FIELD(MIB_IPINTERFACE_ROW, RouterDiscoveryBehavior);
  FIELD(MIB_IPINTERFACE_ROW, DadTransmits);
  FIELD(MIB_IPINTERFACE_ROW, BaseReachableTime);
  FIELD(MIB_IPINTERFACE_ROW, RetransmitTime);
  FIELD(MIB_IPINTERFACE_ROW, PathMtuDiscoveryTimeout);
  FIELD(MIB_IPINTERFACE_ROW, LinkLocalAddressBehavior);
  FIELD(MIB_IPINTERFACE_ROW, LinkLocalAddressTimeout);
  FIELD(MIB_IPINTERFACE_ROW, ZoneIndices);
  FIELD(MIB_IPINTERFACE_ROW, SitePrefixLength);
  FIELD(MIB_IPINTERFACE_ROW, Metric);
  FIELD(MIB_IPINTERFACE_ROW, NlMtu);
  FIELD(MIB_IPINTERFACE_ROW, Connected);
  FIELD(MIB_IPINTERFACE_ROW, SupportsWakeUpPatterns);
  FIELD(MIB_IPINTERFACE_ROW, SupportsNeighborDiscovery);
  FIELD(MIB_IPINTERFACE_ROW, SupportsRouterDiscovery);
  FIELD(MIB_IPINTERFACE_ROW, ReachableTime);
  FIELD(MIB_IPINTERFACE_ROW, TransmitOffload);
  FIELD(MIB_IPINTERFACE_ROW, ReceiveOffload);
  FIELD(MIB_IPINTERFACE_ROW, DisableDefaultRoutes);
  STRUCT_END();
  sb_str(&b, "}}");
  puts(b.p);
  sb_free(&b);
}

static void run(int lineno, char *line) {
  char *f[12];
  int n = split_tabs(line, f, 12);
  const char *fn = f[0];
  PWSTR out = NULL, err = NULL, *errp = &err, *outp = &out;
  HRESULT hr = 0;
  sbuf b = {0};
  GUID g;
  /* Trailing flags: "noerr" / "noout" pass NULL for the error record / the output string. */
  while (n > 1 && (!strcmp(f[n - 1], "noerr") || !strcmp(f[n - 1], "noout"))) {
    if (!strcmp(f[n - 1], "noerr")) errp = NULL;
    else outp = NULL;
    n--;
  }
  sb_fmt(&b, "{\"i\":%d,\"fn\":", lineno);
  sb_json(&b, fn);
#define ARGS(k)                                                             \
  if (n < (k) + 1) {                                                        \
    printf("{\"i\":%d,\"fatal\":\"%s needs %d fields\"}\n", lineno, fn, k); \
    sb_free(&b);                                                            \
    return;                                                                 \
  }
  if (!strcmp(fn, "layout")) {
    sb_free(&b);
    layout();
    return;
  } else if (!strncmp(fn, "HcnEnumerate", 12)) {
    ARGS(1);
    WCHAR *q = wstr(f[1]);
    hr = ((enum_fn)need(hcn, fn))(q, outp, errp);
    free(q);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
    out_str(&b, "out", out);
  } else if (!strcmp(fn, "HcnCreateEndpoint")) {
    ARGS(4);
    WCHAR *s = wstr(f[3]);
    hr = ((create_ep_fn)need(hcn, fn))(handle(f[1]), guid(f[2], &g), s, slot(f[4]), errp);
    free(s);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
  } else if (!strncmp(fn, "HcnCreate", 9)) {
    ARGS(3);
    WCHAR *s = wstr(f[2]);
    hr = ((create_fn)need(hcn, fn))(guid(f[1], &g), s, slot(f[3]), errp);
    free(s);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
  } else if (!strncmp(fn, "HcnOpen", 7)) {
    ARGS(2);
    hr = ((open_fn)need(hcn, fn))(guid(f[1], &g), slot(f[2]), errp);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
  } else if (!strncmp(fn, "HcnModify", 9)) {
    ARGS(2);
    WCHAR *s = wstr(f[2]);
    hr = ((modify_fn)need(hcn, fn))(handle(f[1]), s, errp);
    free(s);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
  } else if (!strncmp(fn, "HcnQuery", 8)) {
    ARGS(2);
    WCHAR *q = wstr(f[2]);
    hr = ((query_fn)need(hcn, fn))(handle(f[1]), q, outp, errp);
    free(q);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
    out_str(&b, "out", out);
  } else if (!strncmp(fn, "HcnDelete", 9)) {
    ARGS(1);
    hr = ((delete_fn)need(hcn, fn))(guid(f[1], &g), errp);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
  } else if (!strncmp(fn, "HcnClose", 8)) {
    ARGS(1);
    hr = ((close_fn)need(hcn, fn))(handle(f[1]));
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
  } else if (!strcmp(fn, "HNSCall")) {
    ARGS(3);
    WCHAR *m = wstr(f[1]), *p = wstr(f[2]), *r = wstr(f[3]);
    hr = ((hnscall_fn)need(vmc, fn))(m, p, r, outp);
    free(m), free(p), free(r);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)hr);
    out_str(&b, "out", out);
    errp = NULL;
  } else if (!strcmp(fn, "InitializeIpForwardEntry")) {
    MIB_IPFORWARD_ROW2 row;
    memset(&row, 0xcc, sizeof row);
    ((init_route_fn)need(iph, fn))(&row);
    sb_str(&b, ",\"row\":");
    route_print(&b, &row);
    errp = NULL;
  } else if (!strcmp(fn, "CreateIpForwardEntry2") || !strcmp(fn, "DeleteIpForwardEntry2")) {
    MIB_IPFORWARD_ROW2 row;
    ARGS(7);
    ((init_route_fn)need(iph, "InitializeIpForwardEntry"))(&row);
    route_from(&row, f + 1);
    sb_fmt(&b, ",\"hr\":%lu", (unsigned long)((route_fn)need(iph, fn))(&row));
    errp = NULL;
  } else if (!strcmp(fn, "GetIpForwardTable2")) {
    PMIB_IPFORWARD_TABLE2 t = NULL;
    ARGS(1);
    DWORD rc = ((table_fn)need(iph, fn))(family(f[1]), &t);
    sb_fmt(&b, ",\"hr\":%lu,\"rows\":[", (unsigned long)rc);
    if (rc == NO_ERROR && t) {
      for (ULONG i = 0; i < t->NumEntries; i++) {
        if (i) sb_str(&b, ",");
        route_print(&b, &t->Table[i]);
      }
      ((free_fn)need(iph, "FreeMibTable"))(t);
    }
    sb_str(&b, "]");
    errp = NULL;
  } else if (!strcmp(fn, "FreeMibTable")) {
    void *p = malloc(64); /* a block this DLL never handed out */
    memset(p, 0, 64);
    ((free_fn)need(iph, fn))((unsigned char *)p + 32);
    free(p);
    errp = NULL;
  } else if (!strcmp(fn, "GetIpInterfaceEntry")) {
    MIB_IPINTERFACE_ROW row;
    ARGS(3);
    ((init_if_fn)need(iph, "InitializeIpInterfaceEntry"))(&row);
    row.Family = family(f[1]);
    row.InterfaceLuid.Value = _strtoui64(f[2], NULL, 10);
    row.InterfaceIndex = strtoul(f[3], NULL, 10);
    sb_fmt(&b, ",\"hr\":%lu,\"row\":", (unsigned long)((if_fn)need(iph, fn))(&row));
    if_print(&b, &row);
    errp = NULL;
  } else if (!strcmp(fn, "SetIpInterfaceEntry")) {
    MIB_IPINTERFACE_ROW row;
    ARGS(5);
    ((init_if_fn)need(iph, "InitializeIpInterfaceEntry"))(&row);
    row.Family = family(f[1]);
    row.InterfaceLuid.Value = _strtoui64(f[2], NULL, 10);
    row.InterfaceIndex = strtoul(f[3], NULL, 10);
    row.ForwardingEnabled = (BOOLEAN)atoi(f[4]);
    row.SitePrefixLength = strtoul(f[5], NULL, 10);
    sb_fmt(&b, ",\"hr\":%lu,\"row\":", (unsigned long)((if_fn)need(iph, fn))(&row));
    if_print(&b, &row);
    errp = NULL;
  } else if (!strcmp(fn, "SetForwarding")) {
    /* The usual read-modify-write: Initialize, Get, change ForwardingEnabled (and maybe SitePrefixLength), Set. */
    MIB_IPINTERFACE_ROW row;
    ARGS(4);
    ((init_if_fn)need(iph, "InitializeIpInterfaceEntry"))(&row);
    row.Family = family(f[1]);
    row.InterfaceLuid.Value = _strtoui64(f[2], NULL, 10);
    DWORD get = ((if_fn)need(iph, "GetIpInterfaceEntry"))(&row);
    unsigned long site = (unsigned long)row.SitePrefixLength;
    row.ForwardingEnabled = (BOOLEAN)atoi(f[3]);
    if (atoi(f[4])) row.SitePrefixLength = 0;
    DWORD set = ((if_fn)need(iph, "SetIpInterfaceEntry"))(&row);
    sb_fmt(&b, ",\"get\":%lu,\"gotSitePrefixLength\":%lu,\"hr\":%lu", (unsigned long)get, site, (unsigned long)set);
    errp = NULL;
  } else if (!strcmp(fn, "ConvertInterfaceAliasToLuid")) {
    NET_LUID luid;
    ARGS(1);
    WCHAR *alias = wstr(f[1]);
    luid.Value = 12345;
    DWORD rc = ((alias_to_luid_fn)need(iph, fn))(alias, &luid);
    free(alias);
    sb_fmt(&b, ",\"hr\":%lu,\"luid\":\"%llu\"", (unsigned long)rc, (unsigned long long)luid.Value);
    errp = NULL;
  } else if (!strcmp(fn, "ConvertInterfaceLuidToAlias")) {
    NET_LUID luid;
    WCHAR alias[IF_MAX_STRING_SIZE + 1] = {0};
    ARGS(2);
    luid.Value = _strtoui64(f[1], NULL, 10);
    SIZE_T len = strtoul(f[2], NULL, 10);
    if (len > IF_MAX_STRING_SIZE + 1) len = IF_MAX_STRING_SIZE + 1;
    DWORD rc = ((luid_to_alias_fn)need(iph, fn))(&luid, alias, len);
    sb_fmt(&b, ",\"hr\":%lu,\"alias\":", (unsigned long)rc);
    sb_jsonw(&b, alias);
    errp = NULL;
  } else if (!strcmp(fn, "ConvertInterfaceLuidToIndex")) {
    NET_LUID luid;
    NET_IFINDEX index = 777;
    ARGS(1);
    luid.Value = _strtoui64(f[1], NULL, 10);
    DWORD rc = ((luid_to_index_fn)need(iph, fn))(&luid, &index);
    sb_fmt(&b, ",\"hr\":%lu,\"index\":%lu", (unsigned long)rc, (unsigned long)index);
    errp = NULL;
  } else {
    printf("{\"i\":%d,\"fatal\":\"unknown command %s\"}\n", lineno, fn);
    sb_free(&b);
    return;
  }
  if (errp) out_str(&b, "err", err);
  sb_str(&b, "}");
  puts(b.p);
  fflush(stdout);
  sb_free(&b);
}

int main(int argc, char **argv) {
  static char line[1 << 16];
  FILE *script;
  int lineno = 0;
  if (argc < 2 || !(script = fopen(argv[1], "rb"))) {
    printf("{\"fatal\":\"usage: probe.exe <script>\"}\n");
    return 2;
  }
  hcn = load("computenetwork.dll");
  vmc = load("vmcompute.dll");
  iph = load("bs-iphlpapi.dll");
  while (fgets(line, sizeof line, script)) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    lineno++;
    if (n) run(lineno, line);
  }
  fclose(script);
  fflush(stdout);
  return 0;
}
