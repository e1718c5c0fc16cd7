import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { build } from 'esbuild';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { Role, type IRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding, type IRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { controllerCommand } from '../../src/controller/cli.js';
import { advertiseUrl, parseListen } from '../../src/controller/server.js';
import { parseDuration } from '../../src/controller/duration.js';
import { clientConfigFromEnv } from '../../src/client/config.js';
import { SCHEMAS_DIR } from '../../src/kinds/index.js';

/**
 * controller/deploy: every manifest parses and passes the Kubernetes OpenAPI schema
 * (kubernetes-models), and the pieces fit together: the container's args are accepted by the
 * real `dpctl controller` option parser, probes hit its --listen port, the Role grants only
 * Leases, the pod runs as non-root on a read-only root with the state dir on an emptyDir.
 * controller/Dockerfile: its structure (it cannot be built here: no Docker engine).
 */
const ROOT = resolve('.');
const DEPLOY = join(ROOT, 'controller', 'deploy');

const MODELS: Record<string, { new (data: never): { validate(): void } }> = {
  'v1/Namespace': Namespace,
  'v1/ServiceAccount': ServiceAccount,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
};

interface Manifest {
  file: string;
  line: number;
  doc: any;
}

/** Every document of every manifest (kustomization.yaml aside), with a YAML error as file:line:column. */
function loadManifests(): { manifests: Manifest[]; kustomization: any } {
  const manifests: Manifest[] = [];
  let kustomization: any;
  for (const name of readdirSync(DEPLOY)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()) {
    const file = join(DEPLOY, name);
    const text = readFileSync(file, 'utf8');
    for (const doc of parseAllDocuments(text, { prettyErrors: true })) {
      if (doc.errors.length) {
        const e = doc.errors[0];
        throw new Error(`${relative(ROOT, file)}:${e.linePos?.[0].line}:${e.linePos?.[0].col}: ${e.message}`);
      }
      const value = doc.toJS();
      if (value == null) continue;
      const line = text.slice(0, doc.range[0]).split('\n').length;
      if (name === 'kustomization.yaml') kustomization = value;
      else manifests.push({ file: `${relative(ROOT, file)}:${line}`, line, doc: value });
    }
  }
  return { manifests, kustomization };
}

const { manifests, kustomization } = loadManifests();
/** The example Secrets (placeholders): shown for their names and keys, never applied by kustomization.yaml. */
const EXAMPLE_FILES = ['secret.example.yaml'];
const isExample = (m: Manifest) => EXAMPLE_FILES.some((f) => m.file.startsWith(`controller/deploy/${f}:`));
const applied = manifests.filter((m) => !isExample(m));
const all = (kind: string) => manifests.filter((m) => m.doc.kind === kind).map((m) => m.doc);
const one = <T = any>(kind: string): T => {
  const found = all(kind);
  expect(found, `exactly one ${kind}`).toHaveLength(1);
  return found[0] as T;
};

const deployment = one<IDeployment>('Deployment');
const pod = deployment.spec!.template.spec!;
const container = pod.containers.find((c) => c.name === 'controller') as IContainer;
const configMap = one('ConfigMap');
const secretNamed = (name: string) => {
  const found = all('Secret').find((s) => s.metadata.name === name);
  expect(found, `Secret ${name}`).toBeDefined();
  return found;
};
const credentialsRef = container.env!.find((e) => e.name === 'DATAPLATFORM_API_KEY')!.valueFrom!.secretKeyRef!.name!;
const secret = secretNamed(credentialsRef);

/** The container's environment as the kubelet resolves it (refs looked up in the manifests, field refs faked). */
function resolveEnv(c: IContainer): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    const from = e.valueFrom;
    if (e.value !== undefined) env[e.name] = e.value;
    else if (from?.fieldRef) env[e.name] = `<${from.fieldRef.fieldPath}>`;
    else if (from?.configMapKeyRef) {
      const cm = all('ConfigMap').find((m) => m.metadata.name === from.configMapKeyRef!.name);
      expect(cm, `ConfigMap ${from.configMapKeyRef.name} for env ${e.name}`).toBeDefined();
      expect(cm.data, `ConfigMap key ${from.configMapKeyRef.key}`).toHaveProperty(from.configMapKeyRef.key);
      env[e.name] = cm.data[from.configMapKeyRef.key];
    } else if (from?.secretKeyRef) {
      const s = all('Secret').find((m) => m.metadata.name === from.secretKeyRef!.name);
      expect(s, `Secret ${from.secretKeyRef.name} for env ${e.name}`).toBeDefined();
      expect({ ...s.data, ...s.stringData }, `Secret key ${from.secretKeyRef.key}`).toHaveProperty(from.secretKeyRef.key);
      env[e.name] = { ...s.data, ...s.stringData }[from.secretKeyRef.key];
    } else throw new Error(`env ${e.name} has no value`);
  }
  return env;
}

