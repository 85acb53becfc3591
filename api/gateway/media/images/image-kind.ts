// Image files are judged by their bytes, never by a name or a declared type.
export type ImageKind = 'png' | 'jpeg' | 'webp';

export const IMAGE_MEDIA_TYPE: Record<ImageKind, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

/** PNG, JPEG or WebP by magic bytes; null otherwise. Needs only the first 12 bytes. */
export function sniffImage(b: Buffer): ImageKind | null {
  if (b.length >= 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a) return 'png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  return null;
}

/** `data:image/…;base64,…` → bytes and kind (by content); null when it is not a base64 data URL. */
export function decodeDataUrl(url: string): { data: Buffer; kind: ImageKind | null } | null {
  const m = /^data:([\w.+-]+\/[\w.+-]+)?(?:;[\w-]+=[\w.-]+)*;base64,([A-Za-z0-9+/=\s]*)$/.exec(url);
  if (!m) return null;
  const data = Buffer.from(m[2] ?? '', 'base64');
  return { data, kind: sniffImage(data) };
}
