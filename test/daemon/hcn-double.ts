// An in-memory HcnApi for tests (never shipped): networks, endpoints and namespaces with HCN's answers where the CNI
// code depends on them — unknown IDs refused with HCN's codes (network 0x803B0001, endpoint 0x803B0002, namespace
// 0x80070490), an endpoint attached twice refused (0x803B0014), an attached endpoint not deletable (0x803B002C, so
// the code under test must detach first), query filters on any top-level field, and faults injected per call.
import { randomUUID } from 'node:crypto';
import type { HcnApi, HcnKind } from '../../src/platform/windows-net-api.ts';
import { HCN, HcnError, sameId } from '../../src/hns/model.ts';

type Obj = Record<string, unknown>;
type Op = 'enumerate' | 'create' | 'query' | 'modify' | 'remove';

const NOT_FOUND: Record<HcnKind, number> = { Network: HCN.NETWORK_NOT_FOUND, Endpoint: HCN.ENDPOINT_NOT_FOUND, Namespace: HCN.ELEMENT_NOT_FOUND };

export class HcnDouble implements HcnApi {
  readonly objects: Record<HcnKind, Map<string, Obj>> = { Network: new Map(), Endpoint: new Map(), Namespace: new Map() };
  readonly calls: { op: Op; kind: HcnKind; id?: string }[] = [];
  private faults: { op: Op; kind: HcnKind; code: number; when?: (settings: string) => boolean }[] = [];
  private macSeq = 1;

  addNetwork(name: string, type = 'L2Bridge'): string {
    const id = randomUUID().toUpperCase();
    this.objects.Network.set(id.toLowerCase(), { ID: id, Name: name, Type: type, SchemaVersion: { Major: 2, Minor: 0 } });
    return id;
  }

  addNamespace(): string {
    const id = randomUUID();
    this.objects.Namespace.set(id, { ID: id.toUpperCase(), Type: 'HostDefault', Resources: [], SchemaVersion: { Major: 2, Minor: 0 } });
    return id;
  }

  /** An endpoint made behind the code's back (host endpoints, other plugins', leaks). */
  addEndpoint(props: Obj & { HostComputeNetwork: string }): string {
    const id = randomUUID();
    this.objects.Endpoint.set(id, { ...props, ID: id.toUpperCase() });
    return id;
  }

  /** The next matching call fails with `code` (HCN unavailable by default). */
  failNext(op: Op, kind: HcnKind, code: number = HCN.UNAVAILABLE, when?: (settings: string) => boolean): void {
    this.faults.push({ op, kind, code, when });
  }

  endpoints(): Obj[] {
    return [...this.objects.Endpoint.values()];
  }

  namespaceEndpoints(ns: string): string[] {
    return ((this.objects.Namespace.get(ns.toLowerCase())?.Resources ?? []) as { Data: { ID: string } }[]).map((r) => r.Data.ID.toLowerCase());
  }

  private fault(op: Op, kind: HcnKind, settings = ''): void {
    const i = this.faults.findIndex((f) => f.op === op && f.kind === kind && (!f.when || f.when(settings)));
    if (i < 0) return;
    const [f] = this.faults.splice(i, 1);
    throw new HcnError(f!.code, `injected ${op} ${kind} failure`);
  }

  private get(kind: HcnKind, id: string): Obj {
    const o = this.objects[kind].get(id.replace(/[{}]/g, '').toLowerCase());
    if (!o) throw new HcnError(NOT_FOUND[kind], `${kind} ${id} not found`);
    return o;
  }

  async enumerate(kind: HcnKind, query: string): Promise<string[]> {
    this.calls.push({ op: 'enumerate', kind });
    this.fault('enumerate', kind, query);
    const q = JSON.parse(query) as { SchemaVersion: { Major: number }; Filter?: string };
    if (q.SchemaVersion?.Major !== 2) throw new HcnError(HCN.INVALID_JSON, 'query needs SchemaVersion 2');
    const filter = (q.Filter ? JSON.parse(q.Filter) : {}) as Obj;
    const out: string[] = [];
    for (const o of this.objects[kind].values()) {
      const ok = Object.entries(filter).every(([k, v]) => {
        const have = o[k];
        return typeof have === 'string' && typeof v === 'string' && (sameId(have, v) || have.toLowerCase() === v.toLowerCase());
      });
      if (ok) out.push(String(o.ID));
    }
    return out;
  }

