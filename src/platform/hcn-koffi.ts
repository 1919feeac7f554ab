// HcnApi (computenetwork.dll) and HnsHostAttach (vmcompute.dll's HNSCall) through koffi, with the signatures
// hcsshim's hcn package and HNS v1 client use. Koffi is imported only inside hcnBindings(), so this module's pure
// helpers (GUID bytes, the error rules) load and test on Linux; the platform imports the module dynamically, on
// Windows only, so the CNI plugin bundle and Linux never reach koffi.
//
// Every native call runs through koffi's async form (a worker thread): HNS can take hundreds of milliseconds per
// call and the event loop carries BGP keepalives. Handles never leave this module: open, call, close in a finally.
// Strings HCN returns (PWSTR*) come from CoTaskMemAlloc: each is decoded as UTF-16 and freed with CoTaskMemFree,
// the error record as well, on success and on failure.
import { hcnQuery, type HcnApi, type HcnKind, type HnsHostAttach } from './windows-net-api.ts';
import { HCN, HcnError } from './hresult.ts';

export const E_FAIL = 0x8000_4005;
export const E_UNEXPECTED = 0x8000_ffff;

/** True for a failure HRESULT (the severity bit), whether koffi hands it over signed or not. */
export const failed = (hr: number): boolean => (hr >>> 0) >= 0x8000_0000;

// ---- GUIDs --------------------------------------------------------------------------------------------------

const GUID_TEXT = /^\{?([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{12})\}?$/i;

/**
 * A GUID as the 16 bytes of Windows' GUID struct: Data1 (u32), Data2 and Data3 (u16) little-endian, Data4 the
 * remaining 8 bytes in text order. Braces are allowed; anything else that is not a GUID throws HcnError E_INVALIDARG.
 */
export function guidToBytes(id: string): Buffer {
  const m = typeof id === 'string' ? GUID_TEXT.exec(id.trim()) : null;
  if (!m || (id.trim().startsWith('{') !== id.trim().endsWith('}'))) {
    throw new HcnError(HCN.INVALID_ARG, `not a GUID: ${JSON.stringify(id)}`);
  }
  const b = Buffer.alloc(16);
  b.writeUInt32LE(parseInt(m[1], 16), 0);
  b.writeUInt16LE(parseInt(m[2], 16), 4);
  b.writeUInt16LE(parseInt(m[3], 16), 6);
  Buffer.from(m[4] + m[5], 'hex').copy(b, 8);
  return b;
}

/** The lower-case text form (no braces) of a 16-byte GUID struct. */
export function guidFromBytes(bytes: Uint8Array): string {
  if (bytes.length !== 16) throw new RangeError(`a GUID is 16 bytes, not ${bytes.length}`);
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, 16);
  const hex = (v: number, w: number) => v.toString(16).padStart(w, '0');
  const d4 = b.subarray(8).toString('hex');
  return `${hex(b.readUInt32LE(0), 8)}-${hex(b.readUInt16LE(4), 4)}-${hex(b.readUInt16LE(6), 4)}-${d4.slice(0, 4)}-${d4.slice(4)}`;
}

/** HCN assigns the ID when asked to create with the all-zero GUID (what hcsshim passes). */
export const zeroGuid = (): Buffer => Buffer.alloc(16);

// ---- error rules --------------------------------------------------------------------------------------------

function recordObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function codeOf(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v !== 0 ? v >>> 0 : undefined;
}

/**
 * hcsshim's checkForErrors: a failure HRESULT, or a non-empty error record even with a success HRESULT, is an error.
 * The message is the record's `Error` field, else the record's text, else "<fn> failed"; the code is the HRESULT,
 * or (success HRESULT with a record) the record's `ErrorCode`, else E_FAIL. undefined when the call succeeded.
 */
