import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.js';
import { lines } from './helpers.js';

const project = (name: string) => `apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${name}\n`;
const channel = (project: string, name: string) =>
  `apiVersion: dataplatform/v1\nkind: NotificationChannel\nmetadata:\n  name: ${name}\n  project: ${project}\nspec:\n  type: email\n  config:\n    email_addresses: [ops@example.com]\n`;

/**
 * A directory (or file) of the config that is a symbolic link: skipped silently, its resources would
 * look deleted to `dpctl plan --prune` (found by a user who linked a team's directory in).
 */
describe('symbolic links in a config directory', () => {
  const outside = mkdtempSync(join(tmpdir(), 'dp-symlink-outside-'));
  mkdirSync(join(outside, 'shop'));
  writeFileSync(join(outside, 'shop', 'channels.yaml'), channel('shop', 'ops'));
  writeFileSync(join(outside, 'growth.yaml'), `${project('growth')}---\n${channel('growth', 'ops')}`);

  it('are followed, to directories and to files, and errors name the linked path', () => {
    const repo = mkdtempSync(join(tmpdir(), 'dp-symlink-repo-'));
    writeFileSync(join(repo, 'projects.yaml'), project('shop'));
    symlinkSync(join(outside, 'shop'), join(repo, 'shop'));
    symlinkSync(join(outside, 'growth.yaml'), join(repo, 'growth.yaml'));
    const { config, errors } = loadConfig('.', { cwd: repo });
    expect(errors).toEqual([]);
    expect(config.documents.map((d) => `${d.source.file} ${d.yamlKind} ${d.name}`).sort()).toEqual([
      'growth.yaml NotificationChannel ops',
      'growth.yaml Project growth',
      'projects.yaml Project shop',
      'shop/channels.yaml NotificationChannel ops',
    ]);
  });

  it('load each directory once, even through a link to an ancestor', () => {
    const repo = mkdtempSync(join(tmpdir(), 'dp-symlink-loop-'));
    writeFileSync(join(repo, 'projects.yaml'), `${project('shop')}---\n${channel('shop', 'ops')}`);
    mkdirSync(join(repo, 'nested'));
    symlinkSync(repo, join(repo, 'nested', 'up'));
    const { config, errors } = loadConfig('.', { cwd: repo });
    expect(errors).toEqual([]);
    expect(config.documents).toHaveLength(2);
  });

  it('report a broken link that could be YAML (a file or a directory), and ignore others', () => {
    const repo = mkdtempSync(join(tmpdir(), 'dp-symlink-broken-'));
    writeFileSync(join(repo, 'projects.yaml'), project('shop'));
    symlinkSync(join(outside, 'gone.yaml'), join(repo, 'gone.yaml'));
    symlinkSync(join(outside, 'gone-dir'), join(repo, 'team'));
    symlinkSync(join(outside, 'gone.md'), join(repo, 'README.md'));
    const { errors } = loadConfig('.', { cwd: repo });
    expect(lines(errors)).toEqual([
      `gone.yaml: is a symbolic link to ${join(outside, 'gone.yaml')}, which does not exist`,
      `team: is a symbolic link to ${join(outside, 'gone-dir')}, which does not exist`,
    ]);
  });
});
