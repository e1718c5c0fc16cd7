import * as cdk from '../cdk.js';
import {
  AlertRule,
  Connector,
  DataplatformProvider,
  DbtProject,
  NotificationChannel,
  Pipeline,
  Project,
  User,
  type AlertRuleConfig,
  type ConnectorConfig,
  type DataplatformProviderConfig,
  type DbtProjectConfig,
  type NotificationChannelConfig,
  type PipelineConfig,
  type ProjectConfig,
  type UserConfig,
} from '../generated/index.js';
import { pipelineSteps, type Step } from './pipeline.js';

/** A construct class of a project-level kind: its config has projectId and name. */
type ProjectScoped<T, C> = new (scope: cdk.Construct, id: string, config: C) => T;
/** A construct config without what the project scope fills in. */
export type InProject<C> = Omit<C, 'projectId' | 'name'>;

export interface PlatformProps {
  /** The provider configuration (default: all from DATAPLATFORM_* environment variables), or a provider already made. */
  provider?: DataplatformProviderConfig | DataplatformProvider;
}

/**
 * A tenant's platform in one stack: the provider plus projects and users. Constructs get ids
 * from their names, so `platform.addProject('analytics').addConnector('orders-db', ...)` is all
 * a team writes; every id between resources is a Terraform reference.
 */
export class Platform extends cdk.Construct {
  readonly provider: DataplatformProvider;

  constructor(scope: cdk.Construct, id: string, props: PlatformProps = {}) {
    super(scope, id);
    this.provider =
      props.provider instanceof DataplatformProvider ? props.provider : new DataplatformProvider(this, 'provider', props.provider ?? {});
  }

  addProject(name: string, config: Omit<ProjectConfig, 'name'> = {}): ProjectScope {
    return new ProjectScope(this, name, { ...config, name });
  }

  addUser(email: string, config: Omit<UserConfig, 'email'>): User {
    return new User(this, `user-${email}`, { ...config, email });
  }
}

/** A project and what lives in it; every add* fills projectId with a reference to the project. */
export class ProjectScope extends cdk.Construct {
  readonly project: Project;

  constructor(scope: cdk.Construct, id: string, config: ProjectConfig) {
    super(scope, id);
    this.project = new Project(this, 'project', config);
  }

  /** The project's id (a token). */
  get id(): string {
    return this.project.id;
  }

  /**
   * Any project-level construct: `project.add(MaskingPolicy, 'hash-emails', { ... })`. The
   * construct id is `<kind>-<name>` so two kinds may share a name, as the API allows.
   */
  add<T extends cdk.TerraformResource, C extends { projectId: string; name: string }>(
    type: ProjectScoped<T, C> & { tfResourceType: string },
    name: string,
    config: InProject<C>,
  ): T {
    const kind = type.tfResourceType.replace(/^[^_]+_/, '').replace(/_/g, '-');
    return new type(this, `${kind}-${name}`, { ...config, projectId: this.project.id, name } as unknown as C);
  }

  addConnector(name: string, config: InProject<ConnectorConfig>): Connector {
    return this.add(Connector, name, config);
  }

  addNotificationChannel(name: string, config: InProject<NotificationChannelConfig>): NotificationChannel {
    return this.add(NotificationChannel, name, config);
  }

  addDbtProject(name: string, config: InProject<DbtProjectConfig>): DbtProject {
    return this.add(DbtProject, name, config);
  }

  addAlertRule(name: string, config: InProject<AlertRuleConfig>): AlertRule {
    return this.add(AlertRule, name, config);
  }

  /** A pipeline from steps that name constructs (see step()), not ids. */
  addPipeline(name: string, config: Omit<InProject<PipelineConfig>, 'steps'> & { steps: Step[] }): Pipeline {
    const { steps, ...rest } = config;
    return this.add(Pipeline, name, { ...rest, steps: pipelineSteps(steps) });
  }
}
