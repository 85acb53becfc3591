import { z } from 'zod';
import { requestListQuery } from '../../../services/keys/keys';
import { uncoveredQuery } from '../../../services/credits/uncovered';
import { gatewayErrorBody, gatewayHeaders, jsonObject, type ApiDescription, type ApiOperation } from '../../shared/openapi';
import { change, cycle, grant, newAccount, routeBody } from './catalog-routes';
import { newEndpoint, threshold } from './event-routes';
import { createBody, updateBody } from './routes';

const list = z.looseObject({ data: z.array(jsonObject) });
// PUT /admin/models/:id and /admin/providers/:id take the operator CLI's fields (services/catalog/entries.ts), underscored.
const catalogEntry = jsonObject.meta({ description: "The operator CLI's fields of the entry with underscores (input_price, …); lists as arrays, flags as booleans" });

const operations: ApiOperation[] = [
  { method: 'post', path: '/admin/keys', summary: 'Create a key (the full key is in the answer, once)', tags: ['keys'], body: createBody, status: 201 },
  { method: 'get', path: '/admin/keys/:id', summary: 'A key with its settings', tags: ['keys'] },
  { method: 'patch', path: '/admin/keys/:id', summary: "Change a key's settings (answers once every gateway process applies them)", tags: ['keys'], body: updateBody },
  { method: 'post', path: '/admin/keys/:id/revoke', summary: 'Revoke a key', tags: ['keys'] },
  { method: 'delete', path: '/admin/keys/:id', summary: 'Revoke a key (same as POST …/revoke)', tags: ['keys'] },
  { method: 'get', path: '/admin/keys/:id/requests', summary: "A key's request log", tags: ['keys'], query: requestListQuery },
  { method: 'get', path: '/admin/accounts/:id/keys', summary: "An account's keys", tags: ['keys'], response: list },
  { method: 'post', path: '/admin/accounts', summary: 'Create an account', tags: ['accounts'], body: newAccount, status: 201 },
  { method: 'get', path: '/admin/accounts/:id', summary: 'An account with its balance', tags: ['accounts'] },
  { method: 'patch', path: '/admin/accounts/:id', summary: "Change an account's tier or plan expiry", tags: ['accounts'], body: change },
  { method: 'post', path: '/admin/accounts/:id/credits', summary: 'Grant credits', tags: ['accounts'], body: grant },
  { method: 'post', path: '/admin/accounts/:id/deactivate', summary: 'Deactivate an account', tags: ['accounts'] },
  { method: 'post', path: '/admin/accounts/:id/reactivate', summary: 'Reactivate an account', tags: ['accounts'] },
  { method: 'get', path: '/admin/models', summary: 'The model catalog', tags: ['catalog'], response: list },
  { method: 'put', path: '/admin/models/:id', summary: 'Create or replace a model', tags: ['catalog'], body: catalogEntry },
  { method: 'get', path: '/admin/upstream-health', summary: "This process's provider keys cooling down after a 401/403 (which key, until when) and its routes' measured latency and throughput", tags: ['catalog'] },
  { method: 'put', path: '/admin/providers/:id', summary: 'Create or replace a provider', tags: ['catalog'], body: catalogEntry },
  { method: 'post', path: '/admin/accounts/:id/cycle', summary: 'Start a new billing cycle (the balance carries over, with an optional grant)', tags: ['accounts'], body: cycle },
  { method: 'get', path: '/admin/models/:id/routes', summary: "A model's upstream routes", tags: ['catalog'] },
  { method: 'put', path: '/admin/models/:id/routes', summary: 'Add or change a route (provider, upstream model, priority, weight)', tags: ['catalog'], body: routeBody },
  { method: 'delete', path: '/admin/models/:id/routes', summary: 'Remove a route (never the last)', tags: ['catalog'], body: routeBody.pick({ provider: true, upstream: true }) },
  { method: 'post', path: '/admin/accounts/:id/webhooks', summary: 'Add a webhook endpoint (the signing secret is in the answer, once)', tags: ['webhooks'], body: newEndpoint, status: 201 },
  { method: 'get', path: '/admin/accounts/:id/webhooks', summary: "An account's webhook endpoints", tags: ['webhooks'] },
  { method: 'delete', path: '/admin/webhooks/:id', summary: 'Delete a webhook endpoint', tags: ['webhooks'] },
  { method: 'get', path: '/admin/webhooks/:id/deliveries', summary: "An endpoint's deliveries and their attempts", tags: ['webhooks'] },
  { method: 'put', path: '/admin/accounts/:id/low-balance-threshold', summary: 'Set the balance.low threshold (null: off)', tags: ['webhooks'], body: threshold },
  { method: 'get', path: '/admin/reports/uncovered', summary: 'Requests whose cost exceeded what the account held (uncovered report)', tags: ['reports'], query: uncoveredQuery },
];

/** The admin HTTP API (README "Admin HTTP API"), served at /admin/openapi.json on the gateway's port. */
export const adminApi = (): ApiDescription => ({
  title: 'Gateway admin API',
  version: '1',
  description: 'Keys, accounts, the model catalog and reports under /admin. Every operation needs ADMIN_TOKEN.',
  securitySchemes: {
    adminBearer: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' },
    adminHeader: { type: 'apiKey', in: 'header', name: 'x-admin-token', description: 'ADMIN_TOKEN' },
  },
  security: ['adminBearer', 'adminHeader'],
  errorBody: gatewayErrorBody,
  headers: gatewayHeaders,
  operations,
});
