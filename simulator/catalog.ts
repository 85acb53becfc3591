// The model catalog the gateway seeds from. Upstream names differ from the public ids on
// purpose, so tests notice when the gateway forwards its own id instead of the mapped one.
// Multipliers are credits per token, kept as decimal strings so nothing passes through floats.

export interface SimulatorModel {
  id: string;
  /** the wire format the gateway uses to call it (its provider kind) */
  wire: 'openai' | 'anthropic' | 'gemini' | 'azure-openai';
  upstream_model: string;
  capabilities: string[];
  tiers: string[];
  free_trial: boolean;
  max_output_tokens: number;
  input_multiplier: string;
  output_multiplier: string;
  cache_multiplier: string;
  cache_creation_multiplier: string;
  /** chat audio tokens (spec 1 section 4.7); absent: billed at the text rate of the same direction */
  audio_input_multiplier?: string;
  audio_output_multiplier?: string;
  /** media attributes and unit pricing in credits (spec 1 section 2.8); {} for text models */
  details?: Record<string, unknown>;
}

/**
 * The simulator meters speech and transcription of a model whose name contains `tokens` in tokens,
 * as OpenAI's gpt-4o-mini-tts and gpt-4o-transcribe (others: characters, seconds as tts-1, whisper-1).
 */
export const meteredInTokens = (model: string): boolean => model.includes('tokens');

