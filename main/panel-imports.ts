import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { DEFAULT_IMPORT_LIMITS, type ImportLimits } from '../domain/panel/import-archive';
import { DEFAULT_NAMESERVERS } from '../platform/config';
import type { Db } from '../platform/db';
import type { Logger } from '../platform/logger';
import type { PanelFlags } from '../platform/panel-flags';
import { NODE_OP_DEFAULTS, type NodeOpSettings } from '../services/panel/sites/client';
import type { ImportsDeps } from '../services/panel/imports/imports';
import type { ImportRunDeps } from '../services/panel/imports/run-items';
import type { DnsSettings } from '../services/panel/dns/dns';

// The legacy import's wiring in a panel process: the upload side (API) and the run side (the panel
// worker that drives the hosting node, where site files and SQL dumps go).

export interface ImportOptions {
  /** where uploaded archives are kept while their import needs them (default <tmp>/panel-imports) */
  dir?: string;
  limits?: Partial<ImportLimits>;
  /** PHP versions offered to imported sites (default 8.2) */
  phpVersions?: string[];
  /** largest upload (default 20 GB) */
  maxUploadBytes?: number;
  /** how long an imported site or database may take to become active */
  waitMs?: number;
  /** the task queue import runs go to (default the panel's); tests give a worker process of their own */
  taskQueue?: string;
}

interface Runtime {
  db: Db;
  logger: Logger;
  imports?: ImportOptions;
  nodeOps?: Partial<NodeOpSettings>;
  dns?: DnsSettings;
  flags: Pick<PanelFlags, 'placement' | 'placementNodeFacts' | 'nodeApiListen'>;
  /** imported certificates' keys are sealed with it (the panel's sealing key) */
  sealingKey: Buffer;
}

export function importSettings(o: Runtime, temporal: Client) {
  const nodeOps = { ...NODE_OP_DEFAULTS, ...o.nodeOps };
  const limits = { ...DEFAULT_IMPORT_LIMITS, ...o.imports?.limits };
  const uploads: ImportsDeps = {
    db: o.db,
    temporal,
    logger: o.logger,
    dir: o.imports?.dir ?? path.join(os.tmpdir(), 'panel-imports'),
    limits,
    phpVersions: o.imports?.phpVersions ?? ['8.2'],
    maxUploadBytes: o.imports?.maxUploadBytes ?? 20 * 1024 ** 3,
    taskQueue: o.imports?.taskQueue ?? nodeOps.taskQueue,
    nodeOps,
  };
  const run = (hostingNode: ImportRunDeps['hostingNode']): ImportRunDeps => ({
    db: o.db,
    temporal,
    logger: o.logger,
    nodeOps,
    dns: o.dns ?? { zonesDir: null, nameservers: DEFAULT_NAMESERVERS },
    sites: { nodeOps: o.nodeOps, placement: { mode: o.flags.placement, factsFile: o.flags.placementNodeFacts, nodeApiEnabled: o.flags.nodeApiListen !== null } },
    limits,
    hostingNode,
    waitMs: o.imports?.waitMs,
    sealingKey: o.sealingKey,
  });
  return { uploads, run };
}
