/**
 * MSK IAM access control (both clients): SASL/OAUTHBEARER whose token is a SigV4-presigned
 * `kafka-cluster:Connect` request, made by AWS's own signer library
 * (`aws-msk-iam-sasl-signer-js`), as the Java client's `aws-msk-iam-auth` does.
 */

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
 * The signer and the credential chain are loaded at the first call: a process that does not
 * use MSK IAM never loads them (about 65 ms of CPU and 5 MB at every start otherwise).
 *
 * @param region the cluster's region: the token is signed for `kafka.<region>.amazonaws.com`.
 * @param credentials for tests; default `fromNodeProviderChain()`, created once, at the first call.
 */
export function mskIamTokenProvider(region: string, credentials?: AwsCredentialSource): () => Promise<{ value: string }> {
  // One chain for every call, also for connections kafkajs authenticates at the same time.
  let source: Promise<AwsCredentialSource> | undefined;
  return async () => {
    source ??= credentials
      ? Promise.resolve(credentials)
      : import('@aws-sdk/credential-providers').then(({ fromNodeProviderChain }) => fromNodeProviderChain({ clientConfig: { region } }));
    const [{ generateAuthTokenFromCredentialsProvider }, chain] = await Promise.all([import('aws-msk-iam-sasl-signer-js'), source]);
    const { token } = await generateAuthTokenFromCredentialsProvider({
      region,
      awsCredentialsProvider: () => chain().then((identity) => ({ ...identity })),
    });
    return { value: token };
  };
}