const ALL_TIERS = ['free_trial', 'starter', 'pro', 'business', 'user'];
const PAID_TIERS = ['starter', 'pro', 'business'];
// Media models are priced by details.pricing (per unit, or audio per token); the chat multipliers are unused.
const NO_TOKENS = { max_output_tokens: 0, input_multiplier: '0', output_multiplier: '0', cache_multiplier: '0', cache_creation_multiplier: '0' };

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
    // POST /v1/embeddings, billed per input token at input_multiplier.
    id: 'sim-embed',
    wire: 'openai',
    upstream_model: 'sim-embed-2026-01-15',
    capabilities: ['embeddings'],
    tiers: ALL_TIERS,
    free_trial: false,
    ...NO_TOKENS,
    input_multiplier: '0.0000001',
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
    // Google's Gemini API (issue 36): every dialect translated; cached tokens reported, none written
    id: 'sim-gemini',
    wire: 'gemini',
    upstream_model: 'sim-gemini-2026-01-15',
    capabilities: ['text'],
    tiers: PAID_TIERS,
    free_trial: false,
    max_output_tokens: 8192,
    input_multiplier: '0.0000003',
    output_multiplier: '0.0000025',
    cache_multiplier: '0.000000075',
    cache_creation_multiplier: '0',
  },
  {
    // An Azure OpenAI deployment (issue 36): the upstream model is the deployment's name
    id: 'sim-azure-gpt',
    wire: 'azure-openai',
    upstream_model: 'sim-azure-gpt-prod',
    capabilities: ['text'],
    tiers: PAID_TIERS,
    free_trial: false,
    max_output_tokens: 8192,
    input_multiplier: '0.000002',
    output_multiplier: '0.000008',
    cache_multiplier: '0.0000005',
    cache_creation_multiplier: '0',
  },
  {
    // Chat with audio in and out (spec 1 section 4.7); audio tokens have their own rates.
    id: 'sim-gpt-audio',
    wire: 'openai',
    upstream_model: 'sim-gpt-audio-2026-01-15',
    capabilities: ['text', 'audio_input', 'audio_output'],
    tiers: PAID_TIERS,
    free_trial: false,
    max_output_tokens: 4096,
    input_multiplier: '0.0000025',
    output_multiplier: '0.00001',
    cache_multiplier: '0.00000125',
    cache_creation_multiplier: '0.0000025',
    audio_input_multiplier: '0.00004',
    audio_output_multiplier: '0.00008',
    details: { voices: ['alloy', 'ash', 'ballad', 'coral', 'echo', 'sage', 'shimmer', 'verse'] },
  },
  {
    id: 'sim-image-1',
    wire: 'openai',
    upstream_model: 'sim-image-1-2026-01-15',
    capabilities: ['image_generation', 'image_editing', 'streaming'],
    tiers: ALL_TIERS,
    free_trial: true,
    ...NO_TOKENS,
    details: {
      max_images: 4,
      max_input_images: 8,
      supported_parameters: ['n', 'size', 'resolution', 'aspect_ratio', 'quality', 'output_format', 'output_compression', 'background', 'seed', 'input_references', 'stream', 'response_format', 'provider'],
      qualities: ['auto', 'low', 'medium', 'high'],
      output_formats: ['png', 'jpeg', 'webp'],
      pricing: { per_image: '0.04', per_input_image: '0.01' },
    },
  },
  {
    id: 'sim-image-mini',
    wire: 'openai',
    upstream_model: 'sim-image-mini-2026-01-15',
    capabilities: ['image_generation'],
    tiers: ALL_TIERS,
    free_trial: false,
    ...NO_TOKENS,
    details: {
      max_images: 10,
      supported_parameters: ['n', 'size', 'width', 'height', 'output_format', 'seed', 'negative_prompt', 'guidance', 'steps', 'response_format', 'provider'],
      qualities: ['auto'],
      output_formats: ['png', 'jpeg', 'webp'],
      pricing: { per_image: '0.01' },
    },
  },
  {
    id: 'sim-video-1',
    wire: 'openai',
    upstream_model: 'sim-video-1-2026-01-15',
    capabilities: ['video_generation'],
    tiers: PAID_TIERS,
    free_trial: false,
    ...NO_TOKENS,
    details: {
      supported_durations: [4, 8, 12],
      default_duration: 4,
      supported_resolutions: ['480p', '720p', '1080p'],
      default_resolution: '720p',
      supported_aspect_ratios: ['16:9', '9:16', '1:1'],
      generate_audio: true,
      // credits per second of video, by resolution
      pricing_skus: { '480p': '0.05', '720p': '0.1', '1080p': '0.2' },
    },
  },
  {
    id: 'sim-tts-1',
    wire: 'openai',
    upstream_model: 'sim-tts-1-2026-01-15',
    capabilities: ['speech_generation'],
    tiers: ALL_TIERS,
    free_trial: false,
    ...NO_TOKENS,
    details: { type: 'speech', voices: ['alloy', 'verse', 'sage'], voice_cloning: false, response_formats: ['mp3', 'pcm'], pricing: { per_character: '0.000015' } },
  },
  {
    id: 'sim-tts-clone',
    wire: 'openai',
    upstream_model: 'sim-tts-clone-2026-01-15',
    capabilities: ['speech_generation'],
    tiers: PAID_TIERS,
    free_trial: false,
    ...NO_TOKENS,
    details: { type: 'speech', voices: [], voice_cloning: true, response_formats: ['mp3', 'pcm'], pricing: { per_character: '0.00003' } },
  },
  {
    id: 'sim-whisper-1',
    wire: 'openai',
    upstream_model: 'sim-whisper-1-2026-01-15',
    capabilities: ['transcription'],
    tiers: ALL_TIERS,
    free_trial: false,
    ...NO_TOKENS,
    details: { type: 'transcription', input_formats: ['wav', 'mp3', 'flac', 'm4a', 'ogg', 'webm', 'aac'], pricing: { per_second: '0.0001' } },
  },
  // Priced per token (credits per input / output token), like gpt-4o-mini-tts and gpt-4o-transcribe.
  {
    id: 'sim-tts-tokens',
    wire: 'openai',
    upstream_model: 'sim-tts-tokens-2026-01-15',
    capabilities: ['speech_generation'],
    tiers: ['business'],
    free_trial: false,
    ...NO_TOKENS,
    details: { type: 'speech', voices: ['alloy', 'verse', 'sage'], voice_cloning: false, response_formats: ['mp3', 'pcm'], pricing: { per_input_token: '0.0000006', per_output_token: '0.000012' } },
  },
  {
    id: 'sim-transcribe-tokens',
    wire: 'openai',
    upstream_model: 'sim-transcribe-tokens-2026-01-15',
    capabilities: ['transcription'],
    tiers: ['business'],
    free_trial: false,
    ...NO_TOKENS,
    details: { type: 'transcription', input_formats: ['wav', 'mp3', 'flac', 'm4a', 'ogg', 'webm', 'aac'], pricing: { per_input_token: '0.000006', per_output_token: '0.00001' } },
  },
];
