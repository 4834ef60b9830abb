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
  /** Looked up by the secret's hash alone, before the project is known. */
  secret = (secretHash: string) => `${this.prefix}:secret:${secretHash}`;
  invalidationChannel = () => `${this.prefix}:auth-invalidate`;
  limiter = (name: string) => `${this.prefix}:limiter:${name}`;
}
