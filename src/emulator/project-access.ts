// Finding a project on behalf of a caller. The spec does not say which roles the project
// operations need; the emulator lets any member read and owners, admins and the
// organization's API keys write (docs/emulator.md).
import { roleIn, type Caller } from './auth.ts';
import { EmulatorRequestError } from './errors.ts';
import type { EmulatorState, Project } from './state.ts';

/** The project, for a caller allowed to change it: 404 when invisible to the caller, 403 for members. */
export function writableProject(state: EmulatorState, caller: Caller, projectId: string): Project {
  const project = state.projects.get(projectId);
  const role = project === undefined ? undefined : roleIn(caller, project.organizationId);
  // A project in an organization the caller cannot see answers like a missing one, so ids of
  // other organizations' projects cannot be probed.
  if (project === undefined || role === undefined) {
    throw new EmulatorRequestError(404, 'No project with this id.', { details: { projectId } });
  }
  if (role === 'member') {
    throw new EmulatorRequestError(
      403,
      'Updating a project requires the owner or admin role, or an API key of its organization.',
      {
        details: { projectId, role },
      },
    );
  }
  return project;
}
