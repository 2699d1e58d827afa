/**
 * A TCP endpoint that accepts every connection and never sends a byte: a Secrets Manager (or
 * any) endpoint behind a broken security group or VPC endpoint policy, as a client sees it.
 */
import { createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { vi } from 'vitest';

/** The endpoint; `start()` returns its http:// URL. */
export class SilentEndpoint {
  readonly sockets = new Set<Socket>();
  /** Connections accepted so far: the client did reach the endpoint. */
  connections = 0;
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((socket) => {
      this.connections += 1;
      this.sockets.add(socket);
      socket.on('data', () => undefined);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** Points the AWS SDK's Secrets Manager client at `url`, with static test credentials (no profile read). */
export function pointSecretsManagerAt(url: string): void {
  vi.stubEnv('AWS_ENDPOINT_URL_SECRETS_MANAGER', url);
  vi.stubEnv('AWS_REGION', 'eu-west-1');
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIDTEST');
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'test');
}
