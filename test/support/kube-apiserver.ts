// A real Kubernetes API server for the tests: etcd and kube-apiserver (built by
// scripts/test-kube.sh) on free loopback ports, serving TLS with certificates generated for this
// run, RBAC on, and a service-account issuer, so a test can act as keyroll's service account with
// a token from the TokenRequest API and see the 403 a missing permission earns.
// There is no kubelet, scheduler or controller-manager: nothing runs pods, rolls out deployments
// or finishes a namespace deletion. A test that needs a controller plays it, and says so, or
// starts the real ones beside a server of their own (test/support/kube-controllers.ts).
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import {
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  KubeConfig,
  type User,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { freePort, startProcess, stopProcess, waitReady, type Started } from './local-servers.ts';
import { createTempDir } from './temp-dir.ts';

/** What a test needs to reach the API server; plain data, so global setup can hand it over. */
export interface KubeApiServerInfo {
  /** e.g. https://127.0.0.1:43125 */
  server: string;
  /** The CA that signed the server's certificate (PEM). */
  caPem: string;
  /** A client certificate in group system:masters: the cluster admin, for arranging a test. */
  admin: { certPem: string; keyPem: string };
  /** The `iss` of the service-account tokens the server issues. */
  serviceAccountIssuer: string;
}

export interface RunningKubeApiServer extends KubeApiServerInfo {
  stop(): Promise<void>;
}

const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';
const ATTEMPTS = 3;

const run = promisify(execFile);

interface Certificates {
  caPem: string;
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  adminCertPem: string;
  adminKeyPem: string;
  serviceAccountKeyFile: string;
  serviceAccountPublicFile: string;
}

/** Signs a P-256 key pair with the test CA (openssl: node:crypto writes no certificates). */
async function issueCertificate(
  dir: string,
  name: string,
  subject: string,
  extensions: string,
): Promise<void> {
  const file = (suffix: string): string => join(dir, `${name}.${suffix}`);
  await writeFile(file('ext'), extensions);
  await run('openssl', [
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    file('key'),
    '-out',
    file('csr'),
    '-subj',
    subject,
  ]);
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    file('csr'),
    '-CA',
    join(dir, 'ca.crt'),
    '-CAkey',
    join(dir, 'ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    file('crt'),
    '-extfile',
    file('ext'),
  ]);
}

async function generateCertificates(dir: string): Promise<Certificates> {
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    join(dir, 'ca.key'),
    '-out',
    join(dir, 'ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=keyroll-test-kubernetes-ca',
  ]);
  await issueCertificate(
    dir,
    'server',
    '/CN=kube-apiserver',
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n',
  );
  // Group system:masters: the API server grants it everything, before RBAC is consulted.
  await issueCertificate(
    dir,
    'admin',
    '/O=system:masters/CN=keyroll-test-admin',
    'extendedKeyUsage=clientAuth\n',
  );
  const serviceAccountKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
  await writeFile(join(dir, 'sa.key'), serviceAccountKey.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  await writeFile(join(dir, 'sa.pub'), serviceAccountKey.publicKey.export({ type: 'spki', format: 'pem' }));
  return {
    caPem: await readFile(join(dir, 'ca.crt'), 'utf8'),
    caFile: join(dir, 'ca.crt'),
    serverCertFile: join(dir, 'server.crt'),
    serverKeyFile: join(dir, 'server.key'),
    adminCertPem: await readFile(join(dir, 'admin.crt'), 'utf8'),
    adminKeyPem: await readFile(join(dir, 'admin.key'), 'utf8'),
    serviceAccountKeyFile: join(dir, 'sa.key'),
    serviceAccountPublicFile: join(dir, 'sa.pub'),
  };
}

/** Starts a process on fresh free ports, trying again when a port was taken meanwhile. */
async function startWithRetry(
  name: string,
  launch: () => Promise<{ started: Started; isReady: () => Promise<boolean> }>,
): Promise<Started> {
  let lastError: unknown;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const { started, isReady } = await launch();
    try {
      await waitReady(started, name, isReady);
      return started;
    } catch (error) {
      lastError = error;
      await stopProcess(started);
    }
  }
  throw lastError instanceof Error ? lastError : new Error(`${name} did not start`);
}

