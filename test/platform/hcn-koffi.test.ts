// The pure parts of the native networking bindings (src/platform/hcn-koffi.ts, iphlpapi-koffi.ts) and how the
// platform finds their DLLs. The native calls themselves run under wine against stand-in DLLs (test/windows).
import t from 'tap';
import fc from 'fast-check';
import { HCN, HcnError } from '../../src/hns/model.ts';
import {
  E_FAIL, E_UNEXPECTED, failed, guidFromBytes, guidToBytes, hcnError, hcnPrototypes, hnsCallError, parseIdList, parseProperties,
  protoName, zeroGuid,
} from '../../src/platform/hcn-koffi.ts';
import { hresultFromWin32, win32Failure } from '../../src/platform/iphlpapi-koffi.ts';
import { IPHLPAPI_ENV, linuxPlatform, networkingDlls, realDeps } from '../../src/platform/platform.ts';
import type { WindowsNetworkingApis } from '../../src/platform/windows-net-api.ts';
import { windowsDouble } from './windows-double.ts';

t.test('GUID bytes: Data1..3 little-endian, Data4 in text order; round trips', async (t) => {
  const b = guidToBytes('00112233-4455-6677-8899-aabbccddeeff');
  t.equal(b.toString('hex'), '33221100' + '5544' + '7766' + '8899aabbccddeeff');
  t.equal(guidFromBytes(b), '00112233-4455-6677-8899-aabbccddeeff');
  t.equal(guidToBytes('{00112233-4455-6677-8899-AABBCCDDEEFF}').toString('hex'), b.toString('hex'), 'braces and upper case');
  t.equal(zeroGuid().toString('hex'), '00'.repeat(16));
  t.equal(guidFromBytes(zeroGuid()), '00000000-0000-0000-0000-000000000000');
  const r = fc.check(fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (bytes) => {
    const text = guidFromBytes(bytes);
    return /^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$/.test(text) && guidToBytes(text).equals(Buffer.from(bytes))
      && guidFromBytes(guidToBytes(text.toUpperCase())) === text;
  }), { numRuns: 1000 });
  t.notOk(r.failed, fc.defaultReportMessage(r) ?? 'holds');
  for (const bad of ['', 'nope', '00112233-4455-6677-8899-aabbccddeef', '{00112233-4455-6677-8899-aabbccddeeff', '00112233445566778899aabbccddeeff', 'g0112233-4455-6677-8899-aabbccddeeff']) {
    t.throws(() => guidToBytes(bad), { name: 'HcnError', code: HCN.INVALID_ARG }, `refused: ${JSON.stringify(bad)}`);
  }
  t.throws(() => guidFromBytes(new Uint8Array(15)), /16 bytes/);
});

t.test('checkForErrors: failure HRESULT or a non-empty record', async (t) => {
  t.equal(hcnError('HcnOpenNetwork', 0, null), undefined, 'S_OK, no record');
  t.equal(hcnError('HcnOpenNetwork', 0, ''), undefined, 'S_OK, empty record');
  t.equal(hcnError('HcnOpenNetwork', 1, '  '), undefined, 'S_FALSE is success');

  const notFound = hcnError('HcnOpenNetwork', 0x803b0001 | 0, '{"Success":false,"Error":"The network was not found. ","ErrorCode":2151350273}');
  t.ok(notFound instanceof HcnError);
  t.equal(notFound!.code, HCN.NETWORK_NOT_FOUND, 'a signed HRESULT from koffi becomes unsigned');
  t.equal(notFound!.message, 'The network was not found. (0x803B0001)');
  t.ok(notFound!.notFound);

  const noRecord = hcnError('HcnDeleteEndpoint', -2147023728 /* 0x80070490 */, null);
  t.equal(noRecord!.code, 0x80070490);
  t.equal(noRecord!.message, 'HcnDeleteEndpoint failed (0x80070490)');
  t.ok(noRecord!.notFound);

  const raw = hcnError('HcnModifyNetwork', 0x80070057 | 0, 'not json at all');
  t.equal(raw!.message, 'not json at all (0x80070057)', 'the record text when it is not JSON');
  t.equal(hcnError('HcnModifyNetwork', E_FAIL | 0, '{"Error":""}')!.message, '{"Error":""} (0x80004005)', 'an empty Error field: the record text');

  const okButRecord = hcnError('HcnCreateNetwork', 0, '{"Error":"policy already exists","ErrorCode":2151350290}');
  t.equal(okButRecord!.code, HCN.POLICY_ALREADY_EXISTS, 'success HRESULT with a record: the record\'s ErrorCode');
  t.equal(hcnError('HcnCreateNetwork', 0, '{"Error":"something"}')!.code, E_FAIL, 'no ErrorCode: E_FAIL');
  t.equal(hcnError('HcnCreateNetwork', 0, 'free text')!.code, E_FAIL);
  t.equal(hcnError('HcnCreateNetwork', 0, '{"Error":"x","ErrorCode":-2143617023}')!.code, 0x803b0001, 'a signed ErrorCode too');

  t.ok(failed(-1) && failed(0x80000000) && !failed(0) && !failed(1) && !failed(0x7fffffff));
});

