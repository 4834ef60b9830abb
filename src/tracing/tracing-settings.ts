/**
 * Whether tracing is on, and how, from the standard OpenTelemetry variables only (docs/tracing.md):
 * on when an OTLP endpoint is set, unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
 * Read without loading OpenTelemetry, so a gateway without tracing loads none of it.
 */
export interface TracingSettings {
  protocol: 'http/protobuf' | 'http/json';
  sampler: { name: string; ratio: number };
  batch: { scheduledDelayMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number; exportTimeoutMillis?: number };
}

export class TracingSettingsError extends Error {}

const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

function whole(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const value = env[name];
  if (value === undefined || value === '') return undefined;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0) throw new TracingSettingsError(`environment variable ${name} must be a whole number >= 0`);
  return number;
}

export function tracingSettingsOf(env: NodeJS.ProcessEnv): TracingSettings | null {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null;
  const exporter = (env.OTEL_TRACES_EXPORTER || 'otlp').trim().toLowerCase();
  if (exporter === 'none') return null;
  if (exporter !== 'otlp') throw new TracingSettingsError('environment variable OTEL_TRACES_EXPORTER must be "otlp" or "none"');
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim();
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    const name = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
    throw new TracingSettingsError(`environment variable ${name} must be "http/protobuf" or "http/json" (gRPC is not supported: point it at a Collector's OTLP/HTTP port)`);
  }
  const name = (env.OTEL_TRACES_SAMPLER || 'parentbased_always_on').trim().toLowerCase();
  if (!SAMPLERS.includes(name)) throw new TracingSettingsError(`environment variable OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')}`);
  const arg = env.OTEL_TRACES_SAMPLER_ARG;
  const ratio = arg === undefined || arg === '' ? 1 : Number(arg);
  if (!(ratio >= 0 && ratio <= 1)) throw new TracingSettingsError('environment variable OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1');
  return {
    protocol,
    sampler: { name, ratio },
    batch: {
      scheduledDelayMillis: whole(env, 'OTEL_BSP_SCHEDULE_DELAY'),
      maxQueueSize: whole(env, 'OTEL_BSP_MAX_QUEUE_SIZE'),
      maxExportBatchSize: whole(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
      exportTimeoutMillis: whole(env, 'OTEL_BSP_EXPORT_TIMEOUT'),
    },
  };
}
