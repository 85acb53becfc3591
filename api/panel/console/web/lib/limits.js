// The limits of spec 2 section 2.3 as the console labels them (API field names are the keys).
import { Field, html } from './ui.js';

export const LIMIT_LABELS = {
  cpu_percent: 'CPU (% of one core)',
  memory_mb: 'Memory (MB)',
  disk_mb: 'Disk (MB)',
  disk_io_bps: 'Disk I/O (bytes/s)',
  iops: 'I/O operations (per s)',
  processes: 'Processes',
  php_workers: 'PHP workers (per site)',
  inodes: 'Files (inodes)',
  websites: 'Websites',
  domains: 'Domains',
  databases: 'Databases',
  dns_zones: 'DNS zones',
  customer_accounts: 'Customer accounts',
  resellers: 'Resellers',
};

/** Limit inputs as the API wants them: whole numbers; an empty field inherits. */
export const numbers = (limits) => Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== '' && v !== null && v !== undefined).map(([k, v]) => [k, Number(v)]));

export function LimitInputs({ limits, setLimits }) {
  return html`<div class="grid">
    ${Object.entries(LIMIT_LABELS).map(([k, label]) => html`<${Field} label=${label} type="number" min="0" step="1" name=${k} value=${limits[k] ?? ''} onInput=${(v) => setLimits({ ...limits, [k]: v })} placeholder="inherit" />`)}
  </div>`;
}
