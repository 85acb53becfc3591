import path from 'node:path';
import { z } from 'zod';

const port = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);

// Every environment variable the system reads, with its default. A wrong value stops
// startup with a message that names the variable.
const schema = z.object({
  DATA_DIR: z.string().min(1).default('.data'),
  GATEWAY_PORT: port(8080),
  PANEL_PORT: port(8090),
  TEMPORAL_PORT: port(7233),
  TEMPORAL_UI_PORT: port(8233),
  PG_PORT: port(54320),
  SIMULATOR_PORT: port(8199),
  DATABASE_URL: z.string().url().optional(),
  TEMPORAL_ADDRESS: z.string().regex(/^[^:\s]+:\d+$/, 'must be host:port').optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_CLI_PATH: z.string().min(1).optional(),
  GATEWAY_VARIANT: z.enum(['credits', 'keyed']).default('credits'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  UPSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
  HOLD_TIMEOUT_SECONDS: z.coerce.number().int().positive().default(900),
  KEY_CACHE_TTL_MS: z.coerce.number().int().positive().default(60_000),
  DB_POOL_MAX: z.coerce.number().int().positive().default(20),
});

export type Config = z.infer<typeof schema> & { dataDir: string };

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return { ...parsed.data, dataDir: path.resolve(parsed.data.DATA_DIR) };
}
