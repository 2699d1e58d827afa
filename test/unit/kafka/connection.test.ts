import { createHash, createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import type * as CredentialProviders from '@aws-sdk/credential-providers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { memberClientId, plaintextKafka } from '../../../kafka/connection.js';
import { kafkaConnection } from '../../../kafka/kafkajs/connection.js';
import { platformaticConnection } from '../../../kafka/platformatic/connection.js';
import { mskIamTokenProvider } from '../../../kafka/msk-iam.js';
import { loadHostSettings } from '../../../config/host-settings.js';

const brokers = 'b-1.cluster.kafka.eu-central-1.amazonaws.com:9098';
describe('the one Kafka connection mapping', () => {
  it.each([
    ['plain', 'plain'],
    ['scram-sha-256', 'scram-sha-256'],
    ['SCRAM-SHA-512', 'scram-sha-512'],
  ])('KAFKA_SASL_MECHANISM=%s gives kafkajs %s with the user and password', (variable, mechanism) => {
    // Act
    const connection = kafkaConnection(
      loadHostSettings({
        KAFKA_BROKERS: 'b1:9096',
        KAFKA_SSL: 'true',
        KAFKA_SASL_MECHANISM: variable,
        KAFKA_SASL_USERNAME: 'u',
        KAFKA_SASL_PASSWORD: 'p',
      }).kafka,
    );

    // Assess
    expect(connection).toEqual({
      clientId: 'storage-consumer',
      brokers: ['b1:9096'],
      ssl: { rejectUnauthorized: true },
      sasl: { mechanism, username: 'u', password: 'p' },
    });
  });

  it('KAFKA_SASL_MECHANISM=aws-msk-iam gives OAUTHBEARER with a token provider, TLS on by itself', () => {
    // Act
    const settings = loadHostSettings({ KAFKA_BROKERS: brokers, KAFKA_SASL_MECHANISM: 'aws-msk-iam', KAFKA_AWS_REGION: 'eu-central-1' });
    const connection = kafkaConnection(settings.kafka);

    // Assess
    expect(settings.kafka.sasl).toEqual({ mechanism: 'aws-msk-iam', region: 'eu-central-1' });
    expect(connection.ssl).toEqual({ rejectUnauthorized: true });
    expect(connection.sasl).toEqual({ mechanism: 'oauthbearer', oauthBearerProvider: expect.any(Function) });
  });

  it('takes the MSK IAM region from AWS_REGION when KAFKA_AWS_REGION is unset', () => {
    // Act
    const settings = loadHostSettings({
      KAFKA_BROKERS: brokers,
      KAFKA_SASL_MECHANISM: 'aws-msk-iam',
      AWS_REGION: 'us-gov-west-1',
      AWS_DEFAULT_REGION: 'eu-west-1',
    });

    // Assess
    expect(settings.kafka.sasl).toEqual({ mechanism: 'aws-msk-iam', region: 'us-gov-west-1' });
  });

  it('no mechanism and no TLS: plaintext, no SASL; a broker list maps the same way', () => {
    // Act
    const fromEnvironment = kafkaConnection(loadHostSettings({ KAFKA_BROKERS: '127.0.0.1:9092' }).kafka);
    const fromList = kafkaConnection(plaintextKafka(['127.0.0.1:9092']));

    // Assess
    expect(fromEnvironment).toEqual({ clientId: 'storage-consumer', brokers: ['127.0.0.1:9092'], ssl: false });
    expect(fromList).toEqual(fromEnvironment);
  });
});

describe('the platformatic connection mapping', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it.each([
    ['plain', 'PLAIN'],
    ['scram-sha-256', 'SCRAM-SHA-256'],
    ['SCRAM-SHA-512', 'SCRAM-SHA-512'],
  ])('KAFKA_SASL_MECHANISM=%s gives platformatic %s with the user and password, over TLS checking the host name', (variable, mechanism) => {
    // Act
    const connection = platformaticConnection(
      loadHostSettings({
        KAFKA_BROKERS: 'b1:9096,b2:9096',
        KAFKA_SSL: 'true',
        KAFKA_SASL_MECHANISM: variable,
        KAFKA_SASL_USERNAME: 'u',
        KAFKA_SASL_PASSWORD: 'p',
      }).kafka,
    );

    // Assess
    expect(connection).toEqual({
      clientId: 'storage-consumer',
      bootstrapBrokers: ['b1:9096', 'b2:9096'],
      tls: { rejectUnauthorized: true },
      tlsServerName: true,
      sasl: { mechanism, username: 'u', password: 'p' },
    });
  });

  it('KAFKA_SSL_CA_FILE and KAFKA_SSL_REJECT_UNAUTHORIZED reach the TLS options; a client id of its own replaces the setting', () => {
    // Prepare
    const folder = mkdtempSync(join(tmpdir(), 'sc-ca-'));
    const caFile = join(folder, 'ca.pem');
    const ca = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    writeFileSync(caFile, ca);

    // Act
    const settings = loadHostSettings({ KAFKA_BROKERS: 'b1:9093', KAFKA_SSL_CA_FILE: caFile, KAFKA_SSL_REJECT_UNAUTHORIZED: 'false' });
    const connection = platformaticConnection(settings.kafka, 'storage-consumer-admin');
    rmSync(folder, { recursive: true });

    // Assess
    expect(connection).toEqual({
      clientId: 'storage-consumer-admin',
      bootstrapBrokers: ['b1:9093'],
      tls: { rejectUnauthorized: false, ca },
      tlsServerName: true,
    });
  });

  it('KAFKA_SASL_MECHANISM=aws-msk-iam gives OAUTHBEARER whose token provider returns the signed token string', async () => {
    // Prepare: the default chain's first source, the environment
    vi.stubEnv('AWS_PROFILE', '');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIDPLATFORMATIC');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'secret-from-env');
    vi.stubEnv('AWS_SESSION_TOKEN', 'token-from-env');
    const settings = loadHostSettings({ KAFKA_BROKERS: brokers, KAFKA_SASL_MECHANISM: 'aws-msk-iam', KAFKA_AWS_REGION: 'eu-central-1' });

    // Act
    const connection = platformaticConnection(settings.kafka);
    const sasl = connection.sasl;
    const token = sasl && 'token' in sasl && typeof sasl.token === 'function' ? await sasl.token() : undefined;

    // Assess
    expect(connection.tls).toEqual({ rejectUnauthorized: true });
    expect(connection.tlsServerName).toBe(true);
    expect(sasl).toEqual({ mechanism: 'OAUTHBEARER', token: expect.any(Function) });
    expect(typeof token).toBe('string');
    const url = new URL(Buffer.from(String(token), 'base64url').toString('utf8'));
    expect(url.host).toBe('kafka.eu-central-1.amazonaws.com');
    expect(url.searchParams.get('Action')).toBe('kafka-cluster:Connect');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/^AKIDPLATFORMATIC\/\d{8}\/eu-central-1\/kafka-cluster\/aws4_request$/);
    expect(url.searchParams.get('X-Amz-Security-Token')).toBe('token-from-env');
  });

  it('no mechanism and no TLS: plaintext, no TLS options, no SASL', () => {
    // Act
    const connection = platformaticConnection(plaintextKafka(['127.0.0.1:9092']));

    // Assess
    expect(connection).toEqual({ clientId: 'storage-consumer', bootstrapBrokers: ['127.0.0.1:9092'] });
  });
});

