// The status page's files as strings (see serve.ts for why they are embedded). The script is plain ES2020 for the
// browser, written without template literals so it can live inside String.raw; test/status/ui.test.ts compiles it.
// Every value from the daemon reaches the DOM through textContent or an attribute, never as HTML.

export const INDEX_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>blockspeaker</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="ui/style.css">
<script src="ui/app.js" defer></script>
</head>
<body data-refreshes="0">
<header>
  <h1>blockspeaker <span id="title-node"></span></h1>
  <span id="conn" class="conn">connecting&#8230;</span>
</header>
<main>
  <section id="node">
    <h2>Node</h2>
    <dl id="node-facts" class="facts"></dl>
  </section>
  <section id="dataplane">
    <h2>Dataplane</h2>
    <dl id="dataplane-facts" class="facts"></dl>
    <div id="dataplane-detail"></div>
  </section>
  <section id="peers">
    <h2>BGP peers</h2>
    <table>
      <thead><tr><th>Peer</th><th>ASN</th><th>State</th><th>Up</th><th class="num">Received</th><th class="num">Accepted</th><th class="num">Sent</th><th>Graceful restart</th><th>Last error</th></tr></thead>
      <tbody id="peer-rows"></tbody>
    </table>
  </section>
  <section id="ipam">
    <h2>IP pools</h2>
    <table>
      <thead><tr><th>Pool</th><th>CIDR</th><th class="num">Block</th><th class="num">Blocks</th><th class="num">Allocated</th><th class="num">Free</th><th class="num">Reserved</th><th>Used</th></tr></thead>
      <tbody id="pool-rows"></tbody>
    </table>
    <h2>Blocks of this node</h2>
    <div id="block-list" class="blocks"></div>
    <h3>Borrowed addresses</h3>
    <table>
      <thead><tr><th>Address</th><th>Block</th><th>From host</th></tr></thead>
      <tbody id="borrowed-rows"></tbody>
    </table>
  </section>
  <section id="lookup">
    <h2>Route lookup</h2>
    <form id="lpm-form">
      <label for="lpm-input">Longest match for</label>
      <input id="lpm-input" name="lpm" placeholder="10.0.0.1 or fd00::1" autocomplete="off" spellcheck="false">
      <button type="submit">Look up</button>
    </form>
    <div id="lpm-result" aria-live="polite"></div>
  </section>
  <section id="warnings">
    <h2>Warnings</h2>
    <ul id="warning-list"></ul>
  </section>
