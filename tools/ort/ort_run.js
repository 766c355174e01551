// Runs an ONNX model in ONNX Runtime (CPU, 2 threads) on .npy inputs and writes
// its outputs as .npy; or compares two .npy files.
//   node ort_run.js run MODEL.onnx OUT_DIR IN.npy...   -> OUT_DIR/ort_<k>.npy
//   node ort_run.js time MODEL.onnx DIMS        -> {"forward_ms": median} on stdout; one
//       float32 input of DIMS (e.g. 8x3x224x224) from a fixed-seed normal draw;
//       2 warm-up runs, then repetitions for 3 s (5 to 30), as bench/ times kgrad
//   node ort_run.js compare TOL ORT_DIR KGRAD_DIR         ORT_DIR/ort_<k>.npy against
//       KGRAD_DIR's k-th output (out.npy, or out_0.npy, out_1.npy, ...); exit 1 when
//       a dtype, shape or count differs, or max |a - b| / scale > TOL, scale being
//       the tensor's largest magnitude, or the largest over all outputs for a tensor
//       that is zero up to round-off (below 1e-4 of that; e.g. the gradient of a bias
//       feeding a training-mode BatchNorm)
// NODE_PATH must reach onnxruntime-node (tools/ort/install_ort.sh).
'use strict';
const fs = require('fs');
const path = require('path');

const kTypes = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
  '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array], '|b1': ['bool', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim())
                    .filter(s => s.length > 0).map(Number);
  const type = kTypes[descr];
  if (!type) throw new Error(`${file}: dtype ${descr} is not supported`);
  const body = buf.subarray(start + hlen);
  const copy = Buffer.from(body);  // aligned
  const data = new type[1](copy.buffer, copy.byteOffset, copy.length / type[1].BYTES_PER_ELEMENT);
  return {descr, type: type[0], shape, data};
}

function writeNpy(file, descr, shape, data) {
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  while ((10 + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

async function run(model, outDir, inputs) {
  const ort = require('onnxruntime-node');
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 2});
  if (inputs.length !== session.inputNames.length) {
    throw new Error(`${model} takes ${session.inputNames.length} inputs, got ${inputs.length}`);
  }
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const a = readNpy(inputs[i]);
    const data = a.type === 'bool' ? Uint8Array.from(a.data) : a.data;
    feeds[name] = new ort.Tensor(a.type, data, a.shape);
  });
  const out = await session.run(feeds);
  session.outputNames.forEach((name, k) => {
    const t = out[name];
    const descr = Object.keys(kTypes).find(d => kTypes[d][0] === t.type);
    if (!descr) throw new Error(`output ${name}: type ${t.type}`);
    writeNpy(path.join(outDir, `ort_${k}.npy`), descr, t.dims, t.data);
  });
  console.log(`${path.basename(model)}: ${session.outputNames.length} outputs`);
}

// Standard normal floats from a small fixed-seed generator (xorshift + Box-Muller):
// timing does not depend on the values, only on there being no denormals or NaNs.
function normals(n) {
  const out = new Float32Array(n);
  let state = 0x2545F491;
  const uniform = () => {
    state ^= state << 13; state ^= state >>> 17; state ^= state << 5;
    return ((state >>> 0) + 0.5) / 4294967296;
  };
  for (let i = 0; i < n; ++i) {
    out[i] = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
  }
  return out;
}

async function time(model, dims) {
  const ort = require('onnxruntime-node');
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 2});
  if (session.inputNames.length !== 1) {
    throw new Error(`${model} takes ${session.inputNames.length} inputs; time wants one`);
  }
  const shape = dims.split('x').map(Number);
  if (shape.some(d => !Number.isInteger(d) || d <= 0)) throw new Error(`bad DIMS '${dims}'`);
  const feeds = {[session.inputNames[0]]:
                     new ort.Tensor('float32', normals(shape.reduce((a, b) => a * b, 1)), shape)};
  for (let i = 0; i < 2; ++i) await session.run(feeds);
  const times = [];
  const start = process.hrtime.bigint();
  const elapsedMs = () => Number(process.hrtime.bigint() - start) / 1e6;
  while (times.length < 30 && (times.length < 5 || elapsedMs() < 3000)) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({forward_ms: times[Math.floor(times.length / 2)],
                              ort: require('onnxruntime-node/package.json').version}));
}

function maxAbs(a) {
  let m = 0;
  for (let i = 0; i < a.data.length; ++i) {
    const v = Math.abs(Number(a.data[i]));
    if (Number.isFinite(v)) m = Math.max(m, v);  // a NaN or inf sets no scale
  }
  return m;
}

// KGRAD_DIR's outputs in order: out.npy alone, or out_0.npy, out_1.npy, ...
function kgradOutputs(dir) {
  if (fs.existsSync(path.join(dir, 'out.npy'))) return [path.join(dir, 'out.npy')];
  const files = [];
  for (let k = 0; fs.existsSync(path.join(dir, `out_${k}.npy`)); ++k) files.push(path.join(dir, `out_${k}.npy`));
  return files;
}

function compare(tol, ortDir, kgradDir) {
  const want = kgradOutputs(kgradDir);
  const got = want.map((_, k) => path.join(ortDir, `ort_${k}.npy`));
  const extra = path.join(ortDir, `ort_${want.length}.npy`);
  if (want.length === 0 || got.some(f => !fs.existsSync(f)) || fs.existsSync(extra)) {
    console.log(`MISMATCH: output counts differ (kgrad ${want.length})`);
    return false;
  }
  const ys = want.map(readNpy), xs = got.map(readNpy);
  const largest = Math.max(1e-6, ...ys.map(maxAbs));
  let ok = true;
  ys.forEach((y, k) => {
    const x = xs[k];
    if (x.descr !== y.descr || x.shape.join() !== y.shape.join()) {
      console.log(`MISMATCH output ${k}: ${x.descr}[${x.shape}] vs ${y.descr}[${y.shape}]`);
      ok = false;
      return;
    }
    // NaN against a number (or a number against NaN) is a mismatch; NaN against NaN and
    // equal infinities agree.
    let err = 0;
    for (let i = 0; i < y.data.length; ++i) {
      const a = Number(x.data[i]), b = Number(y.data[i]);
      if (a === b || (Number.isNaN(a) && Number.isNaN(b))) continue;
      const d = Math.abs(a - b);
      err = Number.isNaN(d) ? Infinity : Math.max(err, d);
    }
    const own = maxAbs(y);
    const scale = own < 1e-4 * largest ? largest : Math.max(own, 1e-6);
    if (err / scale > tol) {
      console.log(`MISMATCH output ${k}: relative error ${(err / scale).toExponential(2)}`);
      ok = false;
    }
  });
  return ok;
}

async function main() {
  const [cmd, ...args] = process.argv.slice(2);
  if (cmd === 'run') return run(args[0], args[1], args.slice(2));
  if (cmd === 'time') return time(args[0], args[1]);
  if (cmd === 'compare') {
    if (!compare(Number(args[0]), args[1], args[2])) process.exitCode = 1;
    return;
  }
  throw new Error('usage: ort_run.js run MODEL OUT_DIR IN... | time MODEL DIMS | compare TOL ORT_DIR KGRAD_DIR');
}

main().catch(e => { console.error(`ort_run: ${e.message}`); process.exitCode = 2; });
