// The stand-in server: the state and the rules behind the test-only computenetwork.dll, vmcompute.dll and
// bs-iphlpapi.dll (see build.ts). Each DLL export sends one JSON line over TCP to 127.0.0.1:%BS_STANDIN_PORT%:
//   {"fn":"HcnCreateNetwork","pid":1234,"args":{...}}
// and gets back text lines: the result code (HRESULT or Win32 error, unsigned decimal), then optional
//   "O <string>" (an out-string: properties, IDs, HNS response, alias), "E <error record>", "I <id>" (the object a
//   handle is opened on), "R <tab-separated fields>" (rows for IP Helper).
// The server holds HCN's networks, endpoints and namespaces (hcn-state.ts), the host's interfaces and route table
// (ip-helper-state.ts), and refuses what Windows refuses, with its codes. This file dispatches each call to them,
// seeds state for a test and serves the DLLs. Every call is recorded (`calls`, and a JSON-lines file with `log`).
//
// Codes chosen where Windows' own answer is not documented (so the product must not depend on them):
//  - creating an object with an ID that exists: NETWORK_ALREADY_EXISTS for networks, HRESULT_FROM_WIN32
//    (ERROR_ALREADY_EXISTS) for endpoints and namespaces;
//  - several Subnets on a single-subnet network type, an overlay Subnet without VSID, a bad RemoteSubnetRoute:
//    E_INVALIDARG (as src/hns/fake.ts); removing a policy that is not there: POLICY_NOT_FOUND;
//  - IP Helper, per the SDK docs: ConvertInterfaceAliasToLuid of an unknown alias and ConvertInterfaceLuidToIndex /
//    ...ToAlias of an unknown LUID: ERROR_INVALID_PARAMETER (87) ("the InterfaceAlias/InterfaceLuid parameter was
//    invalid"; Windows may answer ERROR_FILE_NOT_FOUND (2) for the LUID ones, as it does for an unknown index:
//    treat both as "no such interface"); Get/SetIpInterfaceEntry of an unknown LUID or index: ERROR_FILE_NOT_FOUND,
//    of an interface without that family: ERROR_NOT_FOUND; Create/DeleteIpForwardEntry2 naming no interface:
//    ERROR_NOT_FOUND (1168), and a Delete of a route that is not there: ERROR_NOT_FOUND too.
//  - GetIpInterfaceEntry reports SitePrefixLength 64 for both families, so a caller that passes the row back for
//    IPv4 unchanged gets ERROR_INVALID_PARAMETER, as on Windows.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import { type HnsEndpoint, type HnsNetwork, hresultText } from '../../../src/hns/model.ts';
import { formatIP, formatPrefix, parseIP, parsePrefix } from '../../../src/net/ip.ts';
import { HR, WIN32, type Standin, type StandinCall, type StandinInterface, type StandinRoute, type StandinState } from './api.ts';
import { clone, type Doc, isObj, ZERO_GUID } from './hcn-documents.ts';
import { HcnState, type Kind } from './hcn-state.ts';
import { ORIGIN_MANUAL, PROTO_NETMGMT } from './ip-helper-state.ts';
import { bigintJson, encode, Refusal, refuse, type Reply } from './wire.ts';

class StandinServer extends HcnState {
  readonly calls: StandinCall[] = [];

  constructor(private readonly log?: string) {
    super();
  }

  // ---- dispatch ----