/** Kubernetes' $(VAR) expansion of args; an unknown variable stays literal there, which we refuse. */
function expand(arg: string, env: Record<string, string>): string {
  return arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (_, name: string) => {
    if (!(name in env)) throw new Error(`arg ${arg} refers to $(${name}), which the container does not define`);
    return env[name];
  });
}

/** The options `dpctl controller` would run with, parsed by its real commander definition. */
async function parseControllerArgs(args: string[]): Promise<Record<string, any>> {
  let parsed: Record<string, any> | undefined;
  const cmd = controllerCommand()
    .exitOverride()
    .configureOutput({ writeErr: () => {}, writeOut: () => {} })
    .action((opts: Record<string, any>) => {
      parsed = opts;
    });
  await cmd.parseAsync(args, { from: 'user' });
  if (!parsed) throw new Error('the controller command did not run');
  return parsed;
}

describe('controller/deploy manifests', () => {
  it('parse, pass the Kubernetes schema and are all listed in kustomization.yaml', () => {
    expect(manifests.length).toBeGreaterThanOrEqual(8);
    for (const m of manifests) {
      const Model = MODELS[`${m.doc.apiVersion}/${m.doc.kind}`];
      expect(Model, `${m.file}: no model for ${m.doc.apiVersion} ${m.doc.kind}`).toBeDefined();
      try {
        new Model(m.doc as never).validate();
      } catch (err) {
        throw new Error(`${m.file}: ${m.doc.kind} ${m.doc.metadata?.name}: ${(err as Error).message}`, { cause: err });
      }
      // kustomize sets the namespace: a hard-coded one would split the objects across namespaces.
      if (m.doc.kind !== 'Namespace') expect(m.doc.metadata.namespace, `${m.file}: metadata.namespace`).toBeUndefined();
    }
    const files = readdirSync(DEPLOY).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml' && !EXAMPLE_FILES.includes(f));
    expect([...kustomization.resources].sort()).toEqual(files.sort());
  });

  it('never apply the placeholder Secrets: the example stays beside them, outside kustomization.yaml', () => {
    for (const f of EXAMPLE_FILES) expect(existsSync(join(DEPLOY, f)), f).toBe(true);
    expect(kustomization.resources).not.toContain('secret.example.yaml');
    expect(applied.filter((m) => m.doc.kind === 'Secret').map((m) => m.file)).toEqual([]);
    // Still, every Secret the Deployment names is shown in the example, with the keys it reads.
    expect(
      all('Secret')
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(['dpctl-config-secrets', 'dpctl-controller-credentials']);
    expect(kustomization.namespace).toBe(one('Namespace').metadata.name);
    expect(kustomization.images.map((i: any) => i.name)).toContain(container.image!.split(':')[0]);
  });

  // kubectl's own kustomize (offline: no cluster needed). Without kubectl installed, the schema check above stands alone.
  const kubectl = ['/usr/bin/kubectl', '/usr/local/bin/kubectl'].find((p) => existsSync(p));
  it.skipIf(!kubectl)('build with `kubectl kustomize` into exactly these objects, all in the Namespace it declares', () => {
    const rendered = execFileSync(kubectl!, ['kustomize', DEPLOY], { encoding: 'utf8' });
    const docs = parseAllDocuments(rendered).map((d) => d.toJS());
    const ids = (list: any[]) => list.map((d) => `${d.kind}/${d.metadata.name}`).sort();
    expect(ids(docs)).toEqual(ids(applied.map((m) => m.doc)));
    expect(docs.filter((d) => d.kind === 'Secret')).toEqual([]);
    const namespace = one('Namespace').metadata.name;
    for (const d of docs) if (d.kind !== 'Namespace') expect(d.metadata.namespace, `${d.kind}/${d.metadata.name}`).toBe(namespace);
    const image = docs.find((d) => d.kind === 'Deployment').spec.template.spec.containers[0].image as string;
    const pinned = kustomization.images.find((i: any) => image.startsWith(`${i.newName ?? i.name}:`));
    expect(pinned, `the Deployment's image ${image} comes from kustomization.images`).toBeDefined();
  });

  it('grant only get/create/update on Leases, namespaced, to the ServiceAccount the pod runs as', () => {
    expect(all('ClusterRole')).toHaveLength(0);
    expect(all('ClusterRoleBinding')).toHaveLength(0);
    const role = one<IRole>('Role');
    expect(role.rules).toEqual([{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] }]);
    const binding = one<IRoleBinding>('RoleBinding');
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata!.name });
    const sa = one('ServiceAccount');
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: sa.metadata.name }]);
    expect(pod.serviceAccountName).toBe(sa.metadata.name);
    expect(pod.automountServiceAccountToken).not.toBe(false);
  });

  it('run the controller with args the real CLI accepts: Lease election, listen port = probe port, state dir on an emptyDir', async () => {
    expect(deployment.spec!.replicas).toBe(2);
    expect(pod.containers).toHaveLength(1);
    const env = resolveEnv(container);
    const args = (container.args ?? []).map((a) => expand(a, env));
    const opts = await parseControllerArgs(args);
    expect(opts).toMatchObject({
      source: configMap.data.DPCTL_SOURCE,
      branch: configMap.data.DPCTL_BRANCH,
      path: configMap.data.DPCTL_PATH,
      // Explicit: a default from the path is the same in every repository laid out alike.
      sourceId: configMap.data.DPCTL_SOURCE_ID,
      mode: configMap.data.DPCTL_MODE,
      // A connector with a wrong password is not reported healthy (connection-tests.ts).
      testConnections: true,
      leaderElection: 'lease',
      leaseNamespace: '<metadata.namespace>',
      leaseName: 'dpctl-controller',
      stateDir: '/var/lib/dpctl',
    });
    expect(parseDuration(opts.interval, '--interval')).toBeGreaterThan(0);
    // The Lease identity is the pod name (the elector reads POD_NAME).
    expect(env.POD_NAME).toBe('<metadata.name>');
    expect(Number(opts.leaseSeconds)).toBeGreaterThanOrEqual(5);
    // Credentials never as flags (they would show in `ps` and in the pod spec).
    expect(args.join(' ')).not.toMatch(/--(api-key|webhook-secret|password)\b/);

    // The port the controller listens on is the one the probes and the Service use.
    const listen = parseListen(opts.listen);
    expect(listen.host).toBe('0.0.0.0');
    const port = container.ports!.find((p) => p.containerPort === listen.port);
    expect(port, `a container port for --listen ${opts.listen}`).toBeDefined();
    const probePort = (probe: any) =>
      typeof probe.httpGet.port === 'string'
        ? container.ports!.find((p) => p.name === probe.httpGet.port)?.containerPort
        : probe.httpGet.port;
    expect(container.livenessProbe!.httpGet!.path).toBe('/healthz');
    expect(probePort(container.livenessProbe)).toBe(listen.port);
    expect(container.readinessProbe!.httpGet!.path).toBe('/readyz');
    expect(probePort(container.readinessProbe)).toBe(listen.port);
    const service = one('Service');
    const targets = service.spec.ports.map((p: any) =>
      typeof p.targetPort === 'string' ? container.ports!.find((cp) => cp.name === p.targetPort)?.containerPort : p.targetPort,
    );
    expect(targets).toContain(listen.port);
    const podLabels = deployment.spec!.template.metadata!.labels!;
    for (const [k, v] of Object.entries(service.spec.selector)) expect(podLabels[k]).toBe(v);
    for (const [k, v] of Object.entries(one('PodDisruptionBudget').spec.selector.matchLabels)) expect(podLabels[k]).toBe(v);
    for (const [k, v] of Object.entries(deployment.spec!.selector.matchLabels!)) expect(podLabels[k]).toBe(v);

    // The state dir is writable under the read-only root: an emptyDir is mounted there.
    const mount = container.volumeMounts!.find((m) => m.mountPath === opts.stateDir);
    expect(mount, `a volume mounted at --state-dir ${opts.stateDir}`).toBeDefined();
    expect(pod.volumes!.find((v) => v.name === mount!.name)?.emptyDir).toBeDefined();
  });

  it('let the leader advertise its pod IP and listen port, so a standby can forward webhooks to it', async () => {
    const env = resolveEnv(container);
    expect(env.POD_IP).toBe('<status.podIP>');
    const opts = await parseControllerArgs((container.args ?? []).map((a) => expand(a, env)));
    // What the controller computes from the downward API's value and --listen; the Service's pods answer on that port.
    const url = advertiseUrl({ explicit: opts.advertiseUrl, podIp: '10.1.2.3', listenPort: parseListen(opts.listen).port });
    expect(url).toBe(`http://10.1.2.3:${container.ports!.find((p) => p.name === 'http')!.containerPort}`);
  });

  it('give the client its URL and API key through the env names src/client/config.ts reads, from the ConfigMap and the Secret', () => {
    const env = resolveEnv(container);
    const config = clientConfigFromEnv(env);
    expect(config.url).toBe(configMap.data.DATAPLATFORM_URL);
    expect(config.apiKey).toBe(secret.stringData.DATAPLATFORM_API_KEY);
    const secretRefs = (container.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name);
    expect(secretRefs.sort()).toEqual([
      'DATAPLATFORM_API_KEY',
      'DPCTL_FINGERPRINT_KEY',
      'DPCTL_NOTIFY_SECRET',
      'DPCTL_NOTIFY_SLACK_URLS',
      'DPCTL_NOTIFY_WEBHOOK_URLS',
      'DPCTL_WEBHOOK_SECRET',
    ]);
    // Notifications are optional: a Secret without their keys still starts the pod.
    for (const e of (container.env ?? []).filter((x) => x.name.startsWith('DPCTL_NOTIFY_') || x.name === 'DPCTL_FINGERPRINT_KEY'))
      expect(e.valueFrom!.secretKeyRef!.optional).toBe(true);
    // No secret in the ConfigMap; the example Secret holds placeholders only.
    expect(Object.keys(configMap.data).filter((k) => /KEY|SECRET|PASSWORD|TOKEN/i.test(k))).toEqual([]);
    for (const s of all('Secret')) {
      for (const value of Object.values<string>(s.stringData ?? {})) expect(value).toMatch(/^REPLACE_ME/);
      expect(s.data).toBeUndefined();
    }
    // The config's secretRefs (`env: NAME`) come from one Secret, whole; optional, as not every repository has any.
    const fromSecrets = (container.envFrom ?? []).filter((e) => e.secretRef);
    expect(fromSecrets).toHaveLength(1);
    expect(fromSecrets[0].secretRef!.optional).toBe(true);
    expect(Object.keys(secretNamed(fromSecrets[0].secretRef!.name!).stringData).every((k) => /^[A-Z_][A-Z0-9_]*$/.test(k))).toBe(true);
  });

  it('run as non-root with a read-only root filesystem, no privilege escalation, and resource requests and limits', () => {
    expect(pod.securityContext?.runAsNonRoot).toBe(true);
    expect(pod.securityContext?.runAsUser).toBeGreaterThan(0);
    const sc = container.securityContext!;
    expect(sc.readOnlyRootFilesystem).toBe(true);
    expect(sc.allowPrivilegeEscalation).toBe(false);
    expect(sc.capabilities?.drop).toEqual(['ALL']);
    expect(sc.runAsUser ?? pod.securityContext?.runAsUser).not.toBe(0);
    for (const kind of ['requests', 'limits'] as const) {
      expect(container.resources?.[kind]?.cpu, `resources.${kind}.cpu`).toBeDefined();
      expect(container.resources?.[kind]?.memory, `resources.${kind}.memory`).toBeDefined();
    }
    // The Dockerfile's user is the one the pod asks for, so runAsNonRoot holds with either.
    expect(dockerfile.finalUser).toBe(`${pod.securityContext!.runAsUser}:${pod.securityContext!.runAsGroup}`);
  });
});

