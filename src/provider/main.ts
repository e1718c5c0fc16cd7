// Entry of the Terraform provider plugin (bundled to dist/provider/provider.mjs by `npm run build`).
import { serveProvider } from './server.js';

serveProvider().catch((err: Error) => {
  process.stderr.write(`terraform-provider-dataplatform: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