async function startEtcd(binDir: string, dataDir: string): Promise<{ started: Started; url: string }> {
  let url = '';
  const started = await startWithRetry('etcd', async () => {
    const [clientPort, peerPort] = [await freePort(), await freePort()];
    url = `http://127.0.0.1:${String(clientPort)}`;
    const peer = `http://127.0.0.1:${String(peerPort)}`;
    const child = startProcess(resolve(binDir, 'etcd'), [
      '--name=keyroll-test',
      `--data-dir=${join(dataDir, `etcd-${String(clientPort)}`)}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=keyroll-test=${peer}`,
      // A test cluster: losing it in a power cut costs nothing, and fsync costs every write.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ]);
    const health = `${url}/health`;
    return {
      started: child,
      isReady: async () => {
        const response = await fetch(health, { signal: AbortSignal.timeout(2_000) });
        return response.ok && ((await response.json()) as { health?: string }).health === 'true';
      },
    };
  });
  return { started, url };
}

async function startApiServer(
  binDir: string,
  dir: string,
  etcdUrl: string,
  certs: Certificates,
): Promise<{ started: Started; server: string }> {
  const agent = new Agent({ connect: { ca: certs.caPem } });
  let server = '';
  try {
    const started = await startWithRetry('kube-apiserver', async () => {
      const port = await freePort();
      server = `https://127.0.0.1:${String(port)}`;
      const child = startProcess(resolve(binDir, 'kube-apiserver'), [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${String(port)}`,
        `--cert-dir=${dir}`,
        `--tls-cert-file=${certs.serverCertFile}`,
        `--tls-private-key-file=${certs.serverKeyFile}`,
        `--client-ca-file=${certs.caFile}`,
        '--authorization-mode=RBAC',
        `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
        `--service-account-key-file=${certs.serviceAccountPublicFile}`,
        `--service-account-signing-key-file=${certs.serviceAccountKeyFile}`,
        '--service-cluster-ip-range=10.96.0.0/24',
        // Nothing here runs an endpoint for the `kubernetes` Service, and the loopback address
        // must not be written as one.
        '--endpoint-reconciler-type=none',
        '--profiling=false',
      ]);
      return {
        started: child,
        isReady: async () => {
          const response = await request(`${server}/readyz`, {
            dispatcher: agent,
            headersTimeout: 2_000,
            bodyTimeout: 2_000,
          });
          await response.body.dump();
          return response.statusCode === 200;
        },
      };
    });
    return { started, server };
  } finally {
    await agent.close();
  }
}

/**
 * Starts etcd and kube-apiserver from `binDir` (the directory scripts/test-kube.sh prints),
 * in a temporary directory that stop() removes.
 */
export async function startKubeApiServer(binDir: string): Promise<RunningKubeApiServer> {
  const temp = await createTempDir('keyroll-kube-');
  const dir = temp.path;
  const running: Started[] = [];
  const stop = async (): Promise<void> => {
    // The API server first: stopping etcd under it makes it retry and log, and slows the stop.
    for (const started of [...running].reverse()) await stopProcess(started);
    await temp.remove();
  };
  try {
    const certs = await generateCertificates(dir);
    const etcd = await startEtcd(binDir, dir);
    running.push(etcd.started);
    const api = await startApiServer(binDir, dir, etcd.url, certs);
    running.push(api.started);
    return {
      server: api.server,
      caPem: certs.caPem,
      admin: { certPem: certs.adminCertPem, keyPem: certs.adminKeyPem },
      serviceAccountIssuer: SERVICE_ACCOUNT_ISSUER,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

function kubeConfigAs(info: KubeApiServerInfo, user: User): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [
      {
        name: 'keyroll-test',
        server: info.server,
        caData: Buffer.from(info.caPem).toString('base64'),
        skipTLSVerify: false,
      },
    ],
    users: [user],
    contexts: [{ name: 'keyroll-test', cluster: 'keyroll-test', user: user.name }],
    currentContext: 'keyroll-test',
  });
  return config;
}

/** A client config acting as the cluster admin (group system:masters), for arranging a test. */
export function adminKubeConfig(info: KubeApiServerInfo): KubeConfig {
  return kubeConfigAs(info, {
    name: 'keyroll-test-admin',
    certData: Buffer.from(info.admin.certPem).toString('base64'),
    keyData: Buffer.from(info.admin.keyPem).toString('base64'),
  });
}

/** Runs `create`, taking 409 Conflict (it exists already) as done. */
export async function createUnlessExists(create: () => Promise<unknown>): Promise<void> {
  try {
    await create();
  } catch (error) {
    if (!(error instanceof ApiException && error.code === 409)) throw error;
  }
}

/** The status the API server refused `call` with (-1: no API answer), or undefined when it was allowed. */
export async function refusalStatus(call: () => Promise<unknown>): Promise<number | undefined> {
  try {
    await call();
    return undefined;
  } catch (error) {
    return error instanceof ApiException ? error.code : -1;
  }
}

export interface ServiceAccountCredentials {
  /** A client config acting as the service account (bearer token, the server's CA). */
  kubeConfig: KubeConfig;
  /** The token the TokenRequest API issued, as a pod's projected token would hold it. */
  token: string;
}

/**
 * Creates the namespace and the service account in it when missing, and asks the TokenRequest
 * API for a token of that account: what keyroll's pod would hold as
 * /var/run/secrets/kubernetes.io/serviceaccount/token. The account can do nothing until a test
 * binds it to a Role.
 */
export async function serviceAccountCredentials(
  info: KubeApiServerInfo,
  namespace: string,
  name: string,
  expirationSeconds = 3600,
): Promise<ServiceAccountCredentials> {
  const core = adminKubeConfig(info).makeApiClient(CoreV1Api);
  await createUnlessExists(() => core.createNamespace({ body: { metadata: { name: namespace } } }));
  await createUnlessExists(() =>
    core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }),
  );
  const issued = await core.createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [], expirationSeconds } },
  });
  const token = issued.status?.token;
  if (token === undefined || token === '')
    throw new Error(`the TokenRequest API issued no token for ${namespace}/${name}`);
  return {
    kubeConfig: kubeConfigAs(info, { name: `system:serviceaccount:${namespace}:${name}`, token }),
    token,
  };
}

/**
 * Creates a CustomResourceDefinition and waits until the API server serves it (condition
 * Established), since objects of its kind are refused (404) until then.
 */
export async function installCustomResourceDefinition(
  info: KubeApiServerInfo,
  definition: V1CustomResourceDefinition,
): Promise<void> {
  const extensions = adminKubeConfig(info).makeApiClient(ApiextensionsV1Api);
  const name = definition.metadata?.name;
  if (name === undefined) throw new Error('the CustomResourceDefinition has no metadata.name');
  await createUnlessExists(() => extensions.createCustomResourceDefinition({ body: definition }));
  for (let attempt = 0; attempt < 300; attempt++) {
    const current = await extensions.readCustomResourceDefinition({ name });
    if (
      current.status?.conditions?.some(
        (condition) => condition.type === 'Established' && condition.status === 'True',
      ) === true
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the CustomResourceDefinition ${name} was not established within 30 s`);
}
