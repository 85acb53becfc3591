// A workflow as the one place that starts it (a domain's client.ts) names it: by type name and
// input only, so services never import workflow code (DESIGN.md section 1, imports run down). Pure.

/** A workflow's signature as its client starts it: the one input it takes (its result is read from Temporal). */
export type WorkflowOf<I, R = unknown> = (input: I) => Promise<R>;
