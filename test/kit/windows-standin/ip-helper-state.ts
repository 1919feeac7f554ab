// The IP Helper half of the stand-in's state: the host's interfaces and route table, and the calls on them
// (route rows created, deleted and listed; interface rows read and set), refusing what Windows refuses.
import { type Family, type IP, formatIP, formatPrefix, maxLen, parseIP, prefixOf } from '../../../src/net/ip.ts';
import { WIN32, type Standin, type StandinInterface, type StandinRoute } from './api.ts';
import type { Doc } from './hcn-documents.ts';
import { refuse, type Reply } from './wire.ts';

/** MIB_IPPROTO_* / NL_ROUTE_ORIGIN values the stand-in writes. */
export const PROTO_LOCAL = 2;
export const PROTO_NETMGMT = 3;
export const ORIGIN_MANUAL = 0;
export const ORIGIN_WELL_KNOWN = 1;

export class IpHelperState {
  protected readonly interfaces: StandinInterface[] = [];
  protected routes: StandinRoute[] = [];
  private nextIndex = 10;
  private nextLuidIndex = 1;


  newInterface(alias: string, o: Parameters<Standin['addInterface']>[1] & object): StandinInterface {
    const luid = o.luid ?? ((6n << 48n) | (BigInt(this.nextLuidIndex++) << 24n)); // IfType 6 (ethernet), NetLuidIndex
    const i: StandinInterface = {
      alias, luid, index: o.index ?? this.nextIndex++, ipv4Forwarding: o.ipv4Forwarding ?? false, ipv6Forwarding: o.ipv6Forwarding ?? false,
      families: o.families ?? [4, 6], metric: o.metric ?? 15, mtu: o.mtu ?? 1500,
    };
    if (this.interfaces.some((x) => x.luid === i.luid || x.index === i.index || x.alias.toLowerCase() === alias.toLowerCase())) {
      throw new Error(`stand-in: interface ${alias} (LUID ${i.luid}, index ${i.index}) clashes with an existing one`);
    }
    this.interfaces.push(i);
    return i;
  }

  protected byLuid(v: unknown): StandinInterface | undefined {
    let luid: bigint;
    try {
      luid = BigInt(String(v));
    } catch {
      return undefined;
    }
    return this.interfaces.find((i) => i.luid === luid);
  }

  /** The interface a row names: by LUID when it is set, else by index. */
  private rowInterface(a: Doc, notFound: number): StandinInterface {
    const luid = BigInt(String(a.luid ?? '0'));
    const index = Number(a.index ?? 0);
    if (luid === 0n && index === 0) refuse(WIN32.INVALID_PARAMETER, 'neither InterfaceLuid nor InterfaceIndex is set');
    const i = luid !== 0n ? this.interfaces.find((x) => x.luid === luid) : this.interfaces.find((x) => x.index === index);
    return i ?? refuse(notFound, `no interface with ${luid !== 0n ? `LUID ${luid}` : `index ${index}`}`);
  }

  private routeRow(a: Doc): { family: Family; destination: string; nextHop: string; iface: StandinInterface } {
    const family = a.family === 2 ? 4 : a.family === 23 ? 6 : refuse(WIN32.INVALID_PARAMETER, `DestinationPrefix family ${a.family}`);
    const len = Number(a.prefixLength);
    if (!Number.isInteger(len) || len < 0 || len > maxLen(family)) refuse(WIN32.INVALID_PARAMETER, `prefix length ${a.prefixLength}`);
    let dest: IP;
    try {
      dest = parseIP(String(a.destination));
    } catch {
      return refuse(WIN32.INVALID_PARAMETER, `destination ${a.destination}`);
    }
    const prefix = prefixOf(dest, len);
    if (formatIP(prefix.ip) !== formatIP(dest)) refuse(WIN32.INVALID_PARAMETER, `${formatIP(dest)}/${len} has host bits set`);
    if (a.nextHopFamily !== a.family) refuse(WIN32.INVALID_PARAMETER, 'NextHop is not specified (its family is not the destination\'s)');
    let nextHop: IP;
    try {
      nextHop = parseIP(String(a.nextHop));
    } catch {
      return refuse(WIN32.INVALID_PARAMETER, `next hop ${a.nextHop}`);
    }
    const site = Number(a.sitePrefixLength ?? 255);
    if (site !== 255 && site > len) refuse(WIN32.INVALID_PARAMETER, `SitePrefixLength ${site} is longer than the prefix`);
    if (Number(a.preferredLifetime ?? 0) > Number(a.validLifetime ?? 0xffffffff)) refuse(WIN32.INVALID_PARAMETER, 'PreferredLifetime > ValidLifetime');
    const iface = this.rowInterface(a, WIN32.NOT_FOUND);
    if (!iface.families.includes(family)) refuse(WIN32.NOT_FOUND, `interface ${iface.alias} has no IPv${family}`);
    return { family, destination: formatPrefix(prefix), nextHop: formatIP(nextHop), iface };
  }

