import type { ProviderConfig } from '../endpoints';
import { GENERATION_ID_HEADER, SPEECH_CONTENT_TYPE, SPEECH_PATH, speechRequest, TRANSCRIPTION_PATH, transcriptionRequest, transcriptionResult } from './audio';
import { openaiChat } from './chat';
import { IMAGE_EDITS_PATH, IMAGE_GENERATIONS_PATH, imageErrorMessage, imageRequestBody, parseImageResponse, parseImageStreamEvent } from './images';
import { fetchVideo, fetchVideoContent, parseVideoObject, VIDEO_CREATE_PATH, videoCreateBody } from './videos';

// The OpenAI wire format (and every server that speaks it): every endpoint the gateway offers.
// Registered once in providers/index.ts under the kind `openai`.

export const openai: ProviderConfig = {
  authHeaders: openaiChat.authHeaders,
  chat: openaiChat,
  embeddings: { path: 'v1/embeddings', errorMessage: openaiChat.errorMessage },
  images: {
    generationsPath: IMAGE_GENERATIONS_PATH,
    editsPath: IMAGE_EDITS_PATH,
    requestBody: imageRequestBody,
    parseResponse: parseImageResponse,
    parseStreamEvent: parseImageStreamEvent,
    errorMessage: imageErrorMessage,
  },
  speech: { path: SPEECH_PATH, request: speechRequest, contentType: SPEECH_CONTENT_TYPE, generationIdHeader: GENERATION_ID_HEADER },
  transcription: { path: TRANSCRIPTION_PATH, request: transcriptionRequest, result: transcriptionResult, generationIdHeader: GENERATION_ID_HEADER },
  videos: { createPath: VIDEO_CREATE_PATH, createBody: videoCreateBody, parseJob: parseVideoObject, fetchJob: fetchVideo, fetchContent: fetchVideoContent },
};
