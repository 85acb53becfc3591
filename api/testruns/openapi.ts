import { z } from 'zod';
import { caseInputSchema, configurationInputSchema, runCreateSchema } from '../../domain/testruns/runs';
import { gatewayErrorBody, gatewayHeaders, header, jsonObject, type ApiDescription, type ApiOperation } from '../shared/openapi';
import { caseListQuery, configurationReplaceSchema, idempotencyKey, runListQuery } from './routes';

const list = z.looseObject({ data: z.array(jsonObject) });
const tags = (t: string) => [t];

const operations: ApiOperation[] = [
  { method: 'get', path: '/api/projects/:id', summary: "The CI token's project (by id or name)", tags: tags('projects') },
  { method: 'get', path: '/api/projects/:id/cases', summary: 'List test cases', tags: tags('cases'), query: caseListQuery, response: list },
  { method: 'post', path: '/api/projects/:id/cases', summary: 'Add a test case', tags: tags('cases'), body: caseInputSchema, status: 201 },
  { method: 'get', path: '/api/projects/:id/cases/:case', summary: 'A test case', tags: tags('cases') },
  { method: 'put', path: '/api/projects/:id/cases/:case', summary: 'Replace a test case', tags: tags('cases'), body: caseInputSchema },
  { method: 'delete', path: '/api/projects/:id/cases/:case', summary: 'Archive a test case', tags: tags('cases') },
  { method: 'get', path: '/api/projects/:id/configurations', summary: 'List configurations', tags: tags('configurations'), response: list },
  { method: 'post', path: '/api/projects/:id/configurations', summary: 'Add a configuration', tags: tags('configurations'), body: configurationInputSchema, status: 201 },
  { method: 'get', path: '/api/projects/:id/configurations/:cfg', summary: 'A configuration', tags: tags('configurations') },
  { method: 'put', path: '/api/projects/:id/configurations/:cfg', summary: "Replace a configuration's settings", tags: tags('configurations'), body: configurationReplaceSchema },
  {
    method: 'post',
    path: '/api/projects/:id/runs',
    summary: 'Create a run (201; a replay of the same Idempotency-Key answers 200)',
    tags: tags('runs'),
    headers: z.object({ 'idempotency-key': idempotencyKey.optional() }),
    body: runCreateSchema,
    status: [201, 200],
    responseHeaders: z.object({ 'idempotent-replayed': header('true when the answer replays an earlier request with the same Idempotency-Key').optional() }),
  },
  { method: 'get', path: '/api/projects/:id/runs', summary: 'List runs', tags: tags('runs'), query: runListQuery, response: list },
  { method: 'get', path: '/api/runs/:id', summary: 'A run with its result', tags: tags('runs') },
  { method: 'post', path: '/api/runs/:id/execute', summary: 'Execute a run (starts its workflow)', tags: tags('runs'), status: 202 },
  { method: 'post', path: '/api/runs/:id/cancel', summary: 'Cancel a run', tags: tags('runs'), status: 202 },
];

/** The test-run API (spec 3 B), served at /testruns/openapi.json on the gateway's port. */
export const testRunsApi = (): ApiDescription => ({
  title: 'Test-run API',
  version: '1',
  description: 'Projects, cases, configurations and runs under /api, for CI scripts only (requests from browsers are refused). Errors use the gateway envelope.',
  securitySchemes: { ciToken: { type: 'http', scheme: 'bearer', description: "A project's CI token" } },
  security: ['ciToken'],
  errorBody: gatewayErrorBody,
  headers: gatewayHeaders,
  operations,
});
