// IpHelperApi over IP Helper (iphlpapi.dll, or the stand-in the platform names under wine) through koffi. Rows go
// in and out as byte buffers laid out by ./mib-rows.ts (pure, tested on Linux); this module only moves them across.
// Every call runs on koffi's worker threads (the async form) except FreeMibTable, a heap free. Win32 errors become
// HcnError(HRESULT_FROM_WIN32(code)), so the route programmer's NOT_FOUND / ALREADY_EXISTS rules apply unchanged.
import { RouteProtocol, type IpHelperApi } from './windows-net-api.ts';
import { HCN, HcnError } from './hresult.ts';
import { callAsync, isNull, lazyFuncs, loadKoffi, protoName } from './hcn-koffi.ts';
import {
  AF_UNSPEC, afOf, decodeForwardTable, decodeInterfaceRow, FORWARD_ROW, fillForwardRow, fillInterfaceKey,
  forwardTableSize, INTERFACE_ROW, luidBytes, setInterfaceForwarding, utf16z, type ForwardRowInput,
} from './mib-rows.ts';

// winerror.h
export const ERROR_FILE_NOT_FOUND = 2;
export const ERROR_INVALID_PARAMETER = 87;
export const ERROR_NOT_FOUND = 1168;
export const ERROR_OBJECT_ALREADY_EXISTS = 5010;

const MEANINGS: Record<number, string> = {
  1: 'invalid function',
  2: 'the object does not exist (file not found)',
  5: 'access denied (the daemon must run as an administrator or SYSTEM)',
  8: 'not enough memory',
  13: 'invalid data',
  50: 'not supported',
  87: 'invalid parameter',
  122: 'the buffer is too small',
  232: 'no data',
  1168: 'element not found',
  1231: 'the network is unreachable',
  5010: 'the object already exists',
};

/** What a Win32 error code means, in a few words. */
export const win32Meaning = (code: number): string => MEANINGS[code] ?? `Win32 error ${code}`;

/** HRESULT_FROM_WIN32: an HRESULT passes through, 0 stays 0, a Win32 code gets facility 7 and the failure bit. */
export function hresultFromWin32(code: number): number {
  if (code === 0 || (code >>> 0) >= 0x8000_0000) return code >>> 0;
  return ((code & 0xffff) | 0x8007_0000) >>> 0;
}

/** The HcnError for a Win32 error `code` from `fn`: "<fn>: <meaning>", code HRESULT_FROM_WIN32. */
export function win32Failure(fn: string, code: number, detail?: string): HcnError {
  return new HcnError(hresultFromWin32(code), `${fn}: ${win32Meaning(code >>> 0)}${detail ? ` (${detail})` : ''}`);
}

/** NDIS_IF_MAX_STRING_SIZE + 1: the WCHARs an interface alias may take with its NUL. */
const ALIAS_CHARS = 257;

const P = {
  initRoute: 'void InitializeIpForwardEntry(void *row)',
  createRoute: 'uint32_t CreateIpForwardEntry2(const void *row)',
  deleteRoute: 'uint32_t DeleteIpForwardEntry2(const void *row)',
  table: 'uint32_t GetIpForwardTable2(uint16_t family, _Out_ void **table)',
  freeTable: 'void FreeMibTable(void *memory)',
  aliasToLuid: 'uint32_t ConvertInterfaceAliasToLuid(const char16_t *alias, void *luid)',
  luidToAlias: 'uint32_t ConvertInterfaceLuidToAlias(const void *luid, void *alias, size_t length)',
  luidToIndex: 'uint32_t ConvertInterfaceLuidToIndex(const void *luid, void *index)',
  initInterface: 'void InitializeIpInterfaceEntry(void *row)',
  getInterface: 'uint32_t GetIpInterfaceEntry(void *row)',
  setInterface: 'uint32_t SetIpInterfaceEntry(void *row)',
} as const;

const loaded = new Map<string, Promise<IpHelperApi>>();

/** IP Helper from `dll` (a full path), bound once per process per path. A failed load may be retried. */
export function ipHelperBindings(dll: string): Promise<IpHelperApi> {
  let p = loaded.get(dll);
  if (!p) {
    p = bind(dll);
    loaded.set(dll, p);
    p.catch(() => loaded.delete(dll));
  }
  return p;
}