  protected findRoute(family: Family, destination: string, nextHop: string, luid: bigint): number {
    return this.routes.findIndex((r) => r.family === family && r.destination === destination && r.nextHop === nextHop && r.interfaceLuid === luid);
  }

  protected createRoute(a: Doc): Reply {
    const { family, destination, nextHop, iface } = this.routeRow(a);
    if (this.findRoute(family, destination, nextHop, iface.luid) >= 0) {
      refuse(WIN32.OBJECT_ALREADY_EXISTS, `route ${destination} via ${nextHop} on ${iface.alias} exists`);
    }
    // InitializeIpForwardEntry's "illegal" metric and protocol mean: not given.
    const metric = Number(a.metric);
    const protocol = Number(a.protocol);
    this.routes.push({
      family, interfaceLuid: iface.luid, interfaceIndex: iface.index, destination, nextHop,
      metric: metric === 0xffffffff ? 0 : metric, protocol: protocol === -1 ? PROTO_NETMGMT : protocol, origin: ORIGIN_MANUAL,
    });
    return { code: 0 };
  }

  protected deleteRoute(a: Doc): Reply {
    const { family, destination, nextHop, iface } = this.routeRow(a);
    const i = this.findRoute(family, destination, nextHop, iface.luid);
    if (i < 0) refuse(WIN32.NOT_FOUND, `no route ${destination} via ${nextHop} on ${iface.alias}`);
    this.routes.splice(i, 1);
    return { code: 0 };
  }

  protected routeTable(a: Doc): Reply {
    const f = a.family === 0 ? 0 : a.family === 2 ? 4 : a.family === 23 ? 6 : refuse(WIN32.INVALID_PARAMETER, `family ${a.family}`);
    const hex = (text: string) => {
      const ip = parseIP(text);
      const words = ip.family === 4 ? [ip.w0] : [ip.w0, ip.w1, ip.w2, ip.w3];
      return words.map((w) => w.toString(16).padStart(8, '0')).join('');
    };
    // IPv4 rows first, as Windows lists them.
    const rows = [...this.routes]
      .sort((x, y) => x.family - y.family)
      .filter((r) => f === 0 || r.family === f)
      .map((r) => {
        const [addr, len] = r.destination.split('/');
        return [r.family === 4 ? 2 : 23, r.interfaceLuid, r.interfaceIndex, hex(addr), len, hex(r.nextHop), r.metric, r.protocol, r.origin].join('\t');
      });
    return { code: 0, rows };
  }

  private interfaceRow(a: Doc): { family: Family; iface: StandinInterface } {
    const family = a.family === 2 ? 4 : a.family === 23 ? 6 : refuse(WIN32.INVALID_PARAMETER, `Family ${a.family}`);
    const iface = this.rowInterface(a, WIN32.FILE_NOT_FOUND);
    if (!iface.families.includes(family)) refuse(WIN32.NOT_FOUND, `interface ${iface.alias} has no IPv${family}`);
    return { family, iface };
  }

  protected getInterface(a: Doc): Reply {
    const { family, iface } = this.interfaceRow(a);
    const fwd = family === 4 ? iface.ipv4Forwarding : iface.ipv6Forwarding;
    return { code: 0, rows: [[iface.luid, iface.index, fwd ? 1 : 0, 64, iface.metric, iface.mtu].join('\t')] };
  }

  protected setInterface(a: Doc): Reply {
    const { family, iface } = this.interfaceRow(a);
    if (family === 4 && Number(a.sitePrefixLength) !== 0) refuse(WIN32.INVALID_PARAMETER, `SitePrefixLength ${a.sitePrefixLength} for IPv4 (must be 0)`);
    if (family === 4) iface.ipv4Forwarding = Number(a.forwarding) !== 0;
    else iface.ipv6Forwarding = Number(a.forwarding) !== 0;
    return { code: 0, rows: [[iface.luid, iface.index].join('\t')] };
  }
}
