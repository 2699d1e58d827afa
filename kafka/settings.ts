/**
 * How to reach Kafka: the settings every Kafka client of this project is built from (the host's
 * consumers and admin, the CLI's admin and peek). config/host-settings.ts reads them from the
 * environment.
 */
import type { KafkaClientName } from './port.js';

/**
 * SASL mechanisms accepted from the environment: kafkajs' user/password ones, and `aws-msk-iam`
 * (MSK with IAM access control: OAUTHBEARER tokens signed by AWS's signer library).
 */
export const SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512', 'aws-msk-iam'] as const;
export type SaslMechanism = (typeof SASL_MECHANISMS)[number];

/** SASL with a user name and a password (PLAIN, SCRAM). */
export interface PasswordSasl {
  readonly mechanism: Exclude<SaslMechanism, 'aws-msk-iam'>;
  readonly username: string;
  readonly password: string;
}

/** MSK IAM: credentials from the default AWS provider chain, tokens signed for `region`. */
export interface AwsMskIamSasl {
  readonly mechanism: 'aws-msk-iam';
  readonly region: string;
}

/** How to reach Kafka. */
export interface KafkaSettings {
  /** The client library (a setting); `kafkajs` when absent. */
  readonly client?: KafkaClientName;
  readonly brokers: readonly string[];
  readonly clientId: string;
  /** TLS; `undefined` = plaintext. `ca` is the PEM text of `KAFKA_SSL_CA_FILE`, read at start. */
  readonly ssl: { readonly ca: string | undefined; readonly rejectUnauthorized: boolean } | undefined;
  readonly sasl: PasswordSasl | AwsMskIamSasl | undefined;
}
