import { describe, expect, it } from 'vitest';
import { suggestedEnvName } from '../../../src/engine/export.js';

/** The variable names `dpctl export` suggests for write-only secrets. */
describe('suggestedEnvName', () => {
  it('project, name and field in upper snake case', () => {
    expect(suggestedEnvName('analytics', 'orders-db', ['credentials', 'password'])).toBe('ANALYTICS_ORDERS_DB_PASSWORD');
    expect(suggestedEnvName(undefined, 'okta', ['client_secret'])).toBe('OKTA_CLIENT_SECRET');
    expect(suggestedEnvName('1st', 'x', ['password'])).toBe('_1ST_X_PASSWORD');
  });

  it('says a word repeated where two parts meet once', () => {
    expect(suggestedEnvName('sales', 'sales-slack', ['config', 'slack_webhook_url'])).toBe('SALES_SLACK_WEBHOOK_URL');
    expect(suggestedEnvName('analytics', 'data-team-slack', ['config', 'slack_webhook_url'])).toBe('ANALYTICS_DATA_TEAM_SLACK_WEBHOOK_URL');
    // Only neighbours: a word that comes back later stays.
    expect(suggestedEnvName('db', 'orders-db', ['password'])).toBe('DB_ORDERS_DB_PASSWORD');
  });
});
