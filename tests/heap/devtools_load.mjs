// heap.devtools: Chrome DevTools' own heap snapshot loader (the heap
// snapshot worker of the chrome-devtools-frontend package, TypeScript,
// bundled here by esbuild, run in one thread: the secondary worker's part on
// a MessageChannel) loads each FILE=ID,ID,... and prints, as one JSON line
// per file, its node count, total size and its retained size of each ID.
// NODE_MODULES: the directory where npm ci installed both packages. The
// i18n module is replaced by a stub (its locale table is generated when
// DevTools is built): the worker only formats progress messages with it, the
// modules it imports register their UI strings.
import fs from 'node:fs';
import {createRequire} from 'node:module';
import os from 'node:os';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const mods = process.env.NODE_MODULES;
const require = createRequire(path.join(mods, 'noop.js'));
const esbuild = require('esbuild');
const worker = path.join(mods, 'chrome-devtools-frontend', 'front_end', 'entrypoints',
                         'heap_snapshot_worker');

const I18N_STUB = `
const any = () => any;
const stub = own => new Proxy(own, {get: (t, k) => k in t ? t[k] : any});
export const i18n = stub({serializeUIString: (s, v) => JSON.stringify({s, v})});
export const ByteUtilities = stub({}), DevToolsLocale = stub({}),
             NumberFormatter = stub({}), TimeUtilities = stub({});
`;

// ES2024, which the worker uses; Node before 22 lacks it.
Promise.withResolvers ??= function() {
  let resolve, reject;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  return {promise, resolve, reject};
};

async function bundle() {
  const out = await esbuild.build({
    stdin: {
      contents: "export {HeapSnapshotLoader} from './HeapSnapshotLoader.js';\n" +
                "export {SecondaryInitManager} from './HeapSnapshot.js';\n",
      resolveDir: worker, loader: 'ts',
    },
    bundle: true, platform: 'node', format: 'esm', write: false, logLevel: 'error',
    plugins: [{name: 'i18n-stub', setup(b) {
      b.onResolve({filter: /i18n\.js$/}, a =>
        path.resolve(a.resolveDir, a.path).endsWith(path.join('core', 'i18n', 'i18n.js')) ?
          {path: 'i18n', namespace: 'stub'} : undefined);
      b.onLoad({filter: /.*/, namespace: 'stub'}, () => ({contents: I18N_STUB, loader: 'js'}));
    }}],
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ljperf-devtools-'));
  const file = path.join(dir, 'heap_snapshot_worker.mjs');
  try {
    fs.writeFileSync(file, out.outputFiles[0].text);
    return await import(pathToFileURL(file).href);
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

async function load(dt, file) {
  const broken = [];
  const dispatcher = {sendEvent: (name, data) => { if (/Broken/.test(name)) broken.push(data); }};
  const loader = new dt.HeapSnapshotLoader(dispatcher);
  const text = fs.readFileSync(file, 'utf8');
  for (let i = 0; i < text.length; i += 1 << 20) loader.write(text.slice(i, i + (1 << 20)));
  loader.close();
  const {port1, port2} = new MessageChannel();
  new dt.SecondaryInitManager(port2);
  const snap = await loader.buildSnapshot(port1);
  port1.close();
  if (broken.length) throw new Error(file + ': ' + broken.join('; '));
  return snap;
}

(async () => {
  const dt = await bundle();
  for (const arg of process.argv.slice(2)) {
    const eq = arg.lastIndexOf('=');
    const file = arg.slice(0, eq);
    const snap = await load(dt, file);
    const want = new Set(arg.slice(eq + 1).split(',').filter(Boolean).map(Number));
    const retained = {};
    let total = 0;
    for (let it = snap.allNodes(); it.hasNext(); it.next()) {
      const node = it.item();
      total += node.selfSize();
      if (want.has(node.id())) retained[node.id()] = node.retainedSize();
    }
    console.log(JSON.stringify({file, nodes: snap.nodeCount, total, retained}));
  }
})().catch(e => { console.error('devtools: ' + (e && e.stack || e)); process.exit(1); });