t.test('HNSCall answers', async (t) => {
  const path = '/endpoints/x/attach';
  t.equal(hnsCallError('POST', path, 0, '{"Success":true,"Output":{}}'), undefined);
  t.equal(hnsCallError('POST', path, 0, null), undefined, 'no response with S_OK');
  const refused = hnsCallError('POST', path, 0, '{"Success":false,"Error":"Element not found.","ErrorCode":2147943568}');
  t.match(refused, { code: 0x80070490, message: 'Element not found. (0x80070490)' });
  t.match(hnsCallError('POST', path, 0, '{"Success":false}'), { code: E_FAIL, message: `HNSCall POST ${path} failed (0x80004005)` });
  t.match(hnsCallError('POST', path, 0x800706ba | 0, null), { code: 0x800706ba, message: `HNSCall POST ${path} failed (0x800706BA)` });
  t.match(hnsCallError('POST', path, 0x80070005 | 0, '{"Success":false,"Error":"Access is denied."}'), { code: 0x80070005, message: /^Access is denied\./ });
  t.match(hnsCallError('POST', path, 0, '<html>'), { code: E_UNEXPECTED });
});

t.test('result documents', async (t) => {
  t.strictSame(parseIdList('HcnEnumerateNetworks', null), []);
  t.strictSame(parseIdList('HcnEnumerateNetworks', ''), []);
  t.strictSame(parseIdList('HcnEnumerateNetworks', 'null'), []);
  t.strictSame(parseIdList('HcnEnumerateNetworks', '["A","b"]'), ['A', 'b']);
  t.throws(() => parseIdList('HcnEnumerateNetworks', '{"a":1}'), { code: E_UNEXPECTED, message: /HcnEnumerateNetworks returned a list/ });
  t.throws(() => parseIdList('HcnEnumerateNetworks', '[1]'), { code: E_UNEXPECTED });
  t.strictSame(parseProperties('HcnQueryNetworkProperties', '{"ID":"x","Name":"pods"}'), { ID: 'x', Name: 'pods' });
  t.throws(() => parseProperties('HcnQueryNetworkProperties', null), { code: E_UNEXPECTED, message: /no properties/ });
  t.throws(() => parseProperties('HcnQueryNetworkProperties', '[]'), { code: E_UNEXPECTED });
});

