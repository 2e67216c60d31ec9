// What the status bar item and the details view say: latency bookkeeping, percentiles and text.
// statusBar.ts and commands.ts only copy these strings into VS Code. No `vscode` import.

import {
  type AcceptanceSummary,
  acceptanceOf,
  type Budgets,
  budgetsOf,
  type CompletionStats,
  type DraftInfo,
  type LatencySummary,
  type ModelInfo,
  type ServerStatus,
} from './protocol';
import { AUTO_MODEL_SIZE, isModelSize } from './settings';

/** Nearest-rank percentile (p in 0..100) of the values; undefined when there are none. */
export function percentile(values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((Math.min(Math.max(p, 0), 100) / 100) * sorted.length);
  return sorted[Math.max(rank, 1) - 1];
}

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/**
 * The last completions' stats, newest last, bounded. Time to first token is what a user feels
 * as "how fast does ghost text appear", so the status bar shows its last value and p95 over the
 * answered (not cancelled) requests in the window.
 */
export class LatencyWindow {
  private readonly entries: CompletionStats[] = [];

  constructor(private readonly capacity = 100) {}

  add(stats: CompletionStats): void {
    this.entries.push(stats);
    if (this.entries.length > this.capacity) this.entries.splice(0, this.entries.length - this.capacity);
  }

  /** Replaces the window with the server's own history (ghostfim/status `recent`). */
  reset(recent: readonly CompletionStats[]): void {
    this.entries.length = 0;
    for (const stats of recent) this.add(stats);
  }

  recent(count: number): CompletionStats[] {
    return this.entries.slice(-count);
  }

  private answeredTtfts(): number[] {
    return this.entries
      .filter((s) => s.cancelled !== true)
      .map((s) => finite(s.ttftMs))
      .filter((v): v is number => v !== undefined);
  }

  lastTtftMs(): number | undefined {
    const values = this.answeredTtfts();
    return values[values.length - 1];
  }

  ttftP95Ms(): number | undefined {
    return percentile(this.answeredTtfts(), 95);
  }
}

/** "52ms", "1.2s", "<1ms": short enough for the status bar. */
export function formatMs(value: number | null | undefined): string {
  const ms = finite(value);
  if (ms === undefined) return '–';
  if (ms < 1) return '<1ms';
  if (ms >= 10_000) return `${Math.round(ms / 1000)}s`;
  if (ms >= 1000) return `${(ms / 1000).toFixed(1)}s`;
  return `${Math.round(ms)}ms`;
}

/** The extension's view of the server process, before the server says anything itself. */
export type ClientPhase = 'starting' | 'running' | 'notFound' | 'stopped' | 'settingUp';

/** A `$/progress` work-done report in flight (model download or load). */
export interface ProgressInfo {
  title?: string;
  message?: string;
  percentage?: number;
}

export interface StatusBarInput {
  enabled: boolean;
  phase: ClientPhase;
  /** Latest ghostfim/status result or ghostfim/statusChanged payload. */
  server?: ServerStatus;
  progress?: ProgressInfo;
  /** ghostfim.model.size as configured ("auto" or a preset). */
  configuredSize: string;
  lastTtftMs?: number;
  p95TtftMs?: number;
  /** Why the server could not be started or stopped, for the tooltip. */
  problem?: string;
}

export type StatusSeverity = 'normal' | 'warning' | 'error';

export interface StatusBarView {
  text: string;
  tooltip: string;
  severity: StatusSeverity;
}

const MAX_LABEL = 24;

function shorten(text: string): string {
  return text.length > MAX_LABEL ? `${text.slice(0, MAX_LABEL - 1)}…` : text;
}

/** The model's short name: the preset, else the GGUF's name, else what the user configured. */
export function modelLabel(model: ModelInfo | null | undefined, configuredSize: string): string {
  if (typeof model?.preset === 'string' && model.preset !== '') return model.preset;
  if (typeof model?.name === 'string' && model.name !== '') return shorten(model.name);
  return configuredSize === '' ? AUTO_MODEL_SIZE : configuredSize;
}

function progressText(progress: ProgressInfo): string {
  const pct = finite(progress.percentage);
  return pct !== undefined ? `${Math.round(Math.min(Math.max(pct, 0), 100))}%` : 'loading…';
}

