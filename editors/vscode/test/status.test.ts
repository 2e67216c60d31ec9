import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CompletionStats, ServerStatus } from '../src/protocol';
import {
  formatAcceptance,
  formatBudgets,
  formatDraft,
  formatLatencySummary,
  formatModel,
  formatMs,
  formatStatsRow,
  LatencyWindow,
  modelLabel,
  percentile,
  statusBarView,
  type StatusBarInput,
} from '../src/status';

const ready: ServerStatus = {
  state: 'ready',
  error: null,
  model: { name: 'qwen2.5-coder-0.5b-instruct-q4_k_m', preset: 'small', path: '/m/x.gguf', device: 'cpu', nGpuLayers: 0 },
};

function input(overrides: Partial<StatusBarInput> = {}): StatusBarInput {
  return { enabled: true, phase: 'running', server: ready, configuredSize: 'auto', ...overrides };
}

describe('percentile', () => {
  it('uses the nearest rank', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(values, 95), 95);
    assert.equal(percentile(values, 50), 50);
    assert.equal(percentile(values, 100), 100);
    assert.equal(percentile(values, 0), 1);
    assert.equal(percentile([42], 95), 42);
    assert.equal(percentile([], 95), undefined);
  });

  it('does not reorder its input', () => {
    const values = [3, 1, 2];
    percentile(values, 50);
    assert.deepEqual(values, [3, 1, 2]);
  });
});

describe('LatencyWindow', () => {
  it('tracks the last and p95 time to first token of answered requests', () => {
    const window = new LatencyWindow(20);
    for (let i = 1; i <= 20; i++) window.add({ ttftMs: i * 10, source: 'model' });
    window.add({ ttftMs: 1, cancelled: true });
    window.add({ ttftMs: null, source: 'cache' });
    assert.equal(window.lastTtftMs(), 200);
    assert.equal(window.ttftP95Ms(), 200);
    assert.equal(window.recent(2).length, 2);
  });

  it('is bounded', () => {
    const window = new LatencyWindow(3);
    for (let i = 1; i <= 5; i++) window.add({ ttftMs: i });
    assert.deepEqual(window.recent(10).map((s) => s.ttftMs), [3, 4, 5]);
  });

  it('can adopt the server history', () => {
    const window = new LatencyWindow();
    window.add({ ttftMs: 999 });
    window.reset([{ ttftMs: 5 }, { ttftMs: 7 }]);
    assert.equal(window.lastTtftMs(), 7);
    assert.equal(window.ttftP95Ms(), 7);
  });
});

describe('formatMs', () => {
  it('is short', () => {
    assert.equal(formatMs(52.4), '52ms');
    assert.equal(formatMs(0.4), '<1ms');
    assert.equal(formatMs(1234), '1.2s');
    assert.equal(formatMs(12_345), '12s');
    assert.equal(formatMs(undefined), '–');
    assert.equal(formatMs(null), '–');
  });
});

describe('statusBarView', () => {
  it('shows model, last time to first token and p95 when ready', () => {
    const view = statusBarView(input({ lastTtftMs: 52, p95TtftMs: 90.3 }));
    assert.equal(view.text, '$(sparkle) small 52ms · p95 90ms');
    assert.equal(view.severity, 'normal');
  });

  it('shows just the model before any completion', () => {
    assert.equal(statusBarView(input()).text, '$(sparkle) small');
  });

  it('shows loading progress with the percentage, naming the size being loaded', () => {
    const view = statusBarView(input({ configuredSize: 'medium', progress: { title: 'Loading model', percentage: 41.6 } }));
    assert.equal(view.text, '$(loading~spin) medium 42%');
    assert.match(view.tooltip, /current model serves/);
  });

  it('shows loading without a percentage', () => {
    const loading: ServerStatus = { state: 'loading', model: null };
    assert.equal(statusBarView(input({ server: loading, configuredSize: 'large' })).text, '$(loading~spin) large loading…');
    assert.equal(statusBarView(input({ progress: {} })).text, '$(loading~spin) small loading…');
  });

  it('shows errors in red with the reason in the tooltip', () => {
    const view = statusBarView(input({ server: { ...ready, state: 'error', error: 'out of memory' } }));
    assert.equal(view.text, '$(error) small');
    assert.equal(view.severity, 'error');
    assert.match(view.tooltip, /out of memory/);
  });

  it('shows disabled, starting, missing and stopped servers', () => {
    assert.equal(statusBarView(input({ enabled: false })).text, '$(circle-slash) ghostfim off');
    assert.equal(statusBarView(input({ phase: 'starting', server: undefined })).text, '$(loading~spin) ghostfim');
    const missing = statusBarView(input({ phase: 'notFound', problem: 'not on PATH.' }));
    assert.equal(missing.severity, 'error');
    assert.match(missing.tooltip, /not on PATH/);
    assert.equal(statusBarView(input({ phase: 'stopped' })).text, '$(error) ghostfim stopped');
    assert.match(missing.tooltip, /Set up the server/);
  });

  it('names the step of a set-up in progress', () => {
    const view = statusBarView(input({ phase: 'settingUp', problem: 'llama.cpp: compiling 45% · 2:13' }));
    assert.equal(view.text, '$(loading~spin) ghostfim setting up');
    assert.equal(view.tooltip, 'llama.cpp: compiling 45% · 2:13');
  });
});

