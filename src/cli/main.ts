import { Command } from 'commander';
import { serveCommand, tenantCommand } from './serve.js';
import { validateCommand } from './validate.js';
import { applyCommand, driftCommand, planCommand } from './plan.js';
import { adoptCommand, exportCommand } from './export.js';
import { providerCommand } from './provider.js';
import { secretsCommand } from './secrets.js';
import { initCommand } from './init.js';
import { runCommand } from './run.js';
import { alertsCommand } from './alerts.js';
import { controllerCommand } from '../controller/cli.js';
import { PACKAGE_VERSION } from '../version.js';

const program = new Command('dpctl')
  .description('Manage a data platform as code: the reference service, plans and applies, the controller, the Terraform provider')
  .version(PACKAGE_VERSION)
  .addCommand(serveCommand())
  .addCommand(tenantCommand())
  .addCommand(initCommand())
  .addCommand(validateCommand())
  .addCommand(planCommand())
  .addCommand(applyCommand())
  .addCommand(driftCommand())
  .addCommand(exportCommand())
  .addCommand(adoptCommand())
  .addCommand(runCommand())
  .addCommand(alertsCommand())
  .addCommand(providerCommand())
  .addCommand(secretsCommand())
  .addCommand(controllerCommand());

// `dpctl ... | head`: a reader that closes early is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

program.parseAsync(process.argv).catch((err: Error) => {
  process.stderr.write(`dpctl: ${err.message}\n`);
  process.exit(1);
});
