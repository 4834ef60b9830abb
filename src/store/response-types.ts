/**
 * Responses API objects live at the upstream that created them; the gateway keeps only who owns
 * each one (project) and where it lives (model and target), for as long as the upstream keeps it.
 */
export interface ResponseOwner {
  model: string;
  /** Index of the model's target that created it (fallbacks hold their own responses). */
  targetIndex: number;
}

export interface ResponseOwnerStore {
  claim(projectId: string, responseId: string, owner: ResponseOwner, ttlMs: number): Promise<void>;
  /** The owner record, or null when the response is not this project's (or has expired). */
  get(projectId: string, responseId: string): Promise<ResponseOwner | null>;
  release(projectId: string, responseId: string): Promise<void>;
}

export function encodeOwner(owner: ResponseOwner): string {
  return `${owner.targetIndex}:${owner.model}`;
}

export function decodeOwner(value: string | null | undefined): ResponseOwner | null {
  if (!value) return null;
  const colon = value.indexOf(':');
  return { targetIndex: Number(value.slice(0, colon)), model: value.slice(colon + 1) };
}
