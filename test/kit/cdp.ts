// Headless Chromium (Debian's `chromium`) driven over the Chrome DevTools Protocol through --remote-debugging-pipe:
// JSON messages separated by NUL bytes on file descriptors 3 (to the browser) and 4 (from it). A pipe needs no
// WebSocket client (Node 20 has none) and no port, and it works through `ip netns exec`, which keeps the fds.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync, writeFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';

export const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p)) ?? null;

interface Pending {
  resolve(v: any): void;
  reject(e: Error): void;
  method: string;
}

export class Browser {
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Set<(m: { method: string; params: any; sessionId?: string }) => void>();
  private buf = '';
  private readonly exited: Promise<void>;

  private constructor(readonly child: ChildProcess, private readonly out: Writable, input: Readable) {
    input.setEncoding('utf8');
    input.on('data', (d: string) => {
      this.buf += d;
      let i: number;
      while ((i = this.buf.indexOf('\0')) >= 0) {
        const text = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        this.receive(JSON.parse(text));
      }
    });
    this.exited = new Promise((r) => child.once('exit', () => r()));
    child.once('exit', (code, sig) => {
      for (const p of this.pending.values()) p.reject(new Error(`chromium exited (${code ?? sig}) during ${p.method}`));
      this.pending.clear();
    });
  }

  /**
   * Start Chromium headless. `netns`: run it inside that network namespace (as the daemon's 127.0.0.1 lives there).
   * `log`: chromium's stderr goes to this file.
   */
  static launch(opts: { userDataDir: string; netns?: string; log: string; width?: number; height?: number }): Browser {
    if (!CHROMIUM) throw new Error('chromium not found: apt-get install chromium');
    const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
      // a headless tab counts as hidden: keep its timers (the page's polling) at full speed
      '--disable-background-timer-throttling', '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows', '--hide-scrollbars', '--mute-audio',
      `--user-data-dir=${opts.userDataDir}`, `--window-size=${opts.width ?? 1280},${opts.height ?? 1400}`, '--remote-debugging-pipe', 'about:blank'];
    const [cmd, argv] = opts.netns ? ['/usr/sbin/ip', ['netns', 'exec', opts.netns, CHROMIUM, ...args]] : [CHROMIUM, args];
    const fd = openSync(opts.log, 'a');
    const child = spawn(cmd, argv, { stdio: ['ignore', fd, fd, 'pipe', 'pipe'] });
    closeSync(fd);
    return new Browser(child, child.stdio[3] as Writable, child.stdio[4] as Readable);
  }

  private receive(m: { id?: number; result?: unknown; error?: { message: string; data?: string }; method?: string; params?: unknown; sessionId?: string }): void {
    if (m.id !== undefined) {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error) p.reject(new Error(`${p.method}: ${m.error.message}${m.error.data ? ` (${m.error.data})` : ''}`));
      else p.resolve(m.result);
    } else if (m.method) {
      for (const l of this.listeners) l({ method: m.method, params: m.params, sessionId: m.sessionId });
    }
  }

  send<T = any>(method: string, params: object = {}, sessionId?: string): Promise<T> {
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      this.out.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    });
  }

  /** Resolves on the next event `method` (of `sessionId`), rejects after timeoutMs. */
  event(method: string, sessionId: string | undefined, timeoutMs = 30_000): Promise<any> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.listeners.delete(l);
        reject(new Error(`no ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      const l = (m: { method: string; params: any; sessionId?: string }) => {
        if (m.method !== method || (sessionId && m.sessionId !== sessionId)) return;
        clearTimeout(timer);
        this.listeners.delete(l);
        resolve(m.params);
      };
      this.listeners.add(l);
    });
  }

  /** A new tab, attached (flat session). */
  async newPage(): Promise<Page> {
    const { targetId } = await this.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this, sessionId);
    await page.send('Page.enable');
    await page.send('Runtime.enable');
    return page;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    await this.send('Browser.close').catch(() => undefined);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(timer);
  }
}

export class Page {
  constructor(private readonly browser: Browser, readonly sessionId: string) {}

  send<T = any>(method: string, params: object = {}): Promise<T> {
    return this.browser.send<T>(method, params, this.sessionId);
  }

  /** Navigate and wait for the load event. */
  async goto(url: string): Promise<void> {
    const loaded = this.browser.event('Page.loadEventFired', this.sessionId);
    const r = await this.send<{ errorText?: string }>('Page.navigate', { url });
    if (r.errorText) throw new Error(`navigating to ${url}: ${r.errorText}`);
    await loaded;
  }

  /** Evaluate an expression in the page; promises are awaited; the value comes back as JSON. */
  async eval<T = any>(expression: string): Promise<T> {
    const r = await this.send<{ result: { value?: T }; exceptionDetails?: { text: string; exception?: { description?: string } } }>(
      'Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`in the page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value as T;
  }

  /** Focus an element, type text as keystrokes would insert it, press Enter. */
  async typeAndEnter(selector: string, text: string): Promise<void> {
    await this.eval(`(() => { const e = document.querySelector(${JSON.stringify(selector)}); e.focus(); e.select(); })()`);
    await this.send('Input.insertText', { text });
    for (const type of ['keyDown', 'keyUp']) {
      await this.send('Input.dispatchKeyEvent', { type, key: 'Enter', code: 'Enter', windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13,
        ...(type === 'keyDown' ? { text: '\r' } : {}) });
    }
  }

  /** A PNG of the whole page, written to `file`. */
  async screenshot(file: string): Promise<void> {
    const r = await this.send<{ data: string }>('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
    writeFileSync(file, Buffer.from(r.data, 'base64'));
  }
}
