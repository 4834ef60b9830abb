import { decodeOwner, encodeOwner, type ResponseOwner, type ResponseOwnerStore } from '../response-types.js';

/** In-process response owners; an expired one is dropped when it is read. */
export class MemoryResponseOwnerStore implements ResponseOwnerStore {
  private readonly owners = new Map<string, { value: string; expiresAtMs: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  async claim(projectId: string, responseId: string, owner: ResponseOwner, ttlMs: number): Promise<void> {
    this.owners.set(`${projectId}/${responseId}`, { value: encodeOwner(owner), expiresAtMs: this.now() + ttlMs });
  }

  async recordHistory(projectId: string, responseId: string, owner: ResponseOwner): Promise<void> {
    const entry = this.owners.get(`${projectId}/${responseId}`);
    if (entry && entry.expiresAtMs > this.now()) entry.value = encodeOwner(owner);
  }

  async get(projectId: string, responseId: string): Promise<ResponseOwner | null> {
    const key = `${projectId}/${responseId}`;
    const entry = this.owners.get(key);
    if (entry && entry.expiresAtMs <= this.now()) this.owners.delete(key);
    return entry && entry.expiresAtMs > this.now() ? decodeOwner(entry.value) : null;
  }

  async release(projectId: string, responseId: string): Promise<void> {
    this.owners.delete(`${projectId}/${responseId}`);
  }

  forgetProject(projectId: string): void {
    for (const key of this.owners.keys()) if (key.startsWith(`${projectId}/`)) this.owners.delete(key);
  }
}
