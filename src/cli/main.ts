import { parseArgs } from 'node:util';
import { commands, DELIVERY_STATUSES, type Flags, PRIORITIES, USAGE_BUCKET_WIDTHS, WEBHOOK_FORMATS } from './commands.js';
import { CliError, GatewayClient } from './gateway-client.js';
import { redactUrls } from './redact.js';

export const USAGE = `nova-gateway: manage projects, keys, limits, usage and alerts through a running gateway

usage: nova-gateway [--url URL] [--admin-token TOKEN] [--api-key KEY] [--json] <command>

admin token (--admin-token or NOVA_ADMIN_TOKEN):
  projects create <name> [--environment ENV] [--requests-per-minute N] [--burst-limit N]
                  [--priority ${PRIORITIES.join('|')}]
  projects list [--limit N] [--cursor C]
  projects get <project_id>
  projects update <project_id> --priority ${PRIORITIES.join('|')}|none   (none: back to normal)
  projects delete <project_id> --yes
  keys create <project_id> <name> [--scope S]... [--model M]... [--metadata K=V]... [--expires-at ISO]
              [--priority ${PRIORITIES.join('|')}] [KEY LIMITS]
    (with only --api-key: created by that key, with its scopes, models, limits and priority unless given)
  webhooks list <project_id>
  webhooks add <project_id> <webhook_url> [--format ${WEBHOOK_FORMATS.join('|')}] [--threshold F]...
  webhooks remove <project_id> <webhook_id>
  webhooks deliveries [<project_id>] [--status ${DELIVERY_STATUSES.join('|')}] [--limit N]

the project's API key (--api-key or NOVA_API_KEY):
  keys list <project_id> [--limit N] [--cursor C]
  keys get <api_key_id>            (with its budgets' use and what is left today and this month)
  keys update <api_key_id> [--name N] [--scope S]... [--model M]... [--all-models] [--metadata K=V]...
              [--expires-at ISO|never] [--priority ${PRIORITIES.join('|')}|none] [KEY LIMITS, each also none: remove it]
  keys rotate <api_key_id> [--grace-period SECONDS] [--reason TEXT]
  keys revoke <api_key_id>
  policy set <project_id> [--requests-per-minute N] [--burst-limit N]
  usage <project_id> [--start-time ISO] [--end-time ISO] [--bucket-width ${USAGE_BUCKET_WIDTHS.join('|')}]

--priority: a key's or project's place in a busy model's queue. A key without one (none) follows
its project's; a project without one is normal. A key without project:write gives only normal or
low; a key created by a key has its creator's unless given, one created by the admin its project's.

KEY LIMITS, the key's own (its project's still apply):
  --requests-per-minute N  --burst-limit N  --tokens-per-minute N  --max-concurrent-requests N
  --daily-tokens N  --monthly-tokens N  --monthly-cost USD

--url defaults to NOVA_URL, else http://127.0.0.1:8080. --json prints the gateway's reply as is.
Exit codes: 0 done, 1 the gateway refused or could not be reached, 2 wrong usage.
`;

const OPTIONS = {
  url: { type: 'string' },
  'admin-token': { type: 'string' },
  'api-key': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  yes: { type: 'boolean' },
  environment: { type: 'string' },
  'requests-per-minute': { type: 'string' },
  'burst-limit': { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  'grace-period': { type: 'string' },
  reason: { type: 'string' },
  'start-time': { type: 'string' },
  'end-time': { type: 'string' },
  'bucket-width': { type: 'string' },
  name: { type: 'string' },
  scope: { type: 'string', multiple: true },
  model: { type: 'string', multiple: true },
  'all-models': { type: 'boolean' },
  metadata: { type: 'string', multiple: true },
  'expires-at': { type: 'string' },
  'tokens-per-minute': { type: 'string' },
  'max-concurrent-requests': { type: 'string' },
  'daily-tokens': { type: 'string' },
  'monthly-tokens': { type: 'string' },
  'monthly-cost': { type: 'string' },
  format: { type: 'string' },
  threshold: { type: 'string', multiple: true },
  status: { type: 'string' },
  priority: { type: 'string' },
} as const;

export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** Runs one CLI invocation; returns the exit code. Never prints a stack or a secret it was given. */
export async function main(argv: string[], env: NodeJS.ProcessEnv, io: CliIo): Promise<number> {
  try {
    let parsed;
    try {
      parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    } catch (error) {
      throw new CliError(`${(error as Error).message}\n\n${USAGE}`, 2);
    }
    const { values, positionals } = parsed;
    if (values.help || positionals.length === 0) {
      io.out(USAGE);
      return values.help ? 0 : 2;
    }
    const [group, action, ...rest] = positionals;
    const name = commands[`${group} ${action}`] ? `${group} ${action}` : group!;
    const command = commands[name];
    if (!command) throw new CliError(`unknown command: ${positionals.slice(0, 2).join(' ')}\n\n${USAGE}`, 2);
    const args = name === group ? positionals.slice(1) : rest;
    const client = new GatewayClient({
      url: values.url ?? env.NOVA_URL ?? 'http://127.0.0.1:8080',
      adminToken: values['admin-token'] ?? env.NOVA_ADMIN_TOKEN,
      apiKey: values['api-key'] ?? env.NOVA_API_KEY,
    });
    await command({ client, flags: values as Flags, args, print: io.out });
    return 0;
  } catch (error) {
    // Messages can quote a URL (the gateway's, a network error's): never with its credentials.
    if (error instanceof CliError) {
      io.err(`nova-gateway: ${redactUrls(error.message)}\n`);
      return error.exitCode;
    }
    io.err(`nova-gateway: unexpected failure: ${redactUrls((error as Error).message)}\n`);
    return 1;
  }
}