function progressTooltip(progress: ProgressInfo): string {
  return [progress.title, progress.message].filter((part) => part !== undefined && part !== '').join(': ');
}

export function statusBarView(input: StatusBarInput): StatusBarView {
  const click = 'Click for details and to switch the model size.';
  if (!input.enabled) {
    return { text: '$(circle-slash) ghostfim off', tooltip: `ghostfim is disabled. ${click}`, severity: 'normal' };
  }
  if (input.phase === 'notFound') {
    return {
      text: '$(error) ghostfim: no server',
      tooltip:
        `${input.problem ?? 'The ghostfim server was not found.'} Run "ghostfim: Set up the server", ` +
        'set ghostfim.serverPath, or install ghostfim.',
      severity: 'error',
    };
  }
  if (input.phase === 'settingUp') {
    return {
      text: '$(loading~spin) ghostfim setting up',
      tooltip: input.problem ?? 'Setting up the ghostfim server…',
      severity: 'normal',
    };
  }
  if (input.phase === 'stopped') {
    return {
      text: '$(error) ghostfim stopped',
      tooltip: `${input.problem ?? 'The ghostfim server stopped.'} Use "ghostfim: Restart server".`,
      severity: 'error',
    };
  }
  // While a different preset loads, name the one being loaded rather than the one serving.
  const loadingLabel = isModelSize(input.configuredSize)
    ? input.configuredSize
    : modelLabel(input.server?.model, input.configuredSize);
  if (input.progress !== undefined) {
    const serving = input.server?.state === 'ready' ? ' The current model serves until it is ready.' : '';
    return {
      text: `$(loading~spin) ${loadingLabel} ${progressText(input.progress)}`,
      tooltip: `Loading ${loadingLabel}${progressTooltip(input.progress) ? ` (${progressTooltip(input.progress)})` : ''}.${serving}`,
      severity: 'normal',
    };
  }
  const server = input.server;
  if (input.phase === 'starting' || server === undefined) {
    return { text: '$(loading~spin) ghostfim', tooltip: 'Starting the ghostfim server…', severity: 'normal' };
  }
  const label = modelLabel(server.model, input.configuredSize);
  if (server.state === 'loading') {
    return { text: `$(loading~spin) ${loadingLabel} loading…`, tooltip: `Loading ${loadingLabel}…`, severity: 'normal' };
  }
  if (server.state === 'error') {
    return {
      text: `$(error) ${label}`,
      tooltip: `ghostfim: ${server.error ?? 'the model failed to load'}. ${click}`,
      severity: 'error',
    };
  }
  const parts = [`$(sparkle) ${label}`];
  if (input.lastTtftMs !== undefined) parts.push(` ${formatMs(input.lastTtftMs)}`);
  if (input.p95TtftMs !== undefined) parts.push(` · p95 ${formatMs(input.p95TtftMs)}`);
  const model = formatModel(server.model);
  const acceptance = formatAcceptance(acceptanceOf(server));
  const budgets = formatBudgets(budgetsOf(server));
  return {
    text: parts.join(''),
    tooltip:
      `ghostfim ready${model ? `: ${model}` : ''}. Time to first token: last ${formatMs(input.lastTtftMs)}, ` +
      `p95 ${formatMs(input.p95TtftMs)}.` +
      (acceptance !== undefined ? ` This session: ${acceptance}.` : '') +
      (budgets !== undefined ? ` Prompt budget: ${budgets}.` : '') +
      ` ${click}`,
    severity: 'normal',
  };
}

/**
 * "accepted 12 · partial 3 · refused 5 · rate 75%": what became of the suggestions shown this
 * session, as the server counts them. Undefined when the server reports none of these.
 */
export function formatAcceptance(acceptance: AcceptanceSummary | undefined): string | undefined {
  if (acceptance === undefined) return undefined;
  const { accepted, partial, refused, acceptRate } = acceptance;
  if (accepted === undefined && partial === undefined && refused === undefined) return undefined;
  const count = (value: number | undefined): string => (value === undefined ? '–' : String(value));
  const rate = typeof acceptRate === 'number' ? `${Math.round(acceptRate * 100)}%` : '–';
  return `accepted ${count(accepted)} · partial ${count(partial)} · refused ${count(refused)} · rate ${rate}`;
}