export function hcnError(fn: string, hr: number, record: string | null | undefined): HcnError | undefined {
  const text = record?.trim() ?? '';
  if (!failed(hr) && text === '') return undefined;
  const obj = text === '' ? undefined : recordObject(text);
  const error = typeof obj?.Error === 'string' && obj.Error.trim() !== '' ? obj.Error.trim() : undefined;
  const message = error ?? (text !== '' ? text : `${fn} failed`);
  const code = failed(hr) ? hr >>> 0 : (codeOf(obj?.ErrorCode) ?? E_FAIL);
  return new HcnError(code, message);
}

/**
 * HNSCall's answer: a failure HRESULT, or a response `{"Success":false,"Error":...}`, is an error (code: the HRESULT,
 * else the response's `ErrorCode`, else E_FAIL). A success HRESULT with no response, or one that is not JSON, is
 * taken as done only when it is empty; text that is not JSON is E_UNEXPECTED.
 */
export function hnsCallError(method: string, path: string, hr: number, response: string | null | undefined): HcnError | undefined {
  const text = response?.trim() ?? '';
  const obj = text === '' ? undefined : recordObject(text);
  const error = typeof obj?.Error === 'string' && obj.Error.trim() !== '' ? obj.Error.trim() : undefined;
  const what = `HNSCall ${method} ${path}`;
  if (failed(hr)) return new HcnError(hr >>> 0, error ?? `${what} failed`);
  if (text === '') return undefined;
  if (!obj) return new HcnError(E_UNEXPECTED, `${what}: the response is not a JSON object: ${text.slice(0, 200)}`);
  if (obj.Success === false) return new HcnError(codeOf(obj.ErrorCode) ?? E_FAIL, error ?? `${what} failed`);
  return undefined;
}

/** A properties document HCN returned, parsed (E_UNEXPECTED when it is not a JSON object). */
export function parseProperties(fn: string, text: string | null): Record<string, unknown> {
  const obj = text === null ? undefined : recordObject(text);
  if (!obj) throw new HcnError(E_UNEXPECTED, `${fn} returned ${text === null ? 'no properties' : `properties that are not a JSON object: ${text.slice(0, 200)}`}`);
  return obj;
}

/** The ID list an HcnEnumerate* call returned: a JSON array of GUID strings; none is an empty list. */
export function parseIdList(fn: string, text: string | null): string[] {
  if (text === null || text.trim() === '') return [];
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    v = undefined;
  }
  if (v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) {
    throw new HcnError(E_UNEXPECTED, `${fn} returned a list that is not a JSON array of IDs: ${text.slice(0, 200)}`);
  }
  return v as string[];
}

/** The C prototypes, per kind, as hcsshim declares them (HRESULT return, handles as void *, GUIDs by pointer). */
export function hcnPrototypes(kind: HcnKind) {
  const k = kind;
  return {
    enumerate: `int32_t HcnEnumerate${k}s(const char16_t *query, _Out_ void **ids, _Out_ void **result)`,
    create: k === 'Endpoint'
      ? 'int32_t HcnCreateEndpoint(void *network, const void *id, const char16_t *settings, _Out_ void **endpoint, _Out_ void **result)'
      : `int32_t HcnCreate${k}(const void *id, const char16_t *settings, _Out_ void **handle, _Out_ void **result)`,
    open: `int32_t HcnOpen${k}(const void *id, _Out_ void **handle, _Out_ void **result)`,
    modify: `int32_t HcnModify${k}(void *handle, const char16_t *settings, _Out_ void **result)`,
    query: `int32_t HcnQuery${k}Properties(void *handle, const char16_t *query, _Out_ void **properties, _Out_ void **result)`,
    remove: `int32_t HcnDelete${k}(const void *id, _Out_ void **result)`,
    close: `int32_t HcnClose${k}(void *handle)`,
  };
}

