import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RestartBudget } from '../src/restartPolicy';

describe('RestartBudget', () => {
  it('allows a bounded number of restarts within the window', () => {
    const budget = new RestartBudget(3, 60_000);
    assert.ok(budget.tryRestart(0));
    assert.ok(budget.tryRestart(1000));
    assert.ok(budget.tryRestart(2000));
    assert.ok(!budget.tryRestart(3000));
  });

  it('forgets crashes older than the window', () => {
    const budget = new RestartBudget(2, 60_000);
    assert.ok(budget.tryRestart(0));
    assert.ok(budget.tryRestart(10_000));
    assert.ok(!budget.tryRestart(20_000));
    assert.ok(budget.tryRestart(60_000));
  });

  it('starts over after a manual restart', () => {
    const budget = new RestartBudget(1, 60_000);
    assert.ok(budget.tryRestart(0));
    assert.ok(!budget.tryRestart(1));
    budget.reset();
    assert.ok(budget.tryRestart(2));
  });
});
