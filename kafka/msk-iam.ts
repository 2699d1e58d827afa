/**
 * MSK IAM access control for kafkajs: SASL/OAUTHBEARER whose token is a SigV4-presigned
 * `kafka-cluster:Connect` request, made by AWS's own signer library
 * (`aws-msk-iam-sasl-signer-js`), as the Java client's `aws-msk-iam-auth` does.
 */
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import { generateAuthTokenFromCredentialsProvider } from 'aws-msk-iam-sasl-signer-js';
import type { OauthbearerProviderResponse } from 'kafkajs';

/** AWS credentials as a provider returns them (the shape of the SDK's `AwsCredentialIdentity`). */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  readonly expiration?: Date;
}

/** Where credentials come from; default: the AWS SDK's default provider chain. */
export type AwsCredentialSource = () => Promise<AwsCredentials>;

/**
 * kafkajs' `oauthBearerProvider` for MSK IAM. kafkajs calls it for every connection it
 * authenticates (and re-authenticates before the session lifetime the broker grants runs out),
 * so each call signs a fresh token; the credential chain caches and refreshes the credentials
 * themselves (environment, profile, web identity, ECS task role, EC2 instance role ...).
 *
 * @param region the cluster's region: the token is signed for `kafka.<region>.amazonaws.com`.
 * @param credentials for tests; default `fromNodeProviderChain()`, created once.
 */
export function mskIamTokenProvider(
  region: string,
  credentials: AwsCredentialSource = fromNodeProviderChain({ clientConfig: { region } }),
): () => Promise<OauthbearerProviderResponse> {
  return async () => {
    const { token } = await generateAuthTokenFromCredentialsProvider({
      region,
      awsCredentialsProvider: () => credentials().then((identity) => ({ ...identity })),
    });
    return { value: token };
  };
}
