// The model catalog the gateway seeds from. Upstream names differ from the public ids on
// purpose, so tests notice when the gateway forwards its own id instead of the mapped one.
// Multipliers are credits per token, kept as decimal strings so nothing passes through floats.

export interface SimulatorModel {
  id: string;
  /** the wire format the gateway uses to call it (its provider kind) */
  wire: 'openai' | 'anthropic';
  upstream_model: string;
  capabilities: string[];
  tiers: string[];
  free_trial: boolean;
  max_output_tokens: number;
  input_multiplier: string;
  output_multiplier: string;
  cache_multiplier: string;
  cache_creation_multiplier: string;
}

const ALL_TIERS = ['free_trial', 'starter', 'pro', 'business', 'user'];
const PAID_TIERS = ['starter', 'pro', 'business'];

export const SIMULATOR_MODELS: readonly SimulatorModel[] = [
  {
    id: 'sim-gpt-mini',
    wire: 'openai',
    upstream_model: 'sim-gpt-mini-2026-01-15',
    capabilities: ['text'],
    tiers: ALL_TIERS,
    free_trial: true,
    max_output_tokens: 4096,
    input_multiplier: '0.0000005',
    output_multiplier: '0.0000015',
    cache_multiplier: '0.00000005',
    cache_creation_multiplier: '0.000000625',
  },
  {
    id: 'sim-gpt',
    wire: 'openai',
    upstream_model: 'sim-gpt-2026-01-15',
    capabilities: ['text'],
    tiers: PAID_TIERS,
    free_trial: false,
    max_output_tokens: 8192,
    input_multiplier: '0.000002',
    output_multiplier: '0.000008',
    cache_multiplier: '0.0000005',
    cache_creation_multiplier: '0.0000025',
  },
  {
    // The simulator reports reasoning tokens for any model whose name contains "reasoner".
    id: 'sim-reasoner',
    wire: 'openai',
    upstream_model: 'sim-reasoner-2026-01-15',
    capabilities: ['text'],
    tiers: ['pro', 'business'],
    free_trial: false,
    max_output_tokens: 16384,
    input_multiplier: '0.000004',
    output_multiplier: '0.000016',
    cache_multiplier: '0.000001',
    cache_creation_multiplier: '0.000005',
  },
  {
    id: 'sim-claude',
    wire: 'anthropic',
    upstream_model: 'sim-claude-2026-01-15',
    capabilities: ['text'],
    tiers: PAID_TIERS,
    free_trial: false,
    max_output_tokens: 8192,
    input_multiplier: '0.000003',
    output_multiplier: '0.000015',
    cache_multiplier: '0.0000003',
    cache_creation_multiplier: '0.00000375',
  },
  {
    // Not served by the simulator yet; exists so the gateway can test unsupported_capability.
    id: 'sim-image-1',
    wire: 'openai',
    upstream_model: 'sim-image-1-2026-01-15',
    capabilities: ['image_generation'],
    tiers: ALL_TIERS,
    free_trial: true,
    max_output_tokens: 4096,
    input_multiplier: '0.000005',
    output_multiplier: '0.00004',
    cache_multiplier: '0.00000125',
    cache_creation_multiplier: '0.000005',
  },
];
