import path from 'node:path';
import ts from 'typescript';

// Reads a vendor SDK's request types (.d.ts) with the TypeScript compiler and derives sample values
// from them: every union member, literal and property, so a schema can be checked against all of them.
// Samples are built to a depth limit (the types are recursive); strings are 'x', numbers 1.

export interface SdkTypes {
  /** the exported type `name` of `file` (relative to the package root) */
  type(file: string, name: string): ts.Type;
  /** property names of an object type, of every member of a union */
  keys(t: ts.Type): string[];
  /** the type of property `key` (of every union member having it, joined) */
  prop(t: ts.Type, key: string): ts.Type[];
  /** string literal values of a type (a union of literals, nullables left out) */
  literals(t: ts.Type): string[];
  /** the `type` discriminator values of a union's members; `null` for a member without one */
  discriminators(t: ts.Type): Array<string | null>;
  /** the element type of an array type (or of the array members of a union) */
  elements(t: ts.Type): ts.Type[];
  /** sample values: every union member and literal, and every property set once over a minimal object */
  samples(t: ts.Type, depth?: number): unknown[];
  /** one minimal value (required properties only) */
  minimal(t: ts.Type, depth?: number): unknown;
}

export function loadSdkTypes(packageRoot: string, files: string[]): SdkTypes {
  const full = files.map((f) => path.join(packageRoot, f));
  const program = ts.createProgram(full, { strict: true, noEmit: true, skipLibCheck: true, types: [] });
  const checker = program.getTypeChecker();
  const members = (t: ts.Type) => (t.isUnion() ? t.types : [t]);
  const isNullish = (t: ts.Type) => (t.flags & (ts.TypeFlags.Null | ts.TypeFlags.Undefined | ts.TypeFlags.Void)) !== 0;
  const isArray = (t: ts.Type) => checker.isArrayType(t) || checker.isTupleType(t);
  const dedupe = (xs: unknown[]) => [...new Map(xs.map((x) => [JSON.stringify(x), x])).values()];
  const CAP = 400;

  function type(file: string, name: string): ts.Type {
    const sf = program.getSourceFile(path.join(packageRoot, file));
    if (!sf) throw new Error(`no source file ${file}`);
    const mod = checker.getSymbolAtLocation(sf);
    const sym = mod && checker.getExportsOfModule(mod).find((s) => s.name === name);
    if (!sym) throw new Error(`${file} exports no ${name}`);
    return checker.getDeclaredTypeOfSymbol(sym);
  }

  const objectMembers = (t: ts.Type) => members(t).filter((m) => !isNullish(m) && !isArray(m) && (m.flags & ts.TypeFlags.Object) !== 0);
  const keys = (t: ts.Type) => [...new Set(objectMembers(t).flatMap((m) => checker.getPropertiesOfType(m).map((p) => p.name)))].sort();
  const propType = (m: ts.Type, key: string) => {
    const p = checker.getPropertyOfType(m, key);
    return p ? checker.getNonNullableType(checker.getTypeOfSymbol(p)) : null;
  };
  const prop = (t: ts.Type, key: string) => objectMembers(t).map((m) => propType(m, key)).filter((x): x is ts.Type => x !== null);
  const literals = (t: ts.Type) => members(t).filter((m) => m.isStringLiteral()).map((m) => (m as ts.StringLiteralType).value);
  const discriminators = (t: ts.Type) =>
    [...new Set(objectMembers(t).flatMap((m) => { const d = propType(m, 'type'); return d ? literals(d) : [null]; }))];
  const elements = (t: ts.Type) => members(t).filter(isArray).flatMap((m) => checker.getTypeArguments(m as ts.TypeReference));

  function scalar(t: ts.Type): unknown[] | null {
    if (t.isStringLiteral()) return [t.value];
    if (t.isNumberLiteral()) return [t.value];
    if (t.flags & ts.TypeFlags.BooleanLiteral) return [checker.typeToString(t) === 'true'];
    if (t.flags & ts.TypeFlags.Null) return [null];
    if (t.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void | ts.TypeFlags.Never)) return [];
    if (t.flags & ts.TypeFlags.String) return ['x'];
    if (t.flags & ts.TypeFlags.Number) return [1];
    if (t.flags & ts.TypeFlags.Boolean) return [true, false];
    if (t.flags & (ts.TypeFlags.Unknown | ts.TypeFlags.Any)) return [{}];
    if (t.isIntersection()) return ['x']; // `string & {}` (open string unions)
    return null;
  }

  function requiredProps(m: ts.Type) {
    return checker.getPropertiesOfType(m).filter((p) => (p.flags & ts.SymbolFlags.Optional) === 0);
  }

  function minimal(t: ts.Type, depth = 3): unknown {
    const s = scalar(t);
    if (s) return s.find((v) => v !== null) ?? s[0] ?? null;
    if (t.isUnion()) {
      const nonNull = t.types.filter((m) => !isNullish(m));
      const boolish = nonNull.every((m) => m.flags & ts.TypeFlags.BooleanLiteral);
      return boolish ? true : minimal(nonNull.find((m) => m.flags & ts.TypeFlags.String) ?? nonNull[0] ?? t.types[0], depth);
    }
    if (isArray(t)) {
      const [el] = checker.getTypeArguments(t as ts.TypeReference);
      return depth > 0 && el ? [minimal(el, depth - 1)] : [];
    }
    const out: Record<string, unknown> = {};
    if (depth <= 0) return out;
    for (const p of requiredProps(t)) out[p.name] = minimal(checker.getTypeOfSymbol(p), depth - 1);
    return out;
  }

  function samples(t: ts.Type, depth = 3): unknown[] {
    const s = scalar(t);
    if (s) return s;
    if (t.isUnion()) return dedupe(t.types.flatMap((m) => samples(m, depth))).slice(0, CAP);
    if (isArray(t)) {
      const [el] = checker.getTypeArguments(t as ts.TypeReference);
      if (!el) return [[]];
      if (depth <= 0) return [[minimal(el, 3)]];
      return samples(el, depth - 1).map((v) => [v]);
    }
    // the base object is complete a few levels further down than its variations go
    const base = minimal(t, depth + 3) as Record<string, unknown>;
    if (depth <= 0) return [base];
    const out: unknown[] = [base];
    for (const p of checker.getPropertiesOfType(t)) {
      for (const v of samples(checker.getTypeOfSymbol(p), depth - 1)) out.push({ ...base, [p.name]: v });
    }
    return dedupe(out).slice(0, CAP);
  }

  return { type, keys, prop, literals, discriminators, elements, samples, minimal };
}
