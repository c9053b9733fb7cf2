// heap.memlab: memlab (@memlab/heap-analysis, NODE_PATH) loads each
// FILE=ID,ID,... and prints, as one JSON line per file, its node count and
// its retained size of each ID.
const {getFullHeapFromFile} = require('@memlab/heap-analysis');

(async () => {
  for (const arg of process.argv.slice(2)) {
    const eq = arg.lastIndexOf('=');
    const file = arg.slice(0, eq);
    const heap = await getFullHeapFromFile(file);
    let nodes = 0;
    heap.nodes.forEach(() => { nodes++; });
    const retained = {};
    for (const id of arg.slice(eq + 1).split(',').filter(Boolean)) {
      const node = heap.getNodeById(Number(id));
      retained[id] = node ? node.retainedSize : null;
    }
    console.log(JSON.stringify({file, nodes, retained}));
  }
})().catch(e => { console.error('memlab: ' + (e && e.stack || e)); process.exit(1); });
