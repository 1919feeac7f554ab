/*
 * Test-only bs-iphlpapi.dll: the IP Helper routines the route programmer calls, with mingw's own MIB_* layouts,
 * forwarded to the stand-in server (which holds the interface and route tables). It is loaded by name beside the
 * system iphlpapi.dll (node.exe imports that one), when BLOCKSPEAKER_IPHLPAPI names it.
 */
#include "common.h"
#include <iphlpapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_MAGIC 0x424d4954u /* "TIMB": marks tables this DLL handed out */
#define TABLE_HEADER 16         /* keeps the table itself 8-byte aligned */

static DWORD call(const char *fn, args_t *a, reply *r) {
  DWORD code;
  if (standin_call(fn, a, r)) {
    sb_free(&a->b);
    return STANDIN_UNREACHABLE_WIN32;
  }
  sb_free(&a->b);
  code = (DWORD)r->code;
  return code;
}

static void send_only(const char *fn, args_t *a) {
  reply r;
  if (call(fn, a, &r) != STANDIN_UNREACHABLE_WIN32) reply_free(&r);
}


static void sockaddr_text(const SOCKADDR_INET *s, char *out) {
  if (s->si_family == AF_INET) addr_text(0, (const unsigned char *)&s->Ipv4.sin_addr, out);
  else if (s->si_family == AF_INET6) addr_text(1, (const unsigned char *)&s->Ipv6.sin6_addr, out);
  else out[0] = 0;
}

static void sockaddr_fill(SOCKADDR_INET *s, ADDRESS_FAMILY family, const char *hex) {
  memset(s, 0, sizeof *s);
  s->si_family = family;
  if (family == AF_INET) hex_bytes(hex, (unsigned char *)&s->Ipv4.sin_addr, 4);
  else if (family == AF_INET6) hex_bytes(hex, (unsigned char *)&s->Ipv6.sin6_addr, 16);
}

static void route_args(args_t *a, const MIB_IPFORWARD_ROW2 *row) {
  char t[64];
  arg_num(a, "family", row->DestinationPrefix.Prefix.si_family);
  arg_u64(a, "luid", row->InterfaceLuid.Value);
  arg_num(a, "index", row->InterfaceIndex);
  sockaddr_text(&row->DestinationPrefix.Prefix, t);
  arg_str(a, "destination", t);
  arg_num(a, "prefixLength", row->DestinationPrefix.PrefixLength);
  arg_num(a, "nextHopFamily", row->NextHop.si_family);
  sockaddr_text(&row->NextHop, t);
  arg_str(a, "nextHop", t);
  arg_num(a, "metric", row->Metric);
  arg_num(a, "protocol", (long long)(int)row->Protocol);
  arg_num(a, "sitePrefixLength", row->SitePrefixLength);
  arg_num(a, "validLifetime", row->ValidLifetime);
  arg_num(a, "preferredLifetime", row->PreferredLifetime);
}

EXPORT VOID WINAPI InitializeIpForwardEntry(PMIB_IPFORWARD_ROW2 row) {
  args_t a = {0};
  arg_num(&a, "row", row != NULL);
  send_only("InitializeIpForwardEntry", &a);
  if (!row) return;
  /* What the docs promise: infinite lifetimes, the four flags TRUE, "illegal" site prefix, metric and protocol. */
  memset(row, 0, sizeof *row);
  row->ValidLifetime = row->PreferredLifetime = 0xffffffffu;
  row->Loopback = row->AutoconfigureAddress = row->Publish = row->Immortal = TRUE;
  row->SitePrefixLength = 255;
  row->Metric = 0xffffffffu;
  row->Protocol = (NL_ROUTE_PROTOCOL)-1;
}

static DWORD route_call(const char *fn, const MIB_IPFORWARD_ROW2 *row) {
  args_t a = {0};
  reply r;
  DWORD code;
  if (row) route_args(&a, row);
  else arg_local(&a, ERROR_INVALID_PARAMETER, "null row");
  code = call(fn, &a, &r);
  if (code != STANDIN_UNREACHABLE_WIN32) reply_free(&r);
  return code;
}