</main>
<footer>Live view of <code>/overview</code>; JSON at <a href="status">/status</a>, <a href="peers">/peers</a>, <a href="ipam/pools">/ipam/pools</a>, <a href="dataplane">/dataplane</a>, <a href="metrics">/metrics</a>.</footer>
</body>
</html>
`;

export const STYLE_CSS = String.raw`:root { --fg: #1d232a; --muted: #66707a; --line: #dde2e7; --bg: #f6f8fa; --ok: #1a7f37; --bad: #cf222e;
  --warn: #9a6700; --alloc: #2f6fd6; --resv: #8c959f; --free: #e3e8ee; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; justify-content: space-between; padding: 10px 20px; background: #24292f; color: #fff; }
header h1 { font-size: 18px; margin: 0; font-weight: 600; }
#title-node { color: #9ecbff; }
.conn { font-size: 12px; padding: 2px 8px; border-radius: 10px; background: #57606a; }
.conn.live { background: var(--ok); }
.conn.down { background: var(--bad); }
main { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 16px; padding: 16px 20px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 0; overflow-x: auto; }
#peers, #ipam { grid-column: 1 / -1; }
h2 { font-size: 15px; margin: 4px 0 8px; }
h3 { font-size: 13px; margin: 12px 0 6px; color: var(--muted); }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
.num { text-align: right; }
.empty { color: var(--muted); font-style: italic; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; background: var(--free); }
.badge.ok { background: #dafbe1; color: var(--ok); }
.badge.bad { background: #ffebe9; color: var(--bad); }
.badge.warn { background: #fff8c5; color: var(--warn); }
.badge.role { background: #ddf4ff; color: #0550ae; margin-left: 6px; }
.error { color: var(--bad); overflow-wrap: anywhere; }
.bar { display: flex; height: 12px; min-width: 140px; border-radius: 3px; overflow: hidden; background: var(--free); }
.bar span { display: block; height: 100%; }
.usage { display: flex; gap: 8px; align-items: center; }
.usage .bar { flex: 1; }
.bar .alloc { background: var(--alloc); }
.bar .resv { background: var(--resv); }
.blocks { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 8px; }
.block { border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; }
.block .head { display: flex; justify-content: space-between; font-weight: 600; margin-bottom: 4px; }
.block .legend { font-size: 12px; color: var(--muted); margin-top: 3px; }
form { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
input { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 4px; min-width: 220px; }
button { font: inherit; padding: 4px 12px; border: 1px solid #1f883d; background: #1f883d; color: #fff; border-radius: 4px; cursor: pointer; }
#lpm-result { margin-top: 8px; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; max-height: 320px; overflow: auto; font-size: 12px; }
ul { margin: 0; padding-left: 18px; }
footer { padding: 0 20px 16px; color: var(--muted); font-size: 12px; }
`;

export const APP_JS = String.raw`(function () {
  'use strict';
  // Refresh period: ?refresh=SECONDS on the page's URL (1..60), default 2. Failures back off to 30 s.
  var q = new URLSearchParams(location.search);
  var every = Math.min(60, Math.max(1, Number(q.get('refresh')) || 2)) * 1000;
  var refreshes = 0;
  var failures = 0;
  var timer = null;

  function $(id) { return document.getElementById(id); }

  // h('td', { class: 'num' }, 'text', childNode, [more], ...): strings become text nodes, never markup.
  function h(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        e.setAttribute(k, String(v));
      });
    }
    var add = function (c) {
      if (c === null || c === undefined) return;
      if (Array.isArray(c)) c.forEach(add);
      else e.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
    };
    for (var i = 2; i < arguments.length; i++) add(arguments[i]);
    return e;
  }

  function fill(parent, nodes) {
    parent.replaceChildren.apply(parent, nodes);
  }

  function emptyRow(cols, text) {
    return h('tr', null, h('td', { colspan: cols, class: 'empty' }, text));
  }

  function duration(s) {
    if (!(s > 0)) return '-';
    var d = Math.floor(s / 86400), hr = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    return d ? d + 'd ' + hr + 'h' : hr ? hr + 'h ' + m + 'm' : m ? m + 'm ' + (s % 60) + 's' : s + 's';
  }

  function pct(x) { return (x * 100).toFixed(1) + '%'; }

  function badge(text, kind) { return h('span', { class: 'badge' + (kind ? ' ' + kind : '') }, text); }

  // allocated | reserved | free, as widths of one bar.
  function bar(allocated, reserved, size) {
    var b = h('div', { class: 'bar', role: 'img', 'aria-label': allocated + ' allocated, ' + reserved + ' reserved of ' + size,
      title: allocated + ' allocated, ' + reserved + ' reserved, ' + (size - allocated - reserved) + ' free of ' + size });
    if (size > 0) {
      var a = h('span', { class: 'alloc' });
      a.style.width = (100 * allocated / size) + '%';
      var r = h('span', { class: 'resv' });
      r.style.width = (100 * reserved / size) + '%';
      b.appendChild(a);
      b.appendChild(r);
    }
    return b;
  }

  function facts(dl, pairs) {
    var out = [];
    pairs.forEach(function (p) {
      out.push(h('dt', null, p[0]));
      out.push(h('dd', p[2] || null, p[1]));
    });
    fill(dl, out);
  }

  // ---- node ------------------------------------------------------------------------------------------------------
  function renderNode(o) {
    var n = o.node;
    $('title-node').textContent = n.name;
    document.title = 'blockspeaker ' + n.name;
    var ready = n.ready ? badge('ready', 'ok') : badge('not ready: ' + (n.notReady.length ? 'waiting for ' + n.notReady.join(', ') : 'unknown'), 'bad');
    facts($('node-facts'), [
      ['Name', n.name], ['OS', n.os], ['ASN', n.asn === null ? '-' : n.asn], ['Router ID', n.routerId || '-'],
      ['Uptime', duration(n.uptime)], ['Ready', ready, { id: 'node-ready', 'data-ready': String(n.ready) }],
      ['Routes in RIB', o.routes], ['Version', n.version],
    ]);
  }

  // ---- peers -----------------------------------------------------------------------------------------------------
  // Mesh and route-reflector peers are marked from whatever the peer entry says about its role.
  function peerRoles(p) {
    var roles = [];
    if (typeof p.role === 'string' && p.role) roles.push(p.role);
    if (p.mesh === true || p.source === 'mesh' || p.origin === 'mesh') roles.push('mesh');
    if (p.routeReflectorClient === true || p.rrClient === true) roles.push('reflector client');
    if (p.routeReflector === true || p.reflector === true) roles.push('reflector');
    return roles.filter(function (r, i) { return roles.indexOf(r) === i; });
  }

  function grText(p) {
    var gr = p.capabilities && p.capabilities.gracefulRestart;
    var parts = [];
    if (p.prefixes && p.prefixes.stale > 0) parts.push('helping: ' + p.prefixes.stale + ' stale');
    if (gr) parts.push((gr.restarting ? 'peer restarted, ' : '') + 'on (' + gr.restartTime + ' s)');
    else if (p.state === 'Established') parts.push('off');
    return parts.length ? parts.join('; ') : '-';
  }

  function renderPeers(peers) {
    var rows = peers.map(function (p) {
      var state = p.state === 'Established' ? badge(p.state, 'ok') : badge(p.state, p.state === 'Idle' || p.state === 'Active' ? 'bad' : 'warn');
      var who = h('td', null, p.address);
      peerRoles(p).forEach(function (r) { who.appendChild(badge(r, 'role')); });
      if (p.type) who.appendChild(badge(p.type, 'role'));
      var pr = p.prefixes || {};
      return h('tr', { 'data-peer': p.address, 'data-state': p.state },
        who, h('td', null, p.asn), h('td', { class: 'state' }, state), h('td', null, duration(p.uptime)),
        h('td', { class: 'num' }, pr.received), h('td', { class: 'num' }, pr.accepted), h('td', { class: 'num' }, pr.sent),
        h('td', null, grText(p)), h('td', { class: p.lastError ? 'error' : 'empty' }, p.lastError || '-'));
    });
    fill($('peer-rows'), rows.length ? rows : [emptyRow(9, 'no BGP peers configured')]);
  }

  // ---- IPAM ------------------------------------------------------------------------------------------------------
  function renderIpam(ipam) {
    if (!ipam) {
      fill($('pool-rows'), [emptyRow(8, 'no ipam section in the config')]);
      fill($('block-list'), []);
      fill($('borrowed-rows'), [emptyRow(3, '-')]);
      return;
    }
    var pools = ipam.pools.map(function (p) {
      return h('tr', { 'data-pool': p.name },
        h('td', null, p.name, p.disabled ? badge('disabled', 'warn') : null), h('td', null, p.cidr), h('td', { class: 'num' }, '/' + p.blockSize),
        h('td', { class: 'num' }, p.blocks), h('td', { class: 'num' }, p.allocated), h('td', { class: 'num' }, p.free),
        h('td', { class: 'num' }, p.reserved), h('td', null, h('div', { class: 'usage' }, bar(p.allocated, p.reserved, p.size), h('span', null, pct(p.utilisation)))));
    });
    fill($('pool-rows'), pools.length ? pools : [emptyRow(8, 'no pools')]);
    var blocks = ipam.blocks.map(function (b) {
      return h('div', { class: 'block', 'data-block': b.cidr, 'data-utilisation': b.utilisation },
        h('div', { class: 'head' }, h('span', null, b.cidr), h('span', { class: 'used' }, pct(b.utilisation) + ' used')),
        bar(b.allocated, b.reserved, b.size),
        h('div', { class: 'legend' }, 'pool ' + b.pool + ' \u00b7 ' + b.allocated + ' allocated \u00b7 ' + b.free + ' free \u00b7 ' +
          b.reserved + ' reserved' + (b.borrowable ? '' : ' \u00b7 not borrowable')));
    });
    fill($('block-list'), blocks.length ? blocks : [h('p', { class: 'empty' }, 'this node has no blocks yet')]);
    var borrowed = ipam.borrowed.map(function (x) {
      return h('tr', { 'data-borrowed': x.address }, h('td', null, x.address), h('td', null, x.block || '-'), h('td', null, x.from || '-'));
    });
    fill($('borrowed-rows'), borrowed.length ? borrowed : [emptyRow(3, 'none')]);
  }

  // ---- dataplane and warnings ------------------------------------------------------------------------------------
  function isScalar(v) { return v === null || typeof v !== 'object'; }

  function renderDataplane(dp) {
    dp = dp || {};
    var pairs = [];
    Object.keys(dp).forEach(function (k) {
      var v = dp[k];
      if (k === 'lastError' || !isScalar(v)) return;
      pairs.push([k, v === null ? '-' : String(v), k === 'errors' && v > 0 ? { class: 'error' } : null]);
    });
    if (dp.lastError) pairs.push(['lastError', typeof dp.lastError === 'string' ? dp.lastError : JSON.stringify(dp.lastError), { class: 'error', id: 'dataplane-error' }]);
    facts($('dataplane-facts'), pairs);
    var detail = [];
    Object.keys(dp).forEach(function (k) {
      var v = dp[k];
      if (isScalar(v) || k === 'lastError') return;
      var open = k === 'lastPlan' ? { open: '' } : null;
      detail.push(h('details', open, h('summary', null, k === 'lastPlan' ? 'last plan' : k), h('pre', null, JSON.stringify(v, null, 2))));
    });
    fill($('dataplane-detail'), detail);
  }

  // One entry per key with its count, bounded by the daemon (evicted: how many older ones it dropped).
  function renderWarnings(ws) {
    var items = (ws.entries || []).map(function (w) {
      return h('li', { class: 'error', title: 'first ' + w.firstSeen + ', last ' + w.lastSeen }, w.message, w.count > 1 ? ' (seen ' + w.count + ' times)' : null);
    });
    if (ws.evicted > 0) items.push(h('li', { class: 'empty' }, ws.evicted + ' older warnings dropped to keep the list at ' + ws.limit));
    fill($('warning-list'), items.length ? items : [h('li', { class: 'empty' }, 'none')]);
  }

  // ---- refresh ---------------------------------------------------------------------------------------------------
  function conn(text, kind) {
    var c = $('conn');
    c.textContent = text;
    c.className = 'conn ' + kind;
  }

  function errorOf(res) {
    return res.text().then(function (t) {
      try { return JSON.parse(t).error || t; } catch (e) { return t || res.statusText; }
    }).then(function (msg) { throw new Error('HTTP ' + res.status + ': ' + msg); });
  }

  function refresh() {
    fetch('overview', { cache: 'no-store', headers: { accept: 'application/json' } })
      .then(function (res) { return res.ok ? res.json() : errorOf(res); })
      .then(function (o) {
        renderNode(o);
        renderPeers(o.peers);
        renderIpam(o.ipam);
        renderDataplane(o.dataplane);
        renderWarnings(o.warnings);
        failures = 0;
        refreshes++;
        document.body.setAttribute('data-refreshes', String(refreshes));
        conn('live \u00b7 ' + new Date(o.at).toLocaleTimeString(), 'live');
        schedule(every);
      })
      .catch(function (e) {
        failures++;
        var wait = Math.min(30000, every * Math.pow(2, failures));
        conn('daemon unreachable (' + e.message + '); retrying in ' + Math.round(wait / 1000) + ' s', 'down');
        schedule(wait);
      });
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(refresh, ms);
  }

  // ---- route lookup ----------------------------------------------------------------------------------------------
  function showRoute(r) {
    var rows = r.paths.map(function (p) {
      var a = p.attributes || {};
      return h('tr', null, h('td', null, p.best ? badge('best', 'ok') : ''), h('td', null, p.peer || p.source),
        h('td', null, a.NEXT_HOP || '-'), h('td', null, a.AS_PATH || '-'), h('td', null, a.ORIGIN || '-'),
        h('td', null, p.stale ? badge('stale', 'warn') : ''));
    });
    return h('div', { id: 'lpm-route', 'data-prefix': r.prefix },
      h('p', null, r.address + ' is covered by ', h('strong', null, r.prefix)),
      h('table', null, h('thead', null, h('tr', null, h('th', null, ''), h('th', null, 'From'), h('th', null, 'Next hop'),
        h('th', null, 'AS path'), h('th', null, 'Origin'), h('th', null, ''))), h('tbody', null, rows)));
  }

  function lookup(ev) {
    ev.preventDefault();
    var text = $('lpm-input').value.trim();
    var out = $('lpm-result');
    if (!text) {
      fill(out, [h('p', { id: 'lpm-error', class: 'error', role: 'alert' }, 'type an IPv4 or IPv6 address')]);
      return;
    }
    fill(out, [h('p', { class: 'empty' }, 'looking up ' + text + '\u2026')]);
    fetch('routes?lpm=' + encodeURIComponent(text), { cache: 'no-store' })
      .then(function (res) { return res.ok ? res.json() : errorOf(res); })
      .then(function (r) { fill(out, [showRoute(r)]); })
      .catch(function (e) { fill(out, [h('p', { id: 'lpm-error', class: 'error', role: 'alert' }, e.message)]); });
  }

  $('lpm-form').addEventListener('submit', lookup);
  refresh();
})();
`;
