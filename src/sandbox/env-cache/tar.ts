/**
 * A ustar archive of a few small regular files, in memory: what `docker load` reads for an image
 * whose layers the engine already has (see image.ts). Names are plain ASCII under 100 bytes.
 */
export function tarOf(files: ReadonlyArray<{ name: string; data: Buffer }>): Buffer {
  const blocks: Buffer[] = [];
  for (const { name, data } of files) {
    if (!/^[\w.-]{1,99}$/.test(name)) throw new Error(`tarOf: unsupported file name ${JSON.stringify(name)}`);
    const header = Buffer.alloc(512);
    header.write(name, 0, 'ascii');
    header.write('0000644\0', 100, 'ascii'); // mode
    header.write('0000000\0', 108, 'ascii'); // uid
    header.write('0000000\0', 116, 'ascii'); // gid
    header.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124, 'ascii');
    header.write('00000000000\0', 136, 'ascii'); // mtime
    header.write('        ', 148, 'ascii'); // checksum placeholder: spaces while summing
    header.write('0', 156, 'ascii'); // regular file
    header.write('ustar\x0000', 257, 'ascii');
    let sum = 0;
    for (const byte of header) sum += byte;
    header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
    blocks.push(header, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}