/**
 * "prefixTokens 2106 (asked 16384: <reason>)": the budget before the cursor in effect, and every
 * setting the server clamped on this machine. Undefined when the server does not report budgets.
 */
export function formatBudgets(budgets: Budgets | undefined): string | undefined {
  if (budgets === undefined) return undefined;
  const clamped = budgets.clamped ?? [];
  const clampText = (setting: string): string => {
    const clamp = clamped.find((c) => c.setting === setting);
    if (clamp === undefined) return '';
    return ` (asked ${clamp.asked}${clamp.reason !== undefined ? `: ${clamp.reason}` : ', clamped'})`;
  };
  const parts: string[] = [];
  const prefix = budgets.effective?.prefixTokens;
  if (prefix !== undefined) parts.push(`prefixTokens ${prefix}${clampText('prefixTokens')}`);
  for (const clamp of clamped) {
    if (clamp.setting === 'prefixTokens' && prefix !== undefined) continue; // said above
    parts.push(`${clamp.setting} ${clamp.effective}${clampText(clamp.setting)}`);
  }
  return parts.length > 0 ? parts.join('; ') : undefined;
}

/** "qwen2.5-coder-0.5b (small) on cpu, 0 GPU layers". Empty when the server said nothing. */
export function formatModel(model: ModelInfo | null | undefined): string {
  if (model === null || model === undefined) return '';
  const name = model.name ?? model.path ?? '';
  const preset = model.preset ? ` (${model.preset})` : '';
  const device = model.device ? ` on ${model.device}` : '';
  const layers = typeof model.nGpuLayers === 'number' ? `, ${model.nGpuLayers} GPU layers` : '';
  return `${name}${preset}${device}${layers}${formatDraft(model.draft)}`.trim();
}

/** ", draft small: 61% of its tokens kept, 1.4 GB for both": the speculative draft, if any. */
export function formatDraft(draft: DraftInfo | null | undefined): string {
  if (draft === null || draft === undefined) return '';
  const rate = typeof draft.acceptance === 'number' ? `${Math.round(draft.acceptance * 100)}%` : '–';
  return `, draft ${draft.name ?? '?'}: ${rate} of its tokens kept`;
}

export function formatLatencySummary(latency: LatencySummary | null | undefined): string {
  if (latency === null || latency === undefined || !latency.n) return 'no completions yet';
  return (
    `time to first token p50 ${formatMs(latency.ttftP50)} · p95 ${formatMs(latency.ttftP95)} · ` +
    `p99 ${formatMs(latency.ttftP99)}; total p50 ${formatMs(latency.totalP50)} · ` +
    `p95 ${formatMs(latency.totalP95)} (n=${latency.n})`
  );
}

export interface StatsRow {
  label: string;
  description: string;
  detail: string;
}

function tokenCount(value: number | null | undefined): string {
  return finite(value) !== undefined ? String(value) : '–';
}

/** One recent completion, stage by stage, for the details list. */
export function formatStatsRow(stats: CompletionStats): StatsRow {
  const label =
    stats.cancelled === true
      ? `$(circle-slash) cancelled after ${formatMs(stats.totalMs)}`
      : `ttft ${formatMs(stats.ttftMs)} · total ${formatMs(stats.totalMs)}`;
  const source = stats.source ?? 'unknown';
  const description = `${source}${stats.model ? ` · ${stats.model}` : ''}`;
  const stages = [
    `queue ${formatMs(stats.queueMs)}`,
    `debounce ${formatMs(stats.debounceMs)}`,
    `prefill ${formatMs(stats.prefillMs)}`,
    `ttft ${formatMs(stats.ttftMs)}`,
    `decode ${formatMs(stats.decodeMs)}`,
    `total ${formatMs(stats.totalMs)}`,
  ].join(' · ');
  const tokens =
    `tokens: ${tokenCount(stats.reusedTokens)} reused, ${tokenCount(stats.newTokens)} new, ` +
    `${tokenCount(stats.generatedTokens)} generated`;
  return { label, description, detail: `${stages} — ${tokens}` };
}