  async create(kind: HcnKind, settings: string, network?: string): Promise<Obj> {
    this.calls.push({ op: 'create', kind });
    this.fault('create', kind, settings);
    const s = JSON.parse(settings) as Obj;
    if ((s.SchemaVersion as { Major?: number } | undefined)?.Major !== 2) throw new HcnError(HCN.INVALID_JSON, 'settings need SchemaVersion 2');
    if (kind !== 'Endpoint') throw new HcnError(HCN.REQUEST_UNSUPPORTED, `the double creates endpoints only`);
    const net = this.get('Network', network ?? '');
    if (s.HostComputeNetwork !== undefined && !sameId(String(s.HostComputeNetwork), String(net.ID))) throw new HcnError(HCN.INVALID_JSON, 'HostComputeNetwork differs from the network handle');
    if (!Array.isArray(s.IpConfigurations) || s.IpConfigurations.length === 0) throw new HcnError(HCN.INVALID_IP, 'no IpConfigurations');
    const id = randomUUID();
    const mac = `00-15-5D-00-00-${(this.macSeq++).toString(16).toUpperCase().padStart(2, '0')}`;
    const props: Obj = { ...s, ID: id.toUpperCase(), HostComputeNetwork: String(net.ID), MacAddress: s.MacAddress ?? mac, State: 1 };
    this.objects.Endpoint.set(id, props);
    return structuredClone(props);
  }

  async query(kind: HcnKind, id: string): Promise<Obj> {
    this.calls.push({ op: 'query', kind, id });
    this.fault('query', kind, id);
    return structuredClone(this.get(kind, id));
  }

  async modify(kind: HcnKind, id: string, settings: string): Promise<void> {
    this.calls.push({ op: 'modify', kind, id });
    this.fault('modify', kind, settings);
    const target = this.get(kind, id);
    if (kind !== 'Namespace') throw new HcnError(HCN.REQUEST_UNSUPPORTED, 'the double modifies namespaces only');
    const r = JSON.parse(settings) as { ResourceType?: string; RequestType?: string; Settings?: { EndpointId?: string } };
    if (r.ResourceType !== 'Endpoint' || !r.Settings?.EndpointId) throw new HcnError(HCN.INVALID_JSON, 'expected {ResourceType: Endpoint, Settings: {EndpointId}}');
    const ep = this.get('Endpoint', r.Settings.EndpointId);
    const res = target.Resources as { Type: string; Data: { ID: string } }[];
    const at = res.findIndex((x) => sameId(x.Data.ID, String(ep.ID)));
    if (r.RequestType === 'Add') {
      if (ep.HostComputeNamespace) throw new HcnError(HCN.ENDPOINT_ALREADY_ATTACHED, `endpoint ${ep.ID} is already attached`);
      res.push({ Type: 'Endpoint', Data: { ID: String(ep.ID) } });
      ep.HostComputeNamespace = String(target.ID);
    } else if (r.RequestType === 'Remove') {
      if (at < 0) throw new HcnError(HCN.ENDPOINT_NOT_FOUND, `endpoint ${ep.ID} is not in namespace ${id}`);
      res.splice(at, 1);
      delete ep.HostComputeNamespace;
    } else throw new HcnError(HCN.INVALID_JSON, `RequestType ${r.RequestType}`);
  }

  async remove(kind: HcnKind, id: string): Promise<void> {
    this.calls.push({ op: 'remove', kind, id });
    this.fault('remove', kind, id);
    const o = this.get(kind, id);
    if (kind === 'Endpoint' && o.HostComputeNamespace) throw new HcnError(HCN.ENTITY_HAS_REFERENCES, `endpoint ${id} is attached to namespace ${o.HostComputeNamespace}`);
    this.objects[kind].delete(id.replace(/[{}]/g, '').toLowerCase());
  }
}
