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
  rateSubWindows = (projectId: string) => `${this.prefix}:{${projectId}}:rl:sub`;
  rateLeases = (projectId: string) => `${this.prefix}:{${projectId}}:rl:leases`;
  budgets = (projectId: string) => `${this.prefix}:{${projectId}}:rl:budget`;
  usageBucket = (projectId: string, unit: 'm' | 'h', startMs: number) => `${this.prefix}:{${projectId}}:usage:${unit}:${startMs}`;
  usageStorage = (projectId: string) => `${this.prefix}:{${projectId}}:usage:storage`;
  usageBatch = (projectId: string, batchId: string) => `${this.prefix}:{${projectId}}:usage:batch:${batchId}`;
  responseOwner = (projectId: string, responseId: string) => `${this.prefix}:{${projectId}}:resp:${responseId}`;
  record = (projectId: string, kind: string, id: string) => `${this.prefix}:{${projectId}}:rec:${kind}:${id}`;
  recordMetadata = (projectId: string, kind: string, id: string) => `${this.prefix}:{${projectId}}:rec:${kind}:${id}:meta`;
  /** Looked up by the secret's hash alone, before the project is known. */
  secret = (secretHash: string) => `${this.prefix}:secret:${secretHash}`;
  invalidationChannel = () => `${this.prefix}:auth-invalidate`;
  limiter = (name: string) => `${this.prefix}:limiter:${name}`;
}
