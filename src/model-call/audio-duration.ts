import { parseBuffer } from 'music-metadata';

/** Seconds of audio in a file, read from its header (WAV, MP3, FLAC, OGG, …); null when unknown. */
export async function audioDurationSeconds(audio: Buffer, mimeType?: string): Promise<number | null> {
  try {
    const { format } = await parseBuffer(audio, mimeType ? { mimeType } : undefined, { duration: true, skipCovers: true });
    return format.duration !== undefined && Number.isFinite(format.duration) ? format.duration : null;
  } catch {
    return null;
  }
}
