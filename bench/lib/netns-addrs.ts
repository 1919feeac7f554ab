// Many addresses in a namespace at once, for benches that put hundreds of peers on one veth link: the addresses
// with one `ip -batch`, and the other end's addresses as permanent neighbour entries. The kernel's neighbour table
// is shared by every namespace of the host (net.ipv4.neigh.default.gc_thresh2/3, 512/1024 by default): a thousand
// peers on each end of a link, resolved by ARP, overflow it ("neighbor table overflow" in dmesg, SYNs never sent),
// and the other namespaces on the host suffer too. Permanent entries are not counted against those thresholds
// (Linux 4.20+) and go away with the namespace.
import { execFileSync, spawn } from 'node:child_process';

/** Feed `ip -n NS -batch -` these lines ("addr add ...", "neigh replace ..."). */
export function ipBatch(ns: string, lines: string[]): Promise<void> {
  return new Promise<void>((res, rej) => {
    const p = spawn('ip', ['-n', ns, '-batch', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', rej);
    p.on('exit', (c) => (c === 0 ? res() : rej(new Error(`ip -n ${ns} -batch: ${err.trim()}`))));
    p.stdin.end(lines.map((l) => `${l}\n`).join(''));
  });
}

/** `addr add CIDR dev IFNAME` for each cidr, in one process. */
export function addAddresses(ns: string, ifname: string, cidrs: string[]): Promise<void> {
  return ipBatch(ns, cidrs.map((c) => `addr add ${c} dev ${ifname}`));
}

/** The MAC address of an interface in a namespace. */
export function macOf(ns: string, ifname: string): string {
  const [info] = JSON.parse(execFileSync('ip', ['-j', '-n', ns, 'link', 'show', 'dev', ifname], { encoding: 'utf8' })) as { address: string }[];
  return info.address;
}

/** Permanent neighbour entries: each address at `mac` on IFNAME (no ARP, nothing in the host's shared table limits). */
export function addNeighbours(ns: string, ifname: string, addrs: string[], mac: string): Promise<void> {
  return ipBatch(ns, addrs.map((a) => `neigh replace ${a} lladdr ${mac} dev ${ifname} nud permanent`));
}
