// The JSON shapes the spec defines for a project and for consent instance settings.
import type { ConsentInstance, EmulatorState, Project } from './state.ts';

export interface ProjectView {
  projectId: string;
  projectSlug: string;
  projectName: string;
  description: string | null;
  organizationId: string;
  organizationSlug: string;
  dashboardURL: string;
  /** The spec leaves the inner fields of `consent` unshown; the emulator gives id, slug and name. */
  products: { consent: { instanceId: string; instanceSlug: string; instanceName: string } | null };
}

export interface ConsentView {
  instanceId: string;
  instanceSlug: string;
  instanceName: string;
  trustedOrigins: string[];
  branding: ConsentInstance['branding'];
  backendURL: string | null;
  backendVersion: string;
  dashboardURL: string;
}

export function projectView(state: EmulatorState, project: Project): ProjectView {
  const org = state.organization(project.organizationId);
  const consent =
    project.consentInstanceId === null ? undefined : state.consentInstances.get(project.consentInstanceId);
  return {
    projectId: project.id,
    projectSlug: project.slug,
    projectName: project.name,
    description: project.description,
    organizationId: org.id,
    organizationSlug: org.slug,
    dashboardURL: `${state.dashboardBaseURL}/${encodeURIComponent(org.slug)}/projects/${encodeURIComponent(project.id)}`,
    products: {
      consent:
        consent === undefined
          ? null
          : { instanceId: consent.id, instanceSlug: consent.slug, instanceName: consent.name },
    },
  };
}

export function consentView(state: EmulatorState, project: Project, instance: ConsentInstance): ConsentView {
  const org = state.organization(project.organizationId);
  return {
    instanceId: instance.id,
    instanceSlug: instance.slug,
    instanceName: instance.name,
    trustedOrigins: [...instance.trustedOrigins],
    branding: instance.branding,
    backendURL: instance.backendURL,
    backendVersion: instance.backendVersion,
    dashboardURL: `${state.dashboardBaseURL}/${encodeURIComponent(org.slug)}/consent/${encodeURIComponent(instance.id)}`,
  };
}
