/**
 * The development broker from the command line:
 *
 *   tsx dev/kafka/cli.ts start [--port 9092] [--controller-port 9093] [--data-dir .data/kafka]
 *
 * The port defaults to `KAFKA_PORT` (as for `npm start`), else 9092; the controller port to
 * `KAFKA_CONTROLLER_PORT`, else the port + 1, so a second broker started with another
 * `KAFKA_PORT` collides with neither port.
 *   tsx dev/kafka/cli.ts stop [--data-dir .data/kafka]
 *   tsx dev/kafka/cli.ts resolve
 *
 * `start` returns once the broker accepts clients and leaves it running in the background;
 * `stop` finds it through the pid file in the data folder.
 */
import { relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BrokerAlreadyRunningError, DEFAULT_DATA_DIR, brokersFromEnv, resolveKafka, startBroker, stopBroker } from './broker.js';

const USAGE = 'usage: cli.ts start [--port $KAFKA_PORT|9092] [--controller-port PORT+1] [--data-dir DIR] | stop [--data-dir DIR] | resolve';

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      port: { type: 'string', default: process.env.KAFKA_PORT || '9092' },
      'controller-port': { type: 'string' },
      'data-dir': { type: 'string', default: DEFAULT_DATA_DIR },
    },
  });
  const log = (line: string): void => console.log(line);
  const dataDir = resolve(values['data-dir']);
  const shown = display(dataDir);

  switch (positionals[0]) {
    case 'resolve': {
      const began = Date.now();
      const distribution = await resolveKafka({ log });
      const took = ((Date.now() - began) / 1000).toFixed(1);
      log(`Kafka ${distribution.version}: ${distribution.libs} (${distribution.fetched ? `fetched in ${took} s` : 'cached'})`);
      return 0;
    }
    case 'start': {
      const fromEnv = brokersFromEnv();
      if (fromEnv !== undefined) {
        log(`KAFKA_BROKERS is set (${fromEnv.join(',')}): starting no broker. Unset it to run a local one.`);
        return 0;
      }
      try {
        const brokerPort = port(values.port, values.port === process.env.KAFKA_PORT ? 'KAFKA_PORT' : '--port');
        const broker = await startBroker({
          port: brokerPort,
          controllerPort:
            values['controller-port'] !== undefined
              ? port(values['controller-port'], '--controller-port')
              : process.env.KAFKA_CONTROLLER_PORT
                ? port(process.env.KAFKA_CONTROLLER_PORT, 'KAFKA_CONTROLLER_PORT')
                : brokerPort + 1,
          dataDir,
          detached: true,
          log,
        });
        const stop = dataDir === DEFAULT_DATA_DIR ? 'npm run kafka:stop' : `npm run kafka:stop -- --data-dir ${shown}`;
        log(`KAFKA_BROKERS=${broker.brokers.join(',')}  (log: ${display(broker.logFile)}; stop: ${stop})`);
        return 0;
      } catch (error) {
        if (error instanceof BrokerAlreadyRunningError) {
          log(`Already running: ${error.message}`);
          return 0;
        }
        throw error;
      }
    }
    case 'stop': {
      const pid = await stopBroker(dataDir);
      log(pid === undefined ? `No Kafka broker runs on ${shown}` : `Stopped the Kafka broker (pid ${pid}) on ${shown}`);
      return 0;
    }
    default:
      console.error(USAGE);
      return 2;
  }
}

/** A path relative to the working directory when it lies inside it, else absolute. */
function display(path: string): string {
  const fromHere = relative(process.cwd(), path);
  return fromHere === '' ? '.' : fromHere.startsWith('..') ? path : fromHere;
}

function port(value: string | undefined, flag: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > 65535) {
    throw new RangeError(`${flag} must be a port number (1-65535), got ${String(value)}`);
  }
  return parsed;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  },
);
