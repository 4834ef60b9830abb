import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { silentWav } from './wav.js';

export interface ResourceRequest {
  path: string;
  headers: IncomingMessage['headers'];
  /** JSON bodies parsed; multipart kept as text with the file bytes counted. */
  json: Record<string, unknown> | null;
  multipart: { fields: Record<string, string>; fileName: string | null; fileBytes: number } | null;
}

export interface ResourceBehavior {
  /** Seconds of speech the fake returns for /audio/speech (a real WAV of that length). */
  speechSeconds: number;
  /** Whether /audio/transcriptions reports `duration` (verbose_json does upstream). */
  reportDuration: boolean;
  /** Status for every route (non-2xx answers an OpenAI-style error). */
  status: number;
  /** The fine-tuning job id the fake mints. */
  jobId: string;
  /** A `usage` object /images/generations reports (token-priced image models do). */
  imageUsage?: Record<string, number>;
}

/** A backend with OpenAI's four creation routes: fine-tuning jobs, transcriptions, images, speech. */
export class FakeResourceUpstream {
  readonly requests: ResourceRequest[] = [];
  behavior: ResourceBehavior = { speechSeconds: 2, reportDuration: true, status: 200, jobId: 'ftjob-fake123' };

  private constructor(private readonly server: Server) {}

  static async start(): Promise<FakeResourceUpstream> {
    const server = createServer();
    const fake = new FakeResourceUpstream(server);
    server.on('request', (request, response) => void fake.handle(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const contentType = request.headers['content-type'] ?? '';
    const recorded: ResourceRequest = {
      path: request.url ?? '',
      headers: request.headers,
      json: contentType.startsWith('application/json') ? (JSON.parse(raw.toString('utf8')) as Record<string, unknown>) : null,
      multipart: contentType.startsWith('multipart/form-data') ? parseMultipart(raw, contentType) : null,
    };
    this.requests.push(recorded);
    const send = (status: number, body: unknown, type = 'application/json') => {
      response.writeHead(status, { 'content-type': type });
      response.end(typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body));
    };
    if (this.behavior.status !== 200) {
      return send(this.behavior.status, { error: { message: 'fake upstream refused', type: 'server_error', code: null } });
    }
    const path = recorded.path.split('?')[0];
    if (path === '/v1/fine_tuning/jobs') {
      return send(200, {
        id: this.behavior.jobId,
        object: 'fine_tuning.job',
        status: 'queued',
        model: recorded.json?.model,
        training_file: recorded.json?.training_file,
        created_at: 1_700_000_000,
      });
    }
    if (path === '/v1/images/generations') {
      const n = Number(recorded.json?.n ?? 1);
      const data = Array.from({ length: n }, (_, i) => ({ url: `https://images.example/${i}.png` }));
      return send(200, { created: 1_700_000_000, data, ...(this.behavior.imageUsage ? { usage: this.behavior.imageUsage } : {}) });
    }
    if (path === '/v1/audio/speech') {
      return send(200, silentWav(this.behavior.speechSeconds), 'audio/wav');
    }
    if (path === '/v1/audio/transcriptions') {
      const body: Record<string, unknown> = { text: 'hello from the fake transcriber', language: 'english' };
      if (this.behavior.reportDuration) body.duration = 4.25;
      return send(200, body);
    }
    send(404, { error: { message: `no route ${path}`, type: 'invalid_request_error', code: null } });
  }
}

/** Just enough multipart parsing to see the fields and the file size the gateway forwarded. */
function parseMultipart(raw: Buffer, contentType: string): ResourceRequest['multipart'] {
  const boundary = /boundary=("?)([^";]+)\1/.exec(contentType)?.[2];
  if (!boundary) return null;
  const fields: Record<string, string> = {};
  let fileName: string | null = null;
  let fileBytes = 0;
  const text = raw.toString('latin1');
  for (const part of text.split(`--${boundary}`).slice(1, -1)) {
    const [head, ...rest] = part.split('\r\n\r\n');
    const content = rest.join('\r\n\r\n').replace(/\r\n$/, '');
    const name = /name="([^"]+)"/.exec(head ?? '')?.[1];
    const file = /filename="([^"]*)"/.exec(head ?? '')?.[1];
    if (!name) continue;
    if (file !== undefined) {
      fileName = file;
      fileBytes = Buffer.byteLength(content, 'latin1');
    } else {
      fields[name] = content;
    }
  }
  return { fields, fileName, fileBytes };
}