async function bind(dll: string): Promise<IpHelperApi> {
  const koffi = await loadKoffi();
  const lib = koffi.load(dll);
  const fn = lazyFuncs(lib);

  /** A NETIO_STATUS call: resolves when it returns NO_ERROR, else throws the mapped HcnError. */
  async function netio(proto: string, args: unknown[], detail?: string): Promise<void> {
    const rc = (await callAsync(fn(proto), ...args)) as number;
    if (rc !== 0) throw win32Failure(protoName(proto), rc, detail);
  }

  /** A MIB_IPFORWARD_ROW2 with InitializeIpForwardEntry's defaults under our fields; bad input is E_INVALIDARG. */
  async function routeRow(fnName: string, row: ForwardRowInput): Promise<Buffer> {
    const buf = Buffer.alloc(FORWARD_ROW.size);
    await callAsync(fn(P.initRoute), buf);
    try {
      return fillForwardRow(buf, row);
    } catch (e) {
      throw new HcnError(HCN.INVALID_ARG, `${fnName}: ${(e as Error).message}`);
    }
  }

  /** The interface row for (family, LUID) as GetIpInterfaceEntry reads it. */
  async function interfaceRow(luid: bigint, family: 4 | 6): Promise<Buffer> {
    const buf = Buffer.alloc(INTERFACE_ROW.size);
    await callAsync(fn(P.initInterface), buf);
    try {
      fillInterfaceKey(buf, family, luid);
    } catch (e) {
      throw new HcnError(HCN.INVALID_ARG, `GetIpInterfaceEntry: ${(e as Error).message}`);
    }
    await netio(P.getInterface, [buf], `IPv${family} on interface LUID ${luid}`);
    return buf;
  }

  async function indexOf(luidBuf: Buffer, what: string): Promise<number> {
    const index = Buffer.alloc(4);
    const rc = (await callAsync(fn(P.luidToIndex), luidBuf, index)) as number;
    if (rc === ERROR_NOT_FOUND || rc === ERROR_FILE_NOT_FOUND) throw win32Failure('ConvertInterfaceLuidToIndex', ERROR_NOT_FOUND, what);
    if (rc !== 0) throw win32Failure('ConvertInterfaceLuidToIndex', rc, what);
    return index.readUInt32LE(0);
  }

  function luidArg(fnName: string, luid: bigint): Buffer {
    try {
      return luidBytes(luid);
    } catch (e) {
      throw new HcnError(HCN.INVALID_ARG, `${fnName}: ${(e as Error).message}`);
    }
  }

  return {
    async routes(family) {
      const table: unknown[] = [null];
      const rc = (await callAsync(fn(P.table), family === 0 ? AF_UNSPEC : afOf(family), table)) as number;
      // No route of that family at all is ERROR_NOT_FOUND, not a failure.
      if (rc === ERROR_NOT_FOUND) return [];
      if (rc !== 0) throw win32Failure('GetIpForwardTable2', rc);
      if (isNull(table[0])) return [];
      let bytes: Buffer;
      try {
        const n = koffi.decode(table[0], 'uint32_t') as number;
        // Copied out of IP Helper's memory before it is freed (Buffer.from of a view copies).
        bytes = Buffer.from(new Uint8Array(koffi.view(table[0], forwardTableSize(n))));
      } finally {
        fn(P.freeTable)(table[0]);
      }
      return decodeForwardTable(bytes);
    },
    async createRoute(row) {
      // Routes we make are management routes (MIB_IPPROTO_NETMGMT), whatever protocol the row carries.
      const buf = await routeRow('CreateIpForwardEntry2', { ...row, protocol: RouteProtocol.NETMGMT });
      await netio(P.createRoute, [buf], `${row.destination} via ${row.nextHop}`);
    },
    async deleteRoute(row) {
      const buf = await routeRow('DeleteIpForwardEntry2', row);
      await netio(P.deleteRoute, [buf], `${row.destination} via ${row.nextHop}`);
    },
    async interfaceByAlias(alias) {
      const luid = Buffer.alloc(8);
      if (typeof alias !== 'string' || alias === '' || alias.length >= ALIAS_CHARS || alias.includes('\0')) {
        throw new HcnError(HCN.INVALID_ARG, `ConvertInterfaceAliasToLuid: ${JSON.stringify(alias)} is not an interface alias`);
      }
      const rc = (await callAsync(fn(P.aliasToLuid), alias, luid)) as number;
      // An alias no interface has is ERROR_INVALID_PARAMETER (Microsoft's documentation): that is "not found".
      if (rc === ERROR_INVALID_PARAMETER || rc === ERROR_NOT_FOUND || rc === ERROR_FILE_NOT_FOUND) {
        throw win32Failure('ConvertInterfaceAliasToLuid', ERROR_NOT_FOUND, `no interface "${alias}"`);
      }
      if (rc !== 0) throw win32Failure('ConvertInterfaceAliasToLuid', rc, alias);
      return { alias, luid: luid.readBigUInt64LE(0), index: await indexOf(luid, `interface "${alias}"`) };
    },
    async interfaceByLuid(luid) {
      const luidBuf = luidArg('ConvertInterfaceLuidToAlias', luid);
      const alias = Buffer.alloc(ALIAS_CHARS * 2);
      const rc = (await callAsync(fn(P.luidToAlias), luidBuf, alias, ALIAS_CHARS)) as number;
      if (rc === ERROR_NOT_FOUND || rc === ERROR_FILE_NOT_FOUND) throw win32Failure('ConvertInterfaceLuidToAlias', ERROR_NOT_FOUND, `LUID ${luid}`);
      if (rc !== 0) throw win32Failure('ConvertInterfaceLuidToAlias', rc, `LUID ${luid}`);
      return { alias: utf16z(alias), luid, index: await indexOf(luidBuf, `LUID ${luid}`) };
    },
    async forwarding(luid, family) {
      return decodeInterfaceRow(await interfaceRow(luid, family)).forwardingEnabled;
    },
    async setForwarding(luid, family, on) {
      const buf = setInterfaceForwarding(await interfaceRow(luid, family), on);
      await netio(P.setInterface, [buf], `IPv${family} forwarding ${on ? 'on' : 'off'} on interface LUID ${luid}`);
    },
  };
}