/** The C function name in a prototype ("int32_t HcnOpenNetwork(...)" -> "HcnOpenNetwork"). */
export const protoName = (proto: string): string => /(\w+)\s*\(/.exec(proto)?.[1] ?? proto;

// ---- koffi --------------------------------------------------------------------------------------------------

export type NativeFn = ((...args: unknown[]) => any) & { async(...args: unknown[]): void };

export interface KoffiLike {
  load(path: string): { func(definition: string): NativeFn };
  decode(p: unknown, type: string, len?: number): any;
  view(p: unknown, len: number): ArrayBuffer;
}

/** koffi's API from its ESM wrapper, its CommonJS module, or the executable's shim (all shapes seen in bundles). */
export async function loadKoffi(): Promise<KoffiLike> {
  const mod = (await import('koffi')) as unknown as { default?: KoffiLike } & KoffiLike;
  return typeof mod.load === 'function' ? mod : (mod.default as KoffiLike);
}

/** One native call on koffi's worker threads, as a promise. */
export function callAsync(fn: NativeFn, ...args: unknown[]): Promise<any> {
  return new Promise((resolve, reject) => {
    fn.async(...args, (err: unknown, res: unknown) => (err ? reject(err) : resolve(res)));
  });
}

export const isNull = (p: unknown): boolean => p === null || p === undefined || p === 0n || p === 0;

/** Functions of a loaded DLL, each bound on first use: a missing export fails that call only, not the load. */
export function lazyFuncs(lib: { func(definition: string): NativeFn }): (proto: string) => NativeFn {
  const bound = new Map<string, NativeFn>();
  return (proto) => {
    let f = bound.get(proto);
    if (!f) bound.set(proto, (f = lib.func(proto)));
    return f;
  };
}

/** Full paths of the DLLs this module loads (the platform picks them from System32). */
export interface HcnDlls {
  computenetwork: string;
  vmcompute: string;
  ole32: string;
}

const loaded = new Map<string, Promise<{ hcn: HcnApi; hns: HnsHostAttach }>>();

/** HCN and HNSCall, bound once per process (per set of DLL paths). A failed load may be retried. */
export function hcnBindings(dlls: HcnDlls): Promise<{ hcn: HcnApi; hns: HnsHostAttach }> {
  const key = JSON.stringify([dlls.computenetwork, dlls.vmcompute, dlls.ole32]);
  let p = loaded.get(key);
  if (!p) {
    p = bind(dlls);
    loaded.set(key, p);
    p.catch(() => loaded.delete(key));
  }
  return p;
}

async function bind(dlls: HcnDlls): Promise<{ hcn: HcnApi; hns: HnsHostAttach }> {
  const koffi = await loadKoffi();
  const ole32 = koffi.load(dlls.ole32);
  const hcnFn = lazyFuncs(koffi.load(dlls.computenetwork));
  const hnsFn = lazyFuncs(koffi.load(dlls.vmcompute));
  // A heap free: synchronous, so nothing HCN allocated can outlive a rejected promise.
  const CoTaskMemFree = ole32.func('void CoTaskMemFree(void *p)');

  /** Decode and free every PWSTR out (each slot reset), even when one of them fails to decode. */
  function takeStrings(outs: unknown[][]): (string | null)[] {
    let first: unknown;
    const texts = outs.map((out) => {
      const p = out[0];
      out[0] = null;
      if (isNull(p)) return null;
      try {
        return koffi.decode(p, 'char16_t', -1) as string;
      } catch (e) {
        first ??= e;
        return null;
      } finally {
        CoTaskMemFree(p);
      }
    });
    if (first !== undefined) throw first;
    return texts;
  }

  /**
   * One Hcn* call whose last argument is the error record: runs it, frees the record and the `strings` outs, throws
   * per checkForErrors, returns the strings.
   */
  async function hcnCall(proto: string, args: unknown[], strings: unknown[][] = []): Promise<(string | null)[]> {
    const record = args[args.length - 1] as unknown[];
    let hr = E_UNEXPECTED;
    let thrown: unknown;
    try {
      hr = (await callAsync(hcnFn(proto), ...args)) as number;
    } catch (e) {
      thrown = e;
    }
    const texts = takeStrings([...strings, record]);
    if (thrown !== undefined) throw thrown;
    const err = hcnError(protoName(proto), hr, texts.pop());
    if (err) throw err;
    return texts;
  }

  async function close(kind: HcnKind, handle: unknown): Promise<void> {
    if (isNull(handle)) return;
    try {
      await callAsync(hcnFn(hcnPrototypes(kind).close), handle);
    } catch {
      // The handle is gone either way; the caller's own outcome is what matters.
    }
  }

  /** A call that returns a handle (open, create): the handle, or the error (closing a handle that came with it). */
  async function handleCall(kind: HcnKind, proto: string, args: (handle: unknown[], record: unknown[]) => unknown[]): Promise<unknown> {
    const handle: unknown[] = [null];
    try {
      await hcnCall(proto, args(handle, [null]));
    } catch (e) {
      await close(kind, handle[0]);
      throw e;
    }
    if (isNull(handle[0])) throw new HcnError(E_UNEXPECTED, `${protoName(proto)} returned no handle`);
    return handle[0];
  }

  async function withOpen<T>(kind: HcnKind, id: string, f: (h: unknown) => Promise<T>): Promise<T> {
    const guid = guidToBytes(id);
    const h = await handleCall(kind, hcnPrototypes(kind).open, (handle, record) => [guid, handle, record]);
    try {
      return await f(h);
    } finally {
      await close(kind, h);
    }
  }

  async function properties(kind: HcnKind, h: unknown, query: string): Promise<Record<string, unknown>> {
    const proto = hcnPrototypes(kind).query;
    const out: unknown[] = [null];
    const [text] = await hcnCall(proto, [h, query, out, [null]], [out]);
    return parseProperties(protoName(proto), text);
  }

  const hcn: HcnApi = {
    async enumerate(kind, query) {
      const proto = hcnPrototypes(kind).enumerate;
      const out: unknown[] = [null];
      const [text] = await hcnCall(proto, [query, out, [null]], [out]);
      return parseIdList(protoName(proto), text);
    },
    async create(kind, settings, network) {
      const proto = hcnPrototypes(kind).create;
      const make = async (net?: unknown) => {
        const h = await handleCall(kind, proto, (handle, record) =>
          kind === 'Endpoint' ? [net, zeroGuid(), settings, handle, record] : [zeroGuid(), settings, handle, record]);
        try {
          return await properties(kind, h, hcnQuery());
        } finally {
          await close(kind, h);
        }
      };
      if (kind !== 'Endpoint') return make();
      if (!network) throw new HcnError(HCN.INVALID_ARG, 'HcnCreateEndpoint needs the network ID');
      return withOpen('Network', network, make);
    },
    query(kind, id, query = hcnQuery()) {
      return withOpen(kind, id, (h) => properties(kind, h, query));
    },
    async modify(kind, id, settings) {
      await withOpen(kind, id, (h) => hcnCall(hcnPrototypes(kind).modify, [h, settings, [null]]));
    },
    async remove(kind, id) {
      await hcnCall(hcnPrototypes(kind).remove, [guidToBytes(id), [null]]);
    },
  };

  const HNS_CALL = 'int32_t HNSCall(const char16_t *method, const char16_t *path, const char16_t *request, _Out_ void **response)';
  const hns: HnsHostAttach = {
    async hostAttach(endpointId, compartment) {
      guidToBytes(endpointId); // an ID, not a path fragment
      if (!Number.isInteger(compartment) || compartment < 0 || compartment > 0xffff_ffff) {
        throw new HcnError(HCN.INVALID_ARG, `compartment ${compartment} is not a compartment ID`);
      }
      const method = 'POST';
      const path = `/endpoints/${endpointId.trim().replace(/^\{|\}$/g, '')}/attach`;
      const request = JSON.stringify({ SystemType: 'Host', CompartmentId: compartment });
      const response: unknown[] = [null];
      let hr = E_UNEXPECTED;
      let thrown: unknown;
      try {
        hr = (await callAsync(hnsFn(HNS_CALL), method, path, request, response)) as number;
      } catch (e) {
        thrown = e;
      }
      const [text] = takeStrings([response]);
      if (thrown !== undefined) throw thrown;
      const err = hnsCallError(method, path, hr, text);
      if (err) throw err;
    },
  };

  return { hcn, hns };
}