/** Dockerfile instructions, continuation lines joined, comments dropped, grouped by stage. */
function parseDockerfile(text: string) {
  const instructions = text
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const [, op, rest] = /^(\S+)\s+(.*)$/.exec(l)!;
      return { op: op.toUpperCase(), args: rest };
    });
  const stages: Array<{ from: string; name?: string; instructions: typeof instructions }> = [];
  for (const i of instructions) {
    if (i.op === 'FROM') {
      const [, from, name] = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(i.args)!;
      stages.push({ from, name, instructions: [] });
    } else stages.at(-1)?.instructions.push(i);
  }
  const final = stages.at(-1)!;
  return { instructions, stages, final, finalUser: final.instructions.filter((i) => i.op === 'USER').at(-1)?.args };
}

const dockerfileText = readFileSync(join(ROOT, 'controller', 'Dockerfile'), 'utf8');
const dockerfile = parseDockerfile(dockerfileText);

describe('controller/Dockerfile', () => {
  it('builds in one stage and runs from a small one as a numeric non-root user, with git, entering `dpctl controller`', () => {
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    const buildStage = dockerfile.stages[0];
    const runs = (stage: typeof buildStage) =>
      stage.instructions
        .filter((i) => i.op === 'RUN')
        .map((i) => i.args)
        .join('\n');
    expect(runs(buildStage)).toMatch(/npm ci\b/);
    expect(runs(buildStage)).toMatch(/npm run build\b/);
    expect(runs(buildStage)).toMatch(/npm prune --omit=dev/);
    const final = dockerfile.final;
    expect(runs(final)).toMatch(/apt-get install[^\n]*\bgit\b/);
    expect(runs(final)).not.toMatch(/npm (ci|install)/);
    // Numeric, so Kubernetes can verify runAsNonRoot; not root.
    expect(dockerfile.finalUser).toMatch(/^[1-9]\d*(:\d+)?$/);
    const entrypoint = JSON.parse(final.instructions.find((i) => i.op === 'ENTRYPOINT')!.args) as string[];
    expect(entrypoint.slice(-2)).toEqual(['/app/bin/dpctl.js', 'controller']);
    expect(entrypoint).toContain('node');
  });

  it('copies only the runtime paths into the final image, and they are where the code looks for them', () => {
    const copies = dockerfile.final.instructions
      .filter((i) => i.op === 'COPY')
      .map((i) => {
        const parts = i.args.split(/\s+/);
        const from = parts.find((p) => p.startsWith('--from='))?.slice('--from='.length);
        const [src, dest] = parts.filter((p) => !p.startsWith('--'));
        return { from, src, dest };
      });
    const buildName = dockerfile.stages[0].name;
    expect(
      copies
        .filter((c) => c.from === buildName)
        .map((c) => c.src)
        .sort(),
    ).toEqual(['/app/dist', '/app/node_modules', '/app/package.json', '/app/schemas']);
    expect(copies.filter((c) => !c.from).map((c) => c.src)).toEqual(['bin']);
    // bin/dpctl.js loads dist/cli/main.js; schemas/ is read two levels above dist/kinds.
    expect(readFileSync(join(ROOT, 'bin', 'dpctl.js'), 'utf8')).toContain("'../dist/cli/main.js'");
    expect(relative(ROOT, SCHEMAS_DIR)).toBe('schemas');
    expect(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')).toMatch(/"outDir":\s*"dist"/);
  });

  it('copies from the build context only paths that exist and that Dockerfile.dockerignore lets through', () => {
    const contextCopies = dockerfile.instructions
      .filter((i) => i.op === 'COPY' && !i.args.includes('--from='))
      .flatMap((i) =>
        i.args
          .split(/\s+/)
          .filter((p) => !p.startsWith('--'))
          .slice(0, -1),
      );
    expect(contextCopies.length).toBeGreaterThan(3);
    const ignore = readFileSync(join(ROOT, 'controller', 'Dockerfile.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(ignore[0]).toBe('**');
    const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/\*\*$/, ''));
    for (const path of contextCopies) {
      expect(existsSync(join(ROOT, path)), `${path} exists`).toBe(true);
      expect(allowed, `${path} is let through the ignore file`).toContain(path);
    }
  });

  it('holds no secrets, and the pruned image has every package the CLI imports (no devDependency at run time)', async () => {
    expect(dockerfileText).not.toMatch(/^\s*(ARG|ENV)\s+[^\n]*(TOKEN|PASSWORD|SECRET|API_KEY)/im);
    expect(dockerfileText).not.toMatch(/dpk_|BEGIN [A-Z ]*PRIVATE KEY/);
    // Every bare import reachable from the CLI must survive `npm prune --omit=dev`.
    const result = await build({
      entryPoints: [join(ROOT, 'src', 'cli', 'main.ts')],
      bundle: true,
      write: false,
      platform: 'node',
      format: 'esm',
      packages: 'external',
      metafile: true,
      logLevel: 'silent',
    });
    const packages = new Set<string>();
    for (const input of Object.values(result.metafile!.inputs)) {
      for (const imp of input.imports) {
        if (!imp.external || imp.path.startsWith('node:') || imp.path.startsWith('.')) continue;
        packages.add(
          imp.path
            .split('/')
            .slice(0, imp.path.startsWith('@') ? 2 : 1)
            .join('/'),
        );
      }
    }
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(packages.size).toBeGreaterThan(5);
    expect([...packages].filter((p) => !(p in pkg.dependencies))).toEqual([]);
  });
});
