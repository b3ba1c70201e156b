import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AttachFrames } from '../../src/sandbox/attach-frames.ts';

const frame = (kind: number, payload: string): Buffer => {
  const body = Buffer.from(payload);
  const header = Buffer.alloc(8);
  header[0] = kind;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
};

function demux(chunks: Buffer[]): { out: string; err: string; outChunks: number } {
  let out = '';
  let err = '';
  let outChunks = 0;
  const frames = new AttachFrames(
    (c) => {
      out += c.toString();
      outChunks++;
    },
    (c) => (err += c.toString()),
  );
  for (const c of chunks) frames.push(c);
  return { out, err, outChunks };
}

const STREAM = Buffer.concat([frame(1, '{"id":1,"ok":true}\n'), frame(2, 'warning: x\n'), frame(1, ''), frame(1, '{"id":2,'), frame(1, '"ok":true}\n')]);

test('stdout and stderr frames go to their own callback, in order', () => {
  assert.deepEqual(demux([STREAM]), { out: '{"id":1,"ok":true}\n{"id":2,"ok":true}\n', err: 'warning: x\n', outChunks: 3 });
});

test('frames split at every possible byte, headers included, come out the same', () => {
  for (let cut = 1; cut < STREAM.length; cut++) {
    const { out, err } = demux([STREAM.subarray(0, cut), STREAM.subarray(cut)]);
    assert.equal(out, '{"id":1,"ok":true}\n{"id":2,"ok":true}\n', `cut at ${cut}`);
    assert.equal(err, 'warning: x\n', `cut at ${cut}`);
  }
  const bytes = [...STREAM].map((b) => Buffer.from([b]));
  assert.deepEqual({ ...demux(bytes), outChunks: 0 }, { out: '{"id":1,"ok":true}\n{"id":2,"ok":true}\n', err: 'warning: x\n', outChunks: 0 });
});

test('a payload longer than a chunk is delivered as it arrives, not held back', () => {
  const big = frame(1, 'a'.repeat(100_000));
  const seen: number[] = [];
  const frames = new AttachFrames((c) => seen.push(c.length), () => assert.fail('no stderr'));
  frames.push(big.subarray(0, 65_536));
  assert.deepEqual(seen, [65_528]);
  frames.push(big.subarray(65_536));
  assert.deepEqual(seen, [65_528, 100_000 - 65_528]);
});
