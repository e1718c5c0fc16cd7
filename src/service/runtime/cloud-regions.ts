/**
 * The regions the simulated clouds know. Provisioning in any other region fails, as a real
 * cloud's API refuses an unknown region at apply time (the API accepts any region string on
 * create: only provisioning finds out). Snowflake and Databricks run on the three clouds, so
 * they accept any of their regions. docs/guides/runtime.md lists them.
 */
const AWS = [
  'us-east-1',
  'us-east-2',
  'us-west-1',
  'us-west-2',
  'ca-central-1',
  'sa-east-1',
  'eu-west-1',
  'eu-west-2',
  'eu-west-3',
  'eu-central-1',
  'eu-central-2',
  'eu-north-1',
  'eu-south-1',
  'ap-south-1',
  'ap-northeast-1',
  'ap-northeast-2',
  'ap-southeast-1',
  'ap-southeast-2',
  'af-south-1',
  'me-south-1',
];
const GCP = [
  'us-central1',
  'us-east1',
  'us-east4',
  'us-west1',
  'us-west2',
  'europe-west1',
  'europe-west2',
  'europe-west3',
  'europe-west4',
  'europe-north1',
  'asia-east1',
  'asia-northeast1',
  'asia-southeast1',
  'australia-southeast1',
  'southamerica-east1',
];
const AZURE = [
  'eastus',
  'eastus2',
  'westus',
  'westus2',
  'centralus',
  'northeurope',
  'westeurope',
  'uksouth',
  'francecentral',
  'germanywestcentral',
  'swedencentral',
  'japaneast',
  'southeastasia',
  'australiaeast',
  'brazilsouth',
];

export const CLOUD_REGIONS: Readonly<Record<string, readonly string[]>> = {
  aws: AWS,
  gcp: GCP,
  azure: AZURE,
  snowflake: [...AWS, ...GCP, ...AZURE],
  databricks: [...AWS, ...GCP, ...AZURE],
};

/** Why the simulated cloud refuses to provision there, or null when it can. */
export function regionProblem(provider: string, region: string): string | null {
  const known = CLOUD_REGIONS[provider];
  if (!known || known.includes(region)) return null;
  return `${provider} has no region "${region}" (e.g. ${known.slice(0, 3).join(', ')}; the simulated clouds' regions are listed in docs/guides/runtime.md)`;
}
