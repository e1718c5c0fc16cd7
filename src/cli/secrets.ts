import { Command } from 'commander';

/** `dpctl secrets rotate-key`: moves every write-only value of a store under a new master key. */
export function secretsCommand(): Command {
  const secrets = new Command('secrets').description(
    'Manage the encryption of write-only values (passwords, signing secrets, webhook URLs) at rest',
  );
  secrets
    .command('rotate-key')
    .description('Re-encrypt every secret under a new master key; stop the service first. Crash-safe: run it again to continue.')
    .requiredOption('--new-key-file <file>', 'the new key (base64 of 32 bytes); created, mode 0600, when the file does not exist')
    .option('--data-dir <dir>', 'data dir of the service', '.dpctl-data')
    .option('--database-url <url>', 'PostgreSQL URL, when the service uses one (env DP_DATABASE_URL)')
    .option(
      '--secrets-key-file <file>',
      'the current key file, when the service is started with one (env DP_SECRETS_KEY); default: the generated key',
    )
    .action(async (opts) => {
      const { rotateKey } = await import('../service/secrets/rotate.js');
      let lastReport = 0;
      const result = await rotateKey({
        dataDir: opts.dataDir,
        databaseUrl: opts.databaseUrl ?? process.env.DP_DATABASE_URL,
        secretsKeyFile: opts.secretsKeyFile,
        secretsKey: process.env.DP_SECRETS_KEY,
        newKeyFile: opts.newKeyFile,
        onProgress: ({ resealed, seq, maxSeq }) => {
          if (Date.now() - lastReport < 2000) return;
          lastReport = Date.now();
          process.stderr.write(`  ${resealed} re-encrypted, ${Math.round((100 * seq) / Math.max(maxSeq, 1))}% of rows examined\n`);
        },
      });
      const lines = [
        `${result.createdNewKeyFile ? 'Created' : 'Read'} new key ${result.newKeyId} (${opts.newKeyFile})`,
        `Re-encrypted ${result.resealed} row(s) ${result.oldKeyId ? `from key ${result.oldKeyId} ` : ''}to key ${result.newKeyId}`,
      ];
      if (result.removedAutoKey)
        lines.push(
          `Removed the generated key (${result.removedAutoKey === 'database' ? "in the database's meta table" : 'secrets.key in the data dir'}), which no longer opens anything`,
        );
      lines.push(`Start the service with --secrets-key-file ${opts.newKeyFile} (or DP_SECRETS_KEY) from now on.`);
      process.stdout.write(lines.join('\n') + '\n');
    });
  return secrets;
}
