/**
 * The one way this project reaches a cluster with `@platformatic/kafka`: brokers, TLS, SASL
 * (PLAIN, SCRAM) or MSK IAM from the Kafka settings, mapped onto the client's public
 * `BaseOptions`. Every platformatic client of the service (the host's consumers, the admin,
 * topic ids, peek) connects through it, as every kafkajs one does through ../kafkajs/connection.ts.
 */
import type { BaseOptions } from '@platformatic/kafka';
import { mskIamTokenProvider } from '../msk-iam.js';
import type { KafkaSettings } from '../settings.js';

type SaslOptions = NonNullable<BaseOptions['sasl']>;

function saslOptions(sasl: NonNullable<KafkaSettings['sasl']>): SaslOptions {
  if (sasl.mechanism === 'aws-msk-iam') {
    // The client asks for a token at every authentication (a new connection, a re-authentication): each is signed afresh.
    const token = mskIamTokenProvider(sasl.region);
    return { mechanism: 'OAUTHBEARER', token: async () => (await token()).value };
  }
  const mechanism = ({ plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' } as const)[sasl.mechanism];
  return { mechanism, username: sasl.username, password: sasl.password };
}

/** The connection part of a platformatic client's options: who we are, where, and how we authenticate. */
export function platformaticConnection(
  settings: KafkaSettings,
  clientId: string = settings.clientId,
): Pick<BaseOptions, 'clientId' | 'bootstrapBrokers' | 'tls' | 'tlsServerName' | 'sasl'> {
  return {
    clientId,
    bootstrapBrokers: [...settings.brokers],
    ...(settings.ssl
      ? {
          tls: { rejectUnauthorized: settings.ssl.rejectUnauthorized, ...(settings.ssl.ca ? { ca: settings.ssl.ca } : {}) },
          // The broker's host name is checked against its certificate (and sent as SNI), as kafkajs does.
          tlsServerName: true,
        }
      : {}),
    ...(settings.sasl ? { sasl: saslOptions(settings.sasl) } : {}),
  };
}