/** HMAC-SHA256, as SigV4 chains it. */
const hmac = (key: Buffer | string, text: string) => createHmac('sha256', key).update(text, 'utf8').digest();
/** RFC 3986 encoding, as SigV4's canonical query string wants it. */
const rfc3986 = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

describe('the MSK IAM token provider (stubbed credential source)', () => {
  const credentials = {
    accessKeyId: 'AKIDEXAMPLE',
    secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
    sessionToken: 'session/token+1',
  };

  it('returns a base64url presigned kafka-cluster:Connect URL signed for the region, verifiable with the secret key', async () => {
    // Prepare
    let calls = 0;
    const provider = mskIamTokenProvider('eu-central-1', async () => {
      calls += 1;
      return credentials;
    });

    // Act
    const { value } = await provider();

    // Assess: well-formed
    expect(value).toMatch(/^[A-Za-z0-9_-]+$/);
    const url = new URL(Buffer.from(value, 'base64url').toString('utf8'));
    expect(url.protocol).toBe('https:');
    expect(url.host).toBe('kafka.eu-central-1.amazonaws.com');
    expect(url.pathname).toBe('/');
    const query = url.searchParams;
    expect(query.get('Action')).toBe('kafka-cluster:Connect');
    expect(query.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(query.get('X-Amz-SignedHeaders')).toBe('host');
    expect(query.get('X-Amz-Security-Token')).toBe(credentials.sessionToken);
    expect(query.get('X-Amz-Expires')).toBe('900');
    const amzDate = query.get('X-Amz-Date') ?? '';
    expect(amzDate).toMatch(/^\d{8}T\d{6}Z$/);
    const day = amzDate.slice(0, 8);
    // Signed for the right region and service, with these credentials.
    expect(query.get('X-Amz-Credential')).toBe(`AKIDEXAMPLE/${day}/eu-central-1/kafka-cluster/aws4_request`);
    expect(calls).toBe(1);

    // Assess: the signature is SigV4's over exactly this request (recomputed independently).
    const signed = [...query.entries()]
      .filter(([name]) => name !== 'X-Amz-Signature' && name !== 'User-Agent')
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, text]) => `${rfc3986(name)}=${rfc3986(text)}`)
      .join('&');
    const emptyPayload = createHash('sha256').update('').digest('hex');
    const canonicalRequest = ['GET', '/', signed, `host:${url.host}`, '', 'host', emptyPayload].join('\n');
    const scope = `${day}/eu-central-1/kafka-cluster/aws4_request`;
    const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, createHash('sha256').update(canonicalRequest).digest('hex')].join('\n');
    const key = ['eu-central-1', 'kafka-cluster', 'aws4_request'].reduce(
      (k, part) => hmac(k, part),
      hmac(`AWS4${credentials.secretAccessKey}`, day),
    );
    expect(query.get('X-Amz-Signature')).toBe(createHmac('sha256', key).update(stringToSign).digest('hex'));
  });

  it('a token for another region carries that region in host and scope', async () => {
    // Act
    const { value } = await mskIamTokenProvider('ap-southeast-2', async () => credentials)();

    // Assess
    const url = new URL(Buffer.from(value, 'base64url').toString('utf8'));
    expect(url.host).toBe('kafka.ap-southeast-2.amazonaws.com');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/\/ap-southeast-2\/kafka-cluster\/aws4_request$/);
  });

  it('a credential source that fails makes the provider reject (kafkajs reports the failed authentication)', async () => {
    // Prepare
    const provider = mskIamTokenProvider('eu-central-1', async () => {
      throw new Error('Could not load credentials from any providers');
    });

    // Act / Assess
    await expect(provider()).rejects.toThrow(/Could not load credentials/);
  });
});