  handle(line: string): string {
    let req: { fn?: unknown; pid?: unknown; args?: unknown };
    try {
      req = JSON.parse(line);
    } catch {
      return encode({ code: HR.E_UNEXPECTED, err: 'stand-in: request is not JSON' });
    }
    const fn = typeof req.fn === 'string' ? req.fn : '?';
    const args = isObj(req.args) ? req.args : {};
    const hcnStyle = fn.startsWith('Hcn');
    let reply: Reply;
    try {
      if (typeof args.local === 'number') refuse(args.local, String(args.why ?? 'refused by the DLL'));
      reply = this.call(fn, args);
    } catch (e) {
      if (!(e instanceof Refusal)) {
        // A bug here (or a request the DLLs never send): answered and recorded, so the failing test shows it.
        e = new Refusal(HR.E_UNEXPECTED, `stand-in failed: ${(e as Error).stack ?? e}`);
      }
      const r = e as Refusal;
      if (hcnStyle) {
        reply = { code: r.code, err: JSON.stringify({ Success: false, Error: r.message, ErrorCode: r.code >>> 0 }) };
      } else if (fn === 'HNSCall') {
        reply = { code: r.code, out: JSON.stringify({ Success: false, Error: `${r.message} (${hresultText(r.code)})` }) };
      } else {
        reply = { code: r.code };
      }
    }
    const call: StandinCall = { fn, args, hr: reply.code >>> 0, at: Date.now() };
    if (typeof req.pid === 'number') call.pid = req.pid;
    this.calls.push(call);
    if (this.log) fs.appendFileSync(this.log, `${JSON.stringify(call, bigintJson)}\n`);
    return encode(reply);
  }

  private call(fn: string, a: Doc): Reply {
    const hcn = /^Hcn(Enumerate|Create|Open|Modify|Query|Delete|Close)(Network|Endpoint|Namespace)(s|Properties)?$/.exec(fn);
    if (hcn) {
      const kind = hcn[2] as Kind;
      switch (hcn[1]) {
        case 'Enumerate':
          return this.enumerate(kind, a.query);
        case 'Create':
          return this.create(kind, a);
        case 'Open':
          return { code: 0, id: this.existing(kind, a.id) };
        case 'Modify':
          this.modify(kind, this.existing(kind, a.handle), a.settings);
          return { code: 0 };
        case 'Query':
          return { code: 0, out: JSON.stringify(this.query(kind, a)) };
        case 'Delete':
          this.remove(kind, this.existing(kind, a.id));
          return { code: 0 };
        case 'Close':
          return { code: 0 };
      }
    }
    switch (fn) {
      case 'HNSCall':
        return this.hnsCall(a);
      case 'InitializeIpForwardEntry':
      case 'InitializeIpInterfaceEntry':
      case 'FreeMibTable':
        return { code: 0 };
      case 'CreateIpForwardEntry2':
        return this.createRoute(a);
      case 'DeleteIpForwardEntry2':
        return this.deleteRoute(a);
      case 'GetIpForwardTable2':
        return this.routeTable(a);
      case 'GetIpInterfaceEntry':
        return this.getInterface(a);
      case 'SetIpInterfaceEntry':
        return this.setInterface(a);
      case 'ConvertInterfaceAliasToLuid': {
        const alias = String(a.alias).toLowerCase();
        const i = this.interfaces.find((x) => x.alias.toLowerCase() === alias) ?? refuse(WIN32.INVALID_PARAMETER, `no interface "${a.alias}"`);
        return { code: 0, rows: [i.luid.toString()] };
      }
      case 'ConvertInterfaceLuidToAlias': {
        const i = this.byLuid(a.luid) ?? refuse(WIN32.INVALID_PARAMETER, `no interface with LUID ${a.luid}`);
        if (Number(a.length) < i.alias.length + 1) refuse(WIN32.NOT_ENOUGH_MEMORY, `alias needs ${i.alias.length + 1} characters`);
        return { code: 0, out: i.alias };
      }
      case 'ConvertInterfaceLuidToIndex': {
        const i = this.byLuid(a.luid) ?? refuse(WIN32.INVALID_PARAMETER, `no interface with LUID ${a.luid}`);
        return { code: 0, rows: [String(i.index)] };
      }
    }
    return refuse(HR.E_UNEXPECTED, `stand-in has no function ${fn}`);
  }

  // ---- seeding and state ----

  addNamespace(type = 'HostDefault'): string {
    const id = randomUUID();
    this.namespaces.set(id, { doc: { Type: type, NamespaceId: this.nextCompartment++ }, endpoints: [] });
    return id;
  }

  addNetwork(settings: Doc): string {
    try {
      return this.create('Network', { id: ZERO_GUID, settings: JSON.stringify(settings) }).id!;
    } catch (e) {
      if (e instanceof Refusal) throw new Error(`stand-in: network refused: ${e.message} (${hresultText(e.code)})`);
      throw e;
    }
  }

