import { Type } from 'typebox';

/** Schema pieces shared by several routes. */

export const IsoTime = Type.String({ format: 'date-time' });
export const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

export const ErrorResponse = Type.Object(
  {
    error: Type.Object({
      message: Type.String(),
      type: Type.String(),
      code: Type.String(),
      param: Type.Optional(Type.String()),
    }),
  },
  { description: 'Error' },
);

export const errorResponses = {
  400: ErrorResponse,
  401: ErrorResponse,
  403: ErrorResponse,
  404: ErrorResponse,
  429: ErrorResponse,
  503: ErrorResponse,
};

export const ProjectIdParam = Type.String({ minLength: 1, maxLength: 128 });
export const PageLimit = Type.Integer({ minimum: 1, maximum: 100, default: 20 });
export const Cursor = Type.String({ minLength: 1, maxLength: 512 });
