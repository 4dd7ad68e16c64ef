// What an OpenPAI user's script does with Microsoft's OpenPAI JavaScript SDK, pointed at PAI.
//
// Environment: PAI_URL (the cluster's address, as OpenPAI users configure `pai_uri`),
// PAI_USERNAME and PAI_PASSWORD (an administrator), PAI_JOB_FILE (an OpenPAI job file whose
// tasks run until stopped). Prints one JSON document of what each call returned; on the first
// call that fails, prints {"failed": <step>, "error": ...} instead and exits with 1.

'use strict';

const fs = require('fs');
const yaml = require('js-yaml');
const { PAIV2 } = require('@microsoft/openpai-js-sdk');

const { PAI_URL, PAI_USERNAME, PAI_PASSWORD, PAI_JOB_FILE } = process.env;
const WAIT_MS = 60000;
const results = {};
let current = 'start';

async function step(name, call) {
  current = name;
  results[name] = await call();
  return results[name];
}

async function until(what, read, done) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = await read();
    if (done(value)) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function tokenLifetime(token) {
  const payload = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
  return payload.exp - payload.iat;
}

function summary(detail) {
  return {
    name: detail.name,
    state: detail.jobStatus.state,
    tags: detail.tags,
    roles: Object.fromEntries(
      Object.entries(detail.taskRoles).map(([role, { taskStatuses }]) => [
        role,
        taskStatuses.map((task) => ({
          taskIndex: task.taskIndex,
          taskState: task.taskState,
          containerNodeName: task.containerNodeName,
        })),
      ]),
    ),
  };
}

async function main() {
  const cluster = { pai_uri: PAI_URL, username: PAI_USERNAME, password: PAI_PASSWORD };
  const client = new PAIV2.OpenPAIClient(cluster);
  const user = PAI_USERNAME;
  const job = yaml.safeLoad(fs.readFileSync(PAI_JOB_FILE, 'utf8'));

  await step('info', () => client.api.getClusterInfo());
  await step('basicLogin', async () => {
    const login = await client.authn.basicLogin(user, PAI_PASSWORD, 3600);
    return { user: login.user, admin: login.admin, lifetime: tokenLifetime(login.token) };
  });

  await step('createJob', () => client.job.createJob(job));
  await step('running', async () =>
    summary(
      await until(
        'the job to run',
        () => client.job.getJob(user, job.name),
        (detail) =>
          detail.jobStatus.state === 'RUNNING' &&
          Object.values(detail.taskRoles).every((role) =>
            role.taskStatuses.every((task) => task.taskState === 'RUNNING'),
          ),
      ),
    ),
  );
  await step('listJobs', async () =>
    (await client.job.listJobs({ username: user })).map((item) => [item.name, item.state]),
  );
  await step('listJobsWithTotalCount', async () => {
    const page = await client.job.listJobs({ username: user, withTotalCount: true });
    return { totalCount: page.totalCount, names: page.data.map((item) => item.name) };
  });
  await step('getJobConfig', () => client.job.getJobConfig(user, job.name));
  await step('pods', async () =>
    (await client.kubernetes.getK8sPods()).items.map((pod) => ({
      node: pod.spec.nodeName,
      phase: pod.status.phase,
      job: pod.metadata.labels.jobName,
      role: pod.metadata.labels.FC_TASKROLE_NAME,
    })),
  );
  await step('nodes', async () =>
    (await client.kubernetes.getK8sNodes()).items.map((node) => ({
      name: node.metadata.name,
      address: node.status.addresses.find((address) => address.type === 'InternalIP').address,
      cpu: node.status.capacity.cpu,
      ready: node.status.conditions.find((condition) => condition.type === 'Ready').status,
    })),
  );

  await step('addTag', () => client.job.addTag(user, job.name, 'from-the-sdk'));
  await step('tagsAfterAdd', async () => (await client.job.getJob(user, job.name)).tags);
  await step('deleteTag', () => client.job.deleteTag(user, job.name, 'from-the-sdk'));
  await step('tagsAfterDelete', async () => (await client.job.getJob(user, job.name)).tags);

  await step('stop', () => client.job.updateJobExecutionType(user, job.name, 'STOP'));
  await step('stopped', async () =>
    summary(
      await until(
        'the job to stop',
        () => client.job.getJob(user, job.name),
        (detail) => detail.jobStatus.state === 'STOPPED',
      ),
    ),
  );
  await step('jobAttempts', async () =>
    (await client.jobHistory.getJobAttempts(user, job.name)).map((attempt) => ({
      attemptIndex: attempt.attemptIndex,
      isLatest: attempt.isLatest,
      state: attempt.state,
      jobName: attempt.jobName,
    })),
  );
  await step('jobAttempt', async () => {
    const attempt = await client.jobHistory.getJobAttempt(user, job.name, 0);
    return { attemptIndex: attempt.attemptIndex, state: attempt.state, roles: Object.keys(attempt.taskRoles) };
  });

  await step('virtualClusters', async () => Object.keys(await client.virtualCluster.listVirtualClusters()));
  await step('virtualCluster', async () => {
    const vc = await client.virtualCluster.getVirtualCluster('default');
    return { capacity: vc.capacity, gpu: vc.resourcesTotal.gpu, cpu: vc.resourcesTotal.cpu };
  });
  await step('skuTypes', () => client.virtualCluster.getVirtualClusterSkuTypes('default'));

  await step('createUser', () =>
    client.user.createUser({
      username: 'sdk_user',
      password: 'sdk-user-password',
      email: 'sdk_user@example.com',
      admin: false,
      virtualCluster: ['default'],
      extension: {},
    }),
  );
  await step('users', async () => (await client.user.getAllUser()).map((item) => item.username).sort());
  await step('user', async () => {
    const found = await client.user.getUser('sdk_user');
    return { email: found.email, admin: found.admin, virtualCluster: found.virtualCluster };
  });
  await step('createGroup', () =>
    client.group.createGroup({
      groupname: 'sdk_group',
      description: 'made with the OpenPAI SDK',
      externalName: '',
      extension: { acls: { admin: false, virtualClusters: ['research'], storageConfigs: [] } },
    }),
  );
  await step('addToGroup', () => client.user.updateUserGroup('sdk_user', 'sdk_group'));
  await step('groups', async () => (await client.group.getAllGroup()).map((group) => group.groupname).sort());
  await step('group', async () => {
    const group = await client.group.getGroup('sdk_group');
    return { description: group.description, acls: group.extension.acls };
  });
  await step('groupMembers', async () =>
    (await client.group.getGroupMembers('sdk_group')).map((member) => [member.username, member.clusterAdmin]),
  );
  await step('userAfterGroup', async () => (await client.user.getUser('sdk_user')).virtualCluster.sort());
}

main()
  .then(() => {
    process.stdout.write(JSON.stringify(results));
  })
  .catch((error) => {
    const detail = error && error.data ? error.data : String(error && (error.stack || error));
    process.stdout.write(JSON.stringify({ failed: current, error: detail, results }));
    process.exit(1);
  });
