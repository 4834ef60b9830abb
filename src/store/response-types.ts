/**
 * Responses API objects live at the upstream that created them; the gateway keeps only who owns
 * each one (project) and where it lives (model and target), for as long as the upstream keeps it.
 */
export interface ResponseOwner {
  model: string;
  /** Index of the model's target that created it (fallbacks hold their own responses). */
  targetIndex: number;
  /**
   * Its input + output tokens once known: the history a request continuing it
   * (`previous_response_id`) makes the upstream read again.
   */
  historyTokens?: number;
}

export interface ResponseOwnerStore {
  claim(projectId: string, responseId: string, owner: ResponseOwner, ttlMs: number): Promise<void>;
  /**
   * Writes the owner record again with its tokens, keeping its expiry; nothing when it is gone
   * (deleted or expired), so a late report never brings a deleted response back.
   */
  recordHistory(projectId: string, responseId: string, owner: ResponseOwner): Promise<void>;
  /** The owner record, or null when the response is not this project's (or has expired). */
  get(projectId: string, responseId: string): Promise<ResponseOwner | null>;
  release(projectId: string, responseId: string): Promise<void>;
}

/** `<target index>:<model>[ <history tokens>]`: a model id holds no space, and records written before the tokens still read. */
export function encodeOwner(owner: ResponseOwner): string {
  const tokens = owner.historyTokens === undefined ? '' : ` ${owner.historyTokens}`;
  return `${owner.targetIndex}:${owner.model}${tokens}`;
}

export function decodeOwner(value: string | null | undefined): ResponseOwner | null {
  if (!value) return null;
  const colon = value.indexOf(':');
  const space = value.indexOf(' ', colon);
  const owner: ResponseOwner = { targetIndex: Number(value.slice(0, colon)), model: value.slice(colon + 1, space === -1 ? undefined : space) };
  if (space !== -1) owner.historyTokens = Number(value.slice(space + 1));
  return owner;
}
