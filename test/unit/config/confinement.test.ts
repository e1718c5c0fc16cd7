import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONFIG_FILE_MAX_BYTES, loadConfig, resolveSecrets, SECRET_FILE_MAX_BYTES, type Confinement } from '../../../src/config/index.js';
import { lines } from './helpers.js';

/**
 * The controller reads a revision confined to its checkout: anyone who can push to the repository
 * writes its YAML, and must not make the controller read its own files (the deploy key, the
 * service account token) or credentials (DATAPLATFORM_API_KEY) into a connector's password.
 */
const dirs: string[] = [];
const tempDir = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const project = 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: shop\n';
const user = (name: string, ref: string) =>
  `---\napiVersion: dataplatform/v1\nkind: User\nmetadata: { name: ${name} }\nspec: { role: read-only, password: { secretRef: ${ref} } }\n`;

describe('a configuration confined to its repository', () => {
  const outside = tempDir('dp-confine-outside-');
  writeFileSync(join(outside, 'deploy-key'), 'ssh-private-key-material\n');
  mkdirSync(join(outside, 'team'));
  writeFileSync(join(outside, 'team', 'more.yaml'), project);
  writeFileSync(join(outside, 'other.yaml'), project);
  const mounted = tempDir('dp-confine-secrets-');
  writeFileSync(join(mounted, 'ops-password'), 'mounted-password-1\n');

  const repo = tempDir('dp-confine-repo-');
  mkdirSync(join(repo, 'secrets'));
  writeFileSync(join(repo, 'secrets', 'in-repo'), 'in-repo-password-1\n');
  symlinkSync(join(outside, 'deploy-key'), join(repo, 'secrets', 'key-link'));
  symlinkSync(join(outside, 'team'), join(repo, 'team'));
  symlinkSync(join(outside, 'other.yaml'), join(repo, 'other.yaml'));
  symlinkSync(join(repo, 'secrets'), join(repo, 'secrets-link')); // inside: fine
  writeFileSync(
    join(repo, 'users.yaml'),
    project +
      user('a@example.com', '{ file: secrets/in-repo }') +
      user('b@example.com', '{ file: secrets-link/in-repo }') +
      user('c@example.com', `{ file: ${join(mounted, 'ops-password')} }`) +
      user('d@example.com', '{ env: OPS_PASSWORD }') +
      user('e@example.com', `{ file: ${join(outside, 'deploy-key')} }`) +
      user('f@example.com', '{ file: secrets/key-link }') +
      user('g@example.com', '{ env: DATAPLATFORM_API_KEY }') +
      user('h@example.com', '{ env: GIT_CONFIG_VALUE_0 }'),
  );
  const confine: Confinement = { root: repo, secretDirs: [mounted], refusedEnvPrefixes: ['DATAPLATFORM_', 'DPCTL_', 'GIT_'] };
  const env = { OPS_PASSWORD: 'env-password-1', DATAPLATFORM_API_KEY: 'dpk_controller', GIT_CONFIG_VALUE_0: 'Authorization: x' };

  it('reads no YAML file through a link out of the repository, and says so once per link', () => {
    const { errors } = loadConfig('.', { cwd: repo, confineTo: repo });
    expect(lines(errors)).toEqual([
      `other.yaml: is a symbolic link out of the repository (to ${join(outside, 'other.yaml')}): not read`,
      `team: is a symbolic link out of the repository (to ${join(outside, 'team')}): not read`,
    ]);
    // Unconfined (the CLI), the same links are followed.
    expect(loadConfig('.', { cwd: repo }).errors.map((e) => e.code)).toEqual(['duplicate_resource', 'duplicate_resource']);
  });

  it('reads secret files in the repository and the secret directories only, and none of its own variables', () => {
    const { config } = loadConfig('users.yaml', { cwd: repo });
    const { secrets, errors } = resolveSecrets(config.documents, { env, confine });
    const byName = (name: string) =>
      secrets.get(
        config.documents.find((d) => d.name === name)!,
        'password',
      );
    expect(['a', 'b', 'c', 'd'].map((n) => byName(`${n}@example.com`))).toEqual([
      'in-repo-password-1',
      'in-repo-password-1',
      'mounted-password-1',
      'env-password-1',
    ]);
    expect(lines(errors)).toEqual([
      `users.yaml:29:57: User/e@example.com: spec.password: file ${join(outside, 'deploy-key')} is refused: it leads outside the repository and the secret directories (--secrets-dir) (to ${join(outside, 'deploy-key')})`,
      `users.yaml:34:57: User/f@example.com: spec.password: file secrets/key-link is refused: it leads outside the repository and the secret directories (--secrets-dir) (to ${join(outside, 'deploy-key')})`,
      `users.yaml:39:56: User/g@example.com: spec.password: environment variable DATAPLATFORM_API_KEY is refused: variables named DATAPLATFORM_* are the controller's own settings and credentials`,
      `users.yaml:44:56: User/h@example.com: spec.password: environment variable GIT_CONFIG_VALUE_0 is refused: variables named GIT_* are the controller's own settings and credentials`,
    ]);
    expect(JSON.stringify(errors)).not.toMatch(/ssh-private-key-material|dpk_controller|Authorization/);
    // Unconfined, every one is read.
    expect(resolveSecrets(config.documents, { env }).errors).toEqual([]);
  });
});

describe('secret files', () => {
  it('are regular files of at most 1 MiB: a named pipe, a device or a large file is an error, not a read that never ends', () => {
    const dir = tempDir('dp-secret-files-');
    writeFileSync(join(dir, 'big'), Buffer.alloc(SECRET_FILE_MAX_BYTES + 1, 'a'));
    execFileSync('mkfifo', [join(dir, 'pipe')]); // nobody writes to it: opening it to read must not wait
    writeFileSync(
      join(dir, 'users.yaml'),
      project +
        user('d@example.com', '{ file: pipe }') +
        user('a@example.com', '{ file: /dev/zero }') +
        user('b@example.com', '{ file: big }') +
        user('c@example.com', `{ file: ${dir} }`),
    );
    const { config } = loadConfig('users.yaml', { cwd: dir });
    const { errors } = resolveSecrets(config.documents, { env: {} });
    expect(errors.map((e) => e.message)).toEqual([
      'file pipe cannot be read: it is not a regular file',
      'file /dev/zero cannot be read: it is not a regular file',
      `file big cannot be read: it holds ${SECRET_FILE_MAX_BYTES + 1} bytes; a secret file holds at most ${SECRET_FILE_MAX_BYTES}`,
      `file ${dir} cannot be read: it is a directory`,
    ]);
  });
});

describe('config files', () => {
  it('hold at most 64 MiB: a larger one is reported, not read (a data dump committed by mistake)', () => {
    const dir = tempDir('dp-config-size-');
    writeFileSync(join(dir, 'a-project.yaml'), project);
    writeFileSync(join(dir, 'dump.yaml'), '');
    truncateSync(join(dir, 'dump.yaml'), CONFIG_FILE_MAX_BYTES + 1); // sparse: nothing is written
    const { config, errors } = loadConfig('.', { cwd: dir });
    expect(lines(errors)).toEqual(['dump.yaml: holds 64.1 MiB; a config file holds at most 64 MiB (split it)']);
    expect(config.documents.map((d) => d.name)).toEqual(['shop']);
  });
});