// The real chain, counted: the provider must make one for all its calls.
vi.mock('@aws-sdk/credential-providers', async (importOriginal) => {
  const real = await importOriginal<typeof CredentialProviders>();
  return { ...real, fromNodeProviderChain: vi.fn(real.fromNodeProviderChain) };
});

describe('the MSK IAM token provider (default credential chain)', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('makes one chain at the first call, for concurrent calls too, and signs with what it finds (here the environment)', async () => {
    // Prepare: the chain's first source, set only after the provider was made
    vi.stubEnv('AWS_PROFILE', '');
    const provider = mskIamTokenProvider('eu-west-1');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIDFROMENV');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'secret-from-env');
    vi.stubEnv('AWS_SESSION_TOKEN', 'token-from-env');

    // Act: two connections authenticated at once, then a third
    const calls = vi.mocked(fromNodeProviderChain).mock.calls.length;
    const [first, second] = await Promise.all([provider(), provider()]);
    const third = await provider();

    // Assess
    expect(vi.mocked(fromNodeProviderChain).mock.calls.length - calls).toBe(1);
    for (const { value } of [first, second, third]) {
      const query = new URL(Buffer.from(value, 'base64url').toString('utf8')).searchParams;
      expect(query.get('X-Amz-Credential')).toMatch(/^AKIDFROMENV\/\d{8}\/eu-west-1\/kafka-cluster\/aws4_request$/);
      expect(query.get('X-Amz-Security-Token')).toBe('token-from-env');
    }
  });
});

describe('the client id of a host consumer', () => {
  it('carries the machine and the process, so two members on one machine differ', () => {
    expect(memberClientId('storage-consumer', 'host-1', 4242)).toBe('storage-consumer-host-1-4242');
    expect(memberClientId('storage-consumer')).not.toBe(memberClientId('storage-consumer', undefined, process.pid + 1));
    expect(memberClientId('storage-consumer')).toMatch(new RegExp(`^storage-consumer-.+-${process.pid}$`));
  });
});
