/** Terraform provider address parts. The mirror host is ours: no registry serves it. */
export const PROVIDER_HOST = 'registry.terraform.io';
export const PROVIDER_NAMESPACE = 'dataplatform';
export const PROVIDER_TYPE = 'dataplatform';
export const PROVIDER_SOURCE = `${PROVIDER_NAMESPACE}/${PROVIDER_TYPE}`;
