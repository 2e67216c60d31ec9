// The ghostfim-specific part of the LSP surface (docs/protocol.md), as types and runtime guards.
// Notifications arrive from another process, so every payload is checked before it is trusted:
// a malformed one is dropped instead of crashing the extension host. No `vscode` import here.

export const Methods = {
  ghostText: 'ghostfim/ghostText',
  stats: 'ghostfim/stats',
  statusChanged: 'ghostfim/statusChanged',
  status: 'ghostfim/status',
} as const;

/** Zero-based line and UTF-16 character, as in LSP. */
export interface Position {
  line: number;
  character: number;
}

/** `ghostfim/ghostText`: the whole suggestion so far for one request (not a delta). */
export interface GhostTextParams {
  uri: string;
  version: number;
  position: Position;
  insertText: string;
  done: boolean;
}

/** `ghostfim/stats`: timings of one answered or cancelled request. Fields may be missing. */
export interface CompletionStats {
  uri?: string;
  version?: number;
  /** `model` or `cache` (answered from an earlier suggestion without model work). */
  source?: string;
  cancelled?: boolean;
  queueMs?: number | null;
  debounceMs?: number | null;
  prefillMs?: number | null;
  ttftMs?: number | null;
  decodeMs?: number | null;
  totalMs?: number | null;
  reusedTokens?: number | null;
  newTokens?: number | null;
  generatedTokens?: number | null;
  model?: string | null;
}

export type ServerState = 'loading' | 'ready' | 'error';

export interface ModelInfo {
  name?: string | null;
  preset?: string | null;
  path?: string | null;
  device?: string | null;
  nGpuLayers?: number | null;
}

export interface LatencySummary {
  n?: number;
  ttftP50?: number | null;
  ttftP95?: number | null;
  ttftP99?: number | null;
  totalP50?: number | null;
  totalP95?: number | null;
}

/** Result of `ghostfim/status`, and the payload of `ghostfim/statusChanged`. */
export interface ServerStatus {
  state: ServerState;
  error?: string | null;
  model?: ModelInfo | null;
  latency?: LatencySummary | null;
  recent?: CompletionStats[];
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNonNegativeInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}

export function isPosition(value: unknown): value is Position {
  return isRecord(value) && isNonNegativeInteger(value.line) && isNonNegativeInteger(value.character);
}

export function isGhostTextParams(value: unknown): value is GhostTextParams {
  return (
    isRecord(value) &&
    typeof value.uri === 'string' &&
    typeof value.version === 'number' &&
    isPosition(value.position) &&
    typeof value.insertText === 'string' &&
    typeof value.done === 'boolean'
  );
}

export function isCompletionStats(value: unknown): value is CompletionStats {
  return isRecord(value);
}

const SERVER_STATES: readonly string[] = ['loading', 'ready', 'error'];

export function isServerStatus(value: unknown): value is ServerStatus {
  return isRecord(value) && typeof value.state === 'string' && SERVER_STATES.includes(value.state);
}