t.test('prototypes follow hcsshim', async (t) => {
  const n = hcnPrototypes('Network');
  t.equal(protoName(n.enumerate), 'HcnEnumerateNetworks');
  t.equal(protoName(n.query), 'HcnQueryNetworkProperties');
  t.equal(protoName(hcnPrototypes('Namespace').close), 'HcnCloseNamespace');
  t.match(hcnPrototypes('Endpoint').create, /^int32_t HcnCreateEndpoint\(void \*network, const void \*id, const char16_t \*settings, _Out_ void \*\*endpoint, _Out_ void \*\*result\)$/);
  t.match(hcnPrototypes('Namespace').create, /^int32_t HcnCreateNamespace\(const void \*id,/);
  for (const k of ['Network', 'Endpoint', 'Namespace'] as const) {
    t.strictSame(Object.values(hcnPrototypes(k)).map(protoName), [
      `HcnEnumerate${k}s`, `HcnCreate${k}`, `HcnOpen${k}`, `HcnModify${k}`, `HcnQuery${k}Properties`, `HcnDelete${k}`, `HcnClose${k}`,
    ]);
  }
});

t.test('Win32 errors from IP Helper', async (t) => {
  t.equal(hresultFromWin32(5010), 0x80071392);
  t.equal(hresultFromWin32(1168), 0x80070490);
  t.equal(hresultFromWin32(0), 0);
  t.equal(hresultFromWin32(0x80070005), 0x80070005, 'an HRESULT passes through');
  t.equal(hresultFromWin32(0x80070005 | 0), 0x80070005);
  const exists = win32Failure('CreateIpForwardEntry2', 5010);
  t.match(exists, { code: HCN.ALREADY_EXISTS, message: 'CreateIpForwardEntry2: the object already exists (0x80071392)' });
  const gone = win32Failure('DeleteIpForwardEntry2', 1168, '10.0.0.0/24 via 0.0.0.0');
  t.match(gone, { code: HCN.ELEMENT_NOT_FOUND, message: 'DeleteIpForwardEntry2: element not found (10.0.0.0/24 via 0.0.0.0) (0x80070490)' });
  t.ok(gone.notFound);
  t.match(win32Failure('SetIpInterfaceEntry', 4321), { code: 0x800710e1, message: /^SetIpInterfaceEntry: Win32 error 4321/ });
});

t.test('platform.networking(): System32 by full path, the stand-in rule, Linux refuses', async (t) => {
  t.strictSame(networkingDlls({}), {
    computenetwork: 'C:\\Windows\\System32\\computenetwork.dll',
    vmcompute: 'C:\\Windows\\System32\\vmcompute.dll',
    iphlpapi: 'C:\\Windows\\System32\\iphlpapi.dll',
    ole32: 'C:\\Windows\\System32\\ole32.dll',
  });
  t.match(networkingDlls({ SystemRoot: 'D:\\WINNT\\' }), { iphlpapi: 'D:\\WINNT\\System32\\iphlpapi.dll', computenetwork: 'D:\\WINNT\\System32\\computenetwork.dll' });
  t.match(networkingDlls({ [IPHLPAPI_ENV]: 'bs-iphlpapi.dll' }), { iphlpapi: 'C:\\Windows\\System32\\bs-iphlpapi.dll', vmcompute: 'C:\\Windows\\System32\\vmcompute.dll' });
  t.match(networkingDlls({ [IPHLPAPI_ENV]: '' }), { iphlpapi: 'C:\\Windows\\System32\\iphlpapi.dll' }, 'empty is unset');
  for (const bad of ['C:\\tmp\\x.dll', '..\\x.dll', 'sub/x.dll', 'C:x.dll', '..', '\\\\server\\share\\x.dll']) {
    t.throws(() => networkingDlls({ [IPHLPAPI_ENV]: bad }), new RegExp(`${IPHLPAPI_ENV} must be a DLL file name`), `refused: ${bad}`);
  }

  const apis = { hcn: {}, hns: {}, ipHelper: {} } as unknown as WindowsNetworkingApis;
  const w = windowsDouble({ env: { SystemRoot: 'C:\\Windows', [IPHLPAPI_ENV]: 'bs-iphlpapi.dll' }, networking: async () => apis });
  t.equal(await w.platform.networking(), apis);
  t.match(w.networkingLoads, [{ iphlpapi: 'C:\\Windows\\System32\\bs-iphlpapi.dll', ole32: 'C:\\Windows\\System32\\ole32.dll' }]);

  const pathy = windowsDouble({ env: { [IPHLPAPI_ENV]: 'Z:\\tmp\\evil.dll' }, networking: async () => apis });
  await t.rejects(pathy.platform.networking(), new RegExp(IPHLPAPI_ENV));
  t.equal(pathy.networkingLoads.length, 0, 'nothing loaded');

  const broken = windowsDouble({ networking: async () => { throw new Error('Cannot find the native Koffi module'); } });
  await t.rejects(broken.platform.networking(), /cannot load the Windows networking APIs \(C:\\Windows\\System32\\computenetwork\.dll.*Koffi/);

  await t.rejects(linuxPlatform({ ...realDeps(), env: {} }).networking(), /the HNS dataplane needs Windows/);
});