  addRoute(row: Parameters<Standin['addRoute']>[0], on?: StandinInterface): StandinRoute {
    const iface =
      on ??
      this.interfaces.find((i) =>
        row.interfaceLuid !== undefined ? i.luid === row.interfaceLuid : row.interfaceIndex !== undefined ? i.index === row.interfaceIndex : i.alias === row.interfaceAlias,
      );
    if (!iface) throw new Error(`stand-in: no interface for route ${row.destination}`);
    const p = parsePrefix(row.destination);
    const r: StandinRoute = {
      family: p.family, interfaceLuid: iface.luid, interfaceIndex: iface.index, destination: formatPrefix(p), nextHop: formatIP(parseIP(row.nextHop)),
      metric: row.metric ?? 0, protocol: row.protocol ?? PROTO_NETMGMT, origin: row.origin ?? ORIGIN_MANUAL,
    };
    if (this.findRoute(r.family, r.destination, r.nextHop, r.interfaceLuid) >= 0) throw new Error(`stand-in: route ${r.destination} exists`);
    this.routes.push(r);
    return clone(r);
  }

  state(): StandinState {
    return {
      networks: [...this.networks.keys()].map((id) => this.view('Network', id) as HnsNetwork),
      endpoints: [...this.endpoints].map(([id, e]) => ({
        ID: id, network: e.network, ...(e.namespace ? { namespace: e.namespace } : {}),
        ...(e.hostCompartment !== undefined ? { hostCompartment: e.hostCompartment } : {}), properties: this.view('Endpoint', id) as HnsEndpoint,
      })),
      namespaces: [...this.namespaces].map(([id, ns]) => ({ ID: id, endpoints: [...ns.endpoints], properties: this.view('Namespace', id) })),
      routes: clone(this.routes),
      interfaces: clone(this.interfaces),
    };
  }
}

/** Starts the stand-in server on 127.0.0.1 (a free port); with `log`, every call is also appended there as JSON. */
export async function startStandin(opts: { log?: string } = {}): Promise<Standin> {
  const s = new StandinServer(opts.log);
  const sockets = new Set<net.Socket>();
  // Calls held back before the server acts on them (a test kills the caller meanwhile); released in order.
  const holds: { fn: string; match: (args: Record<string, unknown>) => boolean; reached: () => void; gate: Promise<void> }[] = [];
  const held = async (line: string): Promise<void> => {
    let req: { fn?: unknown; args?: unknown };
    try {
      req = JSON.parse(line);
    } catch {
      return;
    }
    const args = isObj(req.args) ? req.args : {};
    const h = holds.find((x) => x.fn === req.fn && x.match(args));
    if (!h) return;
    holds.splice(holds.indexOf(h), 1);
    h.reached();
    await h.gate;
  };
  const server = net.createServer((sock) => {
    sockets.add(sock);
    let buf = '';
    let done = false;
    sock.setEncoding('utf8');
    const answer = async () => {
      if (done) return;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      done = true;
      await held(buf.slice(0, nl));
      let out: string;
      try {
        out = s.handle(buf.slice(0, nl));
      } catch (e) {
        out = encode({ code: HR.E_UNEXPECTED, err: `stand-in crashed: ${(e as Error).stack}` });
      }
      sock.end(out);
    };
    sock.on('data', (d: string) => {
      buf += d;
      void answer();
    });
    sock.on('end', () => {
      if (!done) sock.end();
    });
    sock.on('error', () => {});
    sock.on('close', () => sockets.delete(sock));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    calls: s.calls,
    get state() {
      return s.state();
    },
    addNamespace: (type) => s.addNamespace(type),
    addInterface: (alias, o = {}, routes = []) => {
      const i = s.newInterface(alias, o);
      for (const r of routes) s.addRoute(r, i);
      return clone(i);
    },
    addRoute: (row) => s.addRoute(row),
    addNetwork: (settings) => s.addNetwork(settings),
    hold(fn, match = () => true) {
      let reached!: () => void;
      let release!: () => void;
      const seen = new Promise<void>((r) => (reached = r));
      const gate = new Promise<void>((r) => (release = r));
      holds.push({ fn, match, reached, gate });
      return { reached: seen, release };
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const sock of sockets) sock.destroy();
        server.close(() => resolve());
      }),
  };
}