EXPORT DWORD WINAPI CreateIpForwardEntry2(const MIB_IPFORWARD_ROW2 *row) { return route_call("CreateIpForwardEntry2", row); }
EXPORT DWORD WINAPI DeleteIpForwardEntry2(const MIB_IPFORWARD_ROW2 *row) { return route_call("DeleteIpForwardEntry2", row); }

/* Reply rows: family luid index destination(hex) prefixLength nextHop(hex) metric protocol origin. */
EXPORT DWORD WINAPI GetIpForwardTable2(ADDRESS_FAMILY family, PMIB_IPFORWARD_TABLE2 *table) {
  args_t a = {0};
  reply r;
  DWORD code;
  arg_num(&a, "family", family);
  if (!table) arg_local(&a, ERROR_INVALID_PARAMETER, "null table pointer");
  else *table = NULL;
  code = call("GetIpForwardTable2", &a, &r);
  if (code == STANDIN_UNREACHABLE_WIN32) return code;
  if (code == NO_ERROR && table) {
    size_t size = TABLE_HEADER + offsetof(MIB_IPFORWARD_TABLE2, Table) + sizeof(MIB_IPFORWARD_ROW2) * (r.nrows ? r.nrows : 1);
    unsigned char *block = HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, size);
    if (!block) {
      reply_free(&r);
      return ERROR_NOT_ENOUGH_MEMORY;
    }
    *(unsigned *)block = TABLE_MAGIC;
    MIB_IPFORWARD_TABLE2 *t = (MIB_IPFORWARD_TABLE2 *)(block + TABLE_HEADER);
    for (int i = 0; i < r.nrows; i++) {
      char *f[9];
      MIB_IPFORWARD_ROW2 *row = &t->Table[t->NumEntries];
      if (split_tabs(r.rows[i], f, 9) != 9) continue;
      ADDRESS_FAMILY fam = (ADDRESS_FAMILY)atoi(f[0]);
      row->InterfaceLuid.Value = _strtoui64(f[1], NULL, 10);
      row->InterfaceIndex = strtoul(f[2], NULL, 10);
      sockaddr_fill(&row->DestinationPrefix.Prefix, fam, f[3]);
      row->DestinationPrefix.PrefixLength = (UINT8)atoi(f[4]);
      sockaddr_fill(&row->NextHop, fam, f[5]);
      row->SitePrefixLength = 0;
      row->ValidLifetime = row->PreferredLifetime = 0xffffffffu;
      row->Metric = strtoul(f[6], NULL, 10);
      row->Protocol = (NL_ROUTE_PROTOCOL)atoi(f[7]);
      row->Immortal = TRUE;
      row->Origin = (NL_ROUTE_ORIGIN)atoi(f[8]);
      t->NumEntries++;
    }
    *table = t;
  }
  reply_free(&r);
  return code;
}

EXPORT VOID WINAPI FreeMibTable(PVOID memory) {
  args_t a = {0};
  unsigned char *block = memory ? (unsigned char *)memory - TABLE_HEADER : NULL;
  int ours = block && *(unsigned *)block == TABLE_MAGIC;
  arg_num(&a, "table", memory != NULL);
  if (memory && !ours) arg_local(&a, ERROR_INVALID_PARAMETER, "not a table from this DLL (or freed twice)");
  send_only("FreeMibTable", &a);
  if (ours) {
    *(unsigned *)block = 0;
    HeapFree(GetProcessHeap(), 0, block);
  }
}

EXPORT VOID WINAPI InitializeIpInterfaceEntry(PMIB_IPINTERFACE_ROW row) {
  args_t a = {0};
  arg_num(&a, "row", row != NULL);
  send_only("InitializeIpInterfaceEntry", &a);
  if (row) memset(row, 0, sizeof *row);
}

static void interface_args(args_t *a, const MIB_IPINTERFACE_ROW *row) {
  arg_num(a, "family", row->Family);
  arg_u64(a, "luid", row->InterfaceLuid.Value);
  arg_num(a, "index", row->InterfaceIndex);
}

