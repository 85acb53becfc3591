// The errors every service throws for a caller's mistake; the API edge (api/shared/service-errors.ts)
// and the CLIs turn them into their own envelopes, so no service knows about HTTP.

/** A bad value in a caller's input; `param` names it. */
export class InvalidInput extends Error {
  constructor(
    readonly param: string,
    message: string,
  ) {
    super(message);
  }
}

export class NotFound extends Error {}

export class Conflict extends Error {}