describe('modelLabel', () => {
  it('prefers the preset, then the name, then the configured size', () => {
    assert.equal(modelLabel(ready.model, 'auto'), 'small');
    assert.equal(modelLabel({ name: 'my-own-model-with-a-very-long-name-q8_0' }, 'auto'), 'my-own-model-with-a-ver…');
    assert.equal(modelLabel(undefined, 'large'), 'large');
  });
});

describe('details formatting', () => {
  const stats: CompletionStats = {
    source: 'model',
    cancelled: false,
    queueMs: 0.4,
    debounceMs: 35.0,
    prefillMs: 41.2,
    ttftMs: 43.0,
    decodeMs: 180.5,
    totalMs: 230.1,
    reusedTokens: 812,
    newTokens: 6,
    generatedTokens: 5,
    model: 'qwen2.5-coder-0.5b-instruct-q4_k_m',
  };

  it('lists every stage of one completion', () => {
    const row = formatStatsRow(stats);
    assert.equal(row.label, 'ttft 43ms · total 230ms');
    assert.equal(row.description, 'model · qwen2.5-coder-0.5b-instruct-q4_k_m');
    assert.equal(
      row.detail,
      'queue <1ms · debounce 35ms · prefill 41ms · ttft 43ms · decode 181ms · total 230ms — ' +
        'tokens: 812 reused, 6 new, 5 generated',
    );
  });

  it('marks cancelled requests and tolerates missing fields', () => {
    const row = formatStatsRow({ cancelled: true, totalMs: 12 });
    assert.match(row.label, /cancelled after 12ms/);
    assert.match(row.detail, /prefill –/);
  });

  it('summarises the server latency and model', () => {
    assert.equal(
      formatLatencySummary({ n: 42, ttftP50: 52.1, ttftP95: 90.3, ttftP99: 120.0, totalP50: 140.2, totalP95: 400.9 }),
      'time to first token p50 52ms · p95 90ms · p99 120ms; total p50 140ms · p95 401ms (n=42)',
    );
    assert.equal(formatLatencySummary({ n: 0 }), 'no completions yet');
    assert.equal(formatModel(ready.model), 'qwen2.5-coder-0.5b-instruct-q4_k_m (small) on cpu, 0 GPU layers');
    assert.equal(formatModel(null), '');
  });
});

describe('acceptance and budgets', () => {
  const acceptance = { shown: 25, accepted: 12, partial: 3, refused: 5, acceptedChars: 300, acceptRate: 0.75 };
  const budgets = {
    effective: { prefixTokens: 2106, suffixTokens: 256, keystrokePrefillMs: 80, kvSnapshotMb: 256 },
    clamped: [{ setting: 'prefixTokens', asked: 16384, effective: 2106, reason: 'what this CPU prefills in time' }],
  };

  it('formats the session counts', () => {
    assert.equal(formatAcceptance(acceptance), 'accepted 12 · partial 3 · refused 5 · rate 75%');
    assert.equal(formatAcceptance({ accepted: 0, partial: 0, refused: 0, acceptRate: null }), 'accepted 0 · partial 0 · refused 0 · rate –');
    assert.equal(formatAcceptance({ shown: 3 }), undefined);
    assert.equal(formatAcceptance(undefined), undefined);
  });

  it('formats the effective prefix budget and every clamp', () => {
    assert.equal(formatBudgets(budgets), 'prefixTokens 2106 (asked 16384: what this CPU prefills in time)');
    assert.equal(formatBudgets({ effective: { prefixTokens: 768 } }), 'prefixTokens 768');
    assert.equal(
      formatBudgets({ effective: { prefixTokens: 768 }, clamped: [{ setting: 'kvSnapshotMb', asked: 9000, effective: 512 }] }),
      'prefixTokens 768; kvSnapshotMb 512 (asked 9000, clamped)',
    );
    assert.equal(formatBudgets({ effective: { suffixTokens: 10 } }), undefined);
    assert.equal(formatBudgets(undefined), undefined);
  });

  it('puts both in the tooltip when the server reports them', () => {
    const view = statusBarView(input({ server: { ...ready, acceptance, budgets }, lastTtftMs: 52, p95TtftMs: 90 }));
    assert.match(view.tooltip, /This session: accepted 12 · partial 3 · refused 5 · rate 75%\./);
    assert.match(view.tooltip, /Prompt budget: prefixTokens 2106 \(asked 16384: what this CPU prefills in time\)\./);
    assert.equal(view.text, '$(sparkle) small 52ms · p95 90ms');
  });

  it('leaves them out for a server that does not report them', () => {
    const view = statusBarView(input({ lastTtftMs: 52 }));
    assert.doesNotMatch(view.tooltip, /session|budget/);
    assert.match(view.tooltip, /Time to first token: last 52ms/);
  });
});

describe('the draft model in the tooltip', () => {
  it('names the draft and the share of its tokens kept', () => {
    const text = formatModel({
      name: 'medium+small',
      preset: 'medium+small',
      device: 'cpu',
      nGpuLayers: 0,
      draft: { name: 'small', acceptance: 0.614 },
    });
    assert.match(text, /draft small: 61% of its tokens kept/);
    assert.strictEqual(formatDraft(undefined), '');
  });
});