/* Reply row: luid index forwarding sitePrefixLength metric nlMtu. */
EXPORT DWORD WINAPI GetIpInterfaceEntry(PMIB_IPINTERFACE_ROW row) {
  args_t a = {0};
  reply r;
  DWORD code;
  if (row) interface_args(&a, row);
  else arg_local(&a, ERROR_INVALID_PARAMETER, "null row");
  code = call("GetIpInterfaceEntry", &a, &r);
  if (code == STANDIN_UNREACHABLE_WIN32) return code;
  if (code == NO_ERROR && row && r.nrows) {
    char *f[6];
    if (split_tabs(r.rows[0], f, 6) == 6) {
      ADDRESS_FAMILY fam = row->Family;
      memset(row, 0, sizeof *row);
      row->Family = fam;
      row->InterfaceLuid.Value = _strtoui64(f[0], NULL, 10);
      row->InterfaceIndex = strtoul(f[1], NULL, 10);
      row->ForwardingEnabled = (BOOLEAN)atoi(f[2]);
      row->SitePrefixLength = strtoul(f[3], NULL, 10);
      row->Metric = strtoul(f[4], NULL, 10);
      row->NlMtu = strtoul(f[5], NULL, 10);
      row->UseAutomaticMetric = TRUE;
      row->Connected = TRUE;
      row->WeakHostSend = row->WeakHostReceive = FALSE;
      row->SupportsNeighborDiscovery = TRUE;
    }
  }
  reply_free(&r);
  return code;
}

EXPORT DWORD WINAPI SetIpInterfaceEntry(PMIB_IPINTERFACE_ROW row) {
  args_t a = {0};
  reply r;
  DWORD code;
  if (row) {
    interface_args(&a, row);
    arg_num(&a, "forwarding", row->ForwardingEnabled);
    arg_num(&a, "sitePrefixLength", row->SitePrefixLength);
  } else {
    arg_local(&a, ERROR_INVALID_PARAMETER, "null row");
  }
  code = call("SetIpInterfaceEntry", &a, &r);
  if (code == STANDIN_UNREACHABLE_WIN32) return code;
  if (code == NO_ERROR && row && r.nrows) {
    char *f[2];
    /* Windows fills the LUID in when the caller named the interface by index. */
    if (split_tabs(r.rows[0], f, 2) == 2) row->InterfaceLuid.Value = _strtoui64(f[0], NULL, 10);
  }
  reply_free(&r);
  return code;
}

EXPORT DWORD WINAPI ConvertInterfaceAliasToLuid(const WCHAR *alias, PNET_LUID luid) {
  args_t a = {0};
  reply r;
  DWORD code;
  arg_wstr(&a, "alias", alias);
  if (!alias || !luid) arg_local(&a, ERROR_INVALID_PARAMETER, "null alias or LUID pointer");
  code = call("ConvertInterfaceAliasToLuid", &a, &r);
  if (code == STANDIN_UNREACHABLE_WIN32) return code;
  if (luid) luid->Value = code == NO_ERROR && r.nrows ? _strtoui64(r.rows[0], NULL, 10) : 0;
  reply_free(&r);
  return code;
}

EXPORT DWORD WINAPI ConvertInterfaceLuidToAlias(const NET_LUID *luid, PWSTR alias, SIZE_T length) {
  args_t a = {0};
  reply r;
  DWORD code;
  if (luid) arg_u64(&a, "luid", luid->Value);
  arg_num(&a, "length", (long long)length);
  if (!luid || !alias) arg_local(&a, ERROR_INVALID_PARAMETER, "null LUID or alias pointer");
  code = call("ConvertInterfaceLuidToAlias", &a, &r);
  if (code == STANDIN_UNREACHABLE_WIN32) return code;
  if (code == NO_ERROR && alias && r.out) {
    WCHAR *w = wide_of(r.out);
    lstrcpynW(alias, w, (int)length);
    free(w);
  }
  reply_free(&r);
  return code;
}

EXPORT DWORD WINAPI ConvertInterfaceLuidToIndex(const NET_LUID *luid, PNET_IFINDEX index) {
  args_t a = {0};
  reply r;
  DWORD code;
  if (luid) arg_u64(&a, "luid", luid->Value);
  if (!luid || !index) arg_local(&a, ERROR_INVALID_PARAMETER, "null LUID or index pointer");
  code = call("ConvertInterfaceLuidToIndex", &a, &r);
  if (code == STANDIN_UNREACHABLE_WIN32) return code;
  if (index) *index = code == NO_ERROR && r.nrows ? strtoul(r.rows[0], NULL, 10) : 0; /* NET_IFINDEX_UNSPECIFIED */
  reply_free(&r);
  return code;
}
