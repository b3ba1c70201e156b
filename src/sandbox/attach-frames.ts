/**
 * The stdout and stderr of a `docker exec` without a TTY, as the engine multiplexes them on one
 * stream: frames of an 8-byte header (stream type 1 stdout, 2 stderr; three zero bytes; payload
 * length, big-endian) and the payload. Read here as it arrives, without the two extra streams
 * dockerode's demuxStream pipes through (a cost on every tool call). Frame boundaries need not
 * match chunk boundaries.
 */
export class AttachFrames {
  private readonly header = Buffer.alloc(8);
  private headerBytes = 0;
  private payloadLeft = 0;
  private toStderr = false;

  constructor(
    private readonly onStdout: (chunk: Buffer) => void,
    private readonly onStderr: (chunk: Buffer) => void,
  ) {}

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.payloadLeft === 0) {
        const take = Math.min(8 - this.headerBytes, chunk.length - at);
        chunk.copy(this.header, this.headerBytes, at, at + take);
        this.headerBytes += take;
        at += take;
        if (this.headerBytes < 8) return;
        this.headerBytes = 0;
        this.toStderr = this.header[0] === 2;
        this.payloadLeft = this.header.readUInt32BE(4);
        continue;
      }
      const take = Math.min(this.payloadLeft, chunk.length - at);
      const payload = chunk.subarray(at, at + take);
      at += take;
      this.payloadLeft -= take;
      if (this.toStderr) this.onStderr(payload);
      else this.onStdout(payload);
    }
  }
}
