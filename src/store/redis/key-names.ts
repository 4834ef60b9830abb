/**
 * Every key of a project carries the `{project_id}` hash tag, so a project's
 * multi-key scripts and transactions stay in one Redis Cluster slot.
 */
export class KeyNames {
  constructor(private readonly prefix: string) {}

  project = (projectId: string) => `${this.prefix}:{${projectId}}:project`;
  apiKey = (projectId: string, keyId: string) => `${this.prefix}:{${projectId}}:key:${keyId}`;
  apiKeyIndex = (projectId: string) => `${this.prefix}:{${projectId}}:keys`;
  audit = (projectId: string) => `${this.prefix}:{${projectId}}:audit`;
  conversation = (projectId: string, conversationId: string) => `${this.prefix}:{${projectId}}:conv:${conversationId}`;
  conversationMessages = (projectId: string, conversationId: string) => `${this.prefix}:{${projectId}}:conv:${conversationId}:messages`;
  conversationPositions = (projectId: string, conversationId: string) => `${this.prefix}:{${projectId}}:conv:${conversationId}:positions`;
  rateWindow = (projectId: string) => `${this.prefix}:{${projectId}}:rl:window`;
  rateBurst = (projectId: string) => `${this.prefix}:{${projectId}}:rl:burst`;
  /** One hash per granularity and dimension holds every bucket (`<start>|<group>|<measure>` fields), indexed by start. */
  usageBuckets = (projectId: string, unit: 'm' | 'h', dimension: string) => `${this.prefix}:{${projectId}}:usage:${unit}:${dimension}`;
  usageBucketIndex = (projectId: string, unit: 'm' | 'h', dimension: string) => `${this.prefix}:{${projectId}}:usage:${unit}:${dimension}:idx`;
  /** Stored things that expire (conversations), by expiry time, and their sizes: freed from storage when they expire. */
  usageStorageExpiry = (projectId: string) => `${this.prefix}:{${projectId}}:usage:storage:expiry`;
  usageStorageSizes = (projectId: string) => `${this.prefix}:{${projectId}}:usage:storage:sizes`;
  /** Bytes the project's live conversations hold (their stored-size bound). */
  conversationBytesHeld = (projectId: string) => `${this.prefix}:{${projectId}}:usage:storage:conversations`;
  rateSubWindows = (projectId: string) => `${this.prefix}:{${projectId}}:rl:sub`;
  rateLeases = (projectId: string) => `${this.prefix}:{${projectId}}:rl:leases`;
  budgets = (projectId: string) => `${this.prefix}:{${projectId}}:rl:budget`;
  /** Budget-threshold events settled in the project's slot, waiting to go to the alert stream (quota-batch.lua). */
  alertOutbox = (projectId: string) => `${this.prefix}:{${projectId}}:alerts:outbox`;
  /** The project's own webhooks, and the union of their thresholds that the settlement checks. */
  webhooks = (projectId: string) => `${this.prefix}:{${projectId}}:webhooks`;
  webhookThresholds = (projectId: string) => `${this.prefix}:{${projectId}}:webhooks:thresholds`;
  /** A key's own limiter state (its rate_limits and budgets), in its project's slot: decided in the same script call. */
  keyRate = (projectId: string, keyId: string, part: 'window' | 'burst' | 'sub' | 'leases' | 'budget') => `${this.prefix}:{${projectId}}:kl:${keyId}:${part}`;
  usageStorage = (projectId: string) => `${this.prefix}:{${projectId}}:usage:storage`;
  /** Per replica, the newest usage batch applied to the project (exactly-once writes). */
  usageApplied = (projectId: string) => `${this.prefix}:{${projectId}}:usage:applied`;
  responseOwner = (projectId: string, responseId: string) => `${this.prefix}:{${projectId}}:resp:${responseId}`;
  record = (projectId: string, kind: string, id: string) => `${this.prefix}:{${projectId}}:rec:${kind}:${id}`;
  recordMetadata = (projectId: string, kind: string, id: string) => `${this.prefix}:{${projectId}}:rec:${kind}:${id}:meta`;
  /** Every key of a project starts with this (for deleting a project's data). */
  projectKeyPrefix = (projectId: string) => `${this.prefix}:{${projectId}}:`;
  /** Project ids, for listing (one key, no hash tag: only single-key commands use it). */
  projectIndex = () => `${this.prefix}:projects`;
  /** Looked up by the secret's hash alone, before the project is known. */
  secret = (secretHash: string) => `${this.prefix}:secret:${secretHash}`;
  invalidationChannel = () => `${this.prefix}:auth-invalidate`;
  limiter = (name: string) => `${this.prefix}:limiter:${name}`;
}
