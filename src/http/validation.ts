import { Ajv, type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaValidationError } from 'fastify/types/schema.js';
import type { FastifyInstance } from 'fastify';

/**
 * Bodies are checked strictly (no coercion: "5" is not 5, unknown fields are refused);
 * query strings and path parameters are text, so they are coerced ("true", "20").
 */
function makeAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    useDefaults: true,
    removeAdditional: false,
    allErrors: false,
    strict: false,
    // JSON.parse reads 1e309 as Infinity: a "number" must be finite.
    strictNumbers: true,
  });
  addFormats.default(ajv, ['date-time', 'uri']);
  return ajv;
}

export function installValidators(app: FastifyInstance): void {
  const strict = makeAjv(false);
  const coercing = makeAjv(true);
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? strict : coercing).compile(schema as object),
  );
}

/** The object key a `propertyNames` rule refused, if that is what failed. */
const propertyNameOf = (error: ErrorObject | FastifySchemaValidationError) => (error as ErrorObject).propertyName;

/** Names a failing field the way clients send it: `messages[0].role`, `limit`. */
export function paramOf(error: ErrorObject | FastifySchemaValidationError): string | undefined {
  const path = (error.instancePath ?? '')
    .split('/')
    .filter(Boolean)
    .map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part}`))
    .join('')
    .replace(/^\./, '');
  const params = error.params as Record<string, unknown>;
  const key = propertyNameOf(error);
  const child =
    key !== undefined
      ? key
      : error.keyword === 'required'
      ? (params.missingProperty as string)
      : error.keyword === 'additionalProperties'
        ? (params.additionalProperty as string)
        : undefined;
  if (child === undefined) return path || undefined;
  return path ? `${path}.${child}` : child;
}

export function describeValidationError(error: ErrorObject | FastifySchemaValidationError): string {
  const param = paramOf(error);
  if (error.keyword === 'required') return `Missing required parameter '${param}'.`;
  if (error.keyword === 'additionalProperties') return `Unknown parameter '${param}'.`;
  const key = propertyNameOf(error);
  if (key !== undefined) {
    const reason = error.keyword === 'not' ? 'the name is reserved' : error.message;
    return `Invalid key '${param}': ${reason}.`;
  }
  const where = param ? `Invalid value for '${param}'` : 'Invalid request body';
  const type = (error.params as { type?: string }).type;
  if (error.keyword === 'type' && (type === 'number' || type === 'integer')) return `${where}: must be a finite ${type}.`;
  if (error.keyword === 'enum') {
    const allowed = (error.params as { allowedValues: unknown[] }).allowedValues;
    return `${where}: must be one of ${allowed.map((value) => JSON.stringify(value)).join(', ')}.`;
  }
  return `${where}: ${error.message}.`;
}
