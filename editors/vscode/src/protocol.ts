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
  /** The accept command of the item this text is (read with acceptance.ts `commandOf`). */
  command?: unknown;
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

export interface DraftInfo {
  name?: string | null;
  memoryBytes?: number | null;
  proposed?: number | null;
  accepted?: number | null;
  /** Share of the draft's proposed tokens the target kept (null before any). */
  acceptance?: number | null;
}

export interface ModelInfo {
  name?: string | null;
  preset?: string | null;
  path?: string | null;
  device?: string | null;
  nGpuLayers?: number | null;
  memoryBytes?: number | null;
  /** The draft model that writes suggestions first (speculative decoding), if any. */
  draft?: DraftInfo | null;
}

export interface LatencySummary {
  n?: number;
  ttftP50?: number | null;
  ttftP95?: number | null;
  ttftP99?: number | null;
  totalP50?: number | null;
  totalP95?: number | null;
}

/** This session's fate of the suggestions shown (`acceptance`; see "Accept signals"). */
export interface AcceptanceSummary {
  shown?: number;
  accepted?: number;
  partial?: number;
  refused?: number;
  acceptedChars?: number;
  /** Items taken, whole or in part, out of those read; null before any was read. */
  acceptRate?: number | null;
}

/** A setting the server could not honour on this machine, and what it uses instead. */
export interface BudgetClamp {
  setting: string;
  asked: number;
  effective: number;
  reason?: string;
}

/** The prompt budgets in effect (`budgets`); servers before it leave it out. */
export interface Budgets {
  effective?: {
    prefixTokens?: number;
    suffixTokens?: number;
    keystrokePrefillMs?: number;
    kvSnapshotMb?: number;
  };
  clamped?: BudgetClamp[];
}

/** Result of `ghostfim/status`, and the payload of `ghostfim/statusChanged`. */
export interface ServerStatus {
  state: ServerState;
  error?: string | null;
  model?: ModelInfo | null;
  latency?: LatencySummary | null;
  recent?: CompletionStats[];
  acceptance?: AcceptanceSummary | null;
  budgets?: Budgets | null;
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

function finiteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** The status's `acceptance`, with only the well-formed counts; undefined without any. */
export function acceptanceOf(status: ServerStatus | undefined): AcceptanceSummary | undefined {
  const raw: unknown = status?.acceptance;
  if (!isRecord(raw)) return undefined;
  const summary: AcceptanceSummary = {};
  for (const key of ['shown', 'accepted', 'partial', 'refused', 'acceptedChars'] as const) {
    const value = raw[key];
    if (isNonNegativeInteger(value)) summary[key] = value;
  }
  if (finiteNumber(raw.acceptRate)) summary.acceptRate = raw.acceptRate;
  else if (raw.acceptRate === null) summary.acceptRate = null;
  return Object.keys(summary).length > 0 ? summary : undefined;
}

function asClamp(value: unknown): BudgetClamp | undefined {
  if (!isRecord(value) || typeof value.setting !== 'string') return undefined;
  if (!finiteNumber(value.asked) || !finiteNumber(value.effective)) return undefined;
  const clamp: BudgetClamp = { setting: value.setting, asked: value.asked, effective: value.effective };
  if (typeof value.reason === 'string' && value.reason !== '') clamp.reason = value.reason;
  return clamp;
}

/** The status's `budgets`, with only the well-formed parts; undefined when it has none. */
export function budgetsOf(status: ServerStatus | undefined): Budgets | undefined {
  const raw: unknown = status?.budgets;
  if (!isRecord(raw)) return undefined;
  const budgets: Budgets = {};
  if (isRecord(raw.effective)) {
    const effective: NonNullable<Budgets['effective']> = {};
    for (const key of ['prefixTokens', 'suffixTokens', 'keystrokePrefillMs', 'kvSnapshotMb'] as const) {
      const value = raw.effective[key];
      if (finiteNumber(value)) effective[key] = value;
    }
    if (Object.keys(effective).length > 0) budgets.effective = effective;
  }
  if (Array.isArray(raw.clamped)) {
    const clamped = raw.clamped.map(asClamp).filter((c): c is BudgetClamp => c !== undefined);
    if (clamped.length > 0) budgets.clamped = clamped;
  }
  return budgets.effective !== undefined || budgets.clamped !== undefined ? budgets : undefined;
}
