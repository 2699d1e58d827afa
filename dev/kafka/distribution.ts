/**
 * Apache Kafka's jars for the development broker, fetched from Maven Central with Maven into a
 * cache folder and reused from there. No tarball, no shell scripts: the broker runs as
 * `java -cp <libs>/* kafka.Kafka`, so Java 17 and Maven are all a machine needs.
 */
import { spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, open, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { isAlive } from './process.js';

/** The Kafka release the development broker runs: the newest 3.9.x that Maven Central serves. */
const KAFKA_VERSION = '3.9.2';

/** The repository's root folder, which the default cache and data folders are relative to. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const SCALA_VERSION = '2.13';
// Kafka 3.9 logs through SLF4J 1.7 and ships no binding; without one it would log nothing.
const SLF4J_SIMPLE_VERSION = '1.7.36';
// Pinned, so the result does not depend on the Maven version's default plugin (2.8 in Maven 3.8).
const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1';
const COMPLETE_MARKER = '.complete';
const MAVEN_TIMEOUT_MS = 15 * 60_000;
const LOCK_POLL_MS = 500;

/** Kafka's jars, ready to be put on a class path. */
export interface KafkaDistribution {
  readonly version: string;
  /** Folder holding every jar the broker needs. */
  readonly libs: string;
  /** `<libs>/*`, the JVM's own wildcard syntax. */
  readonly classpath: string;
  /** True when this call downloaded the jars; false when the cache already held them. */
  readonly fetched: boolean;
}

/** Where and which Kafka to resolve. */
export interface ResolveOptions {
  /** Defaults to {@link KAFKA_VERSION}. */
  readonly version?: string;
  /** Defaults to {@link kafkaCacheDir}(). */
  readonly cacheDir?: string;
  /** Progress lines (a cold resolve takes a while). */
  readonly log?: (line: string) => void;
}

/** The cache root: `KAFKA_CACHE_DIR`, else `.cache/kafka` in the repository. */
function kafkaCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.KAFKA_CACHE_DIR || join(REPO_ROOT, '.cache', 'kafka');
}

/**
 * Returns Kafka's jars from `<cacheDir>/<version>/libs`, fetching them with Maven first when
 * that folder is missing.
 *
 * Safe when several processes resolve at once: each one downloads into its own temporary folder,
 * writes the completion marker, and only then renames it to `libs` (atomic on one file system),
 * so a `libs` folder is always complete. A lock file additionally makes the others wait instead of
 * downloading the same jars again; it is only an optimisation, correctness rests on the rename.
 */
export async function resolveKafka(options: ResolveOptions = {}): Promise<KafkaDistribution> {
  const version = options.version ?? KAFKA_VERSION;
  const versionDir = join(options.cacheDir ?? kafkaCacheDir(), version);
  const libs = join(versionDir, 'libs');
  const distribution = (fetched: boolean): KafkaDistribution => ({
    version,
    libs,
    classpath: join(libs, '*'),
    fetched,
  });
  if (await exists(join(libs, COMPLETE_MARKER))) return distribution(false);

  await mkdir(versionDir, { recursive: true });
  const release = await acquireLock(join(versionDir, '.lock'), options.log);
  try {
    if (await exists(join(libs, COMPLETE_MARKER))) return distribution(false);
    options.log?.(`Fetching Apache Kafka ${version} with Maven into ${libs} (first run only)`);
    const work = await mkdtemp(join(versionDir, 'resolving-'));
    try {
      const output = join(work, 'libs');
      await writeFile(join(work, 'pom.xml'), pom(version));
      await runMaven(work, output);
      const jars = (await readdir(output)).filter((name) => name.endsWith('.jar'));
      if (!jars.some((name) => name.startsWith(`kafka_${SCALA_VERSION}-${version}`))) {
        throw new Error(`Maven finished but ${output} holds no kafka_${SCALA_VERSION}-${version} jar`);
      }
      await writeFile(join(output, COMPLETE_MARKER), `${JSON.stringify({ version, jars: jars.length })}\n`);
      // Only a crashed pre-marker layout or a hand-made folder can sit here; it is never complete.
      await rm(libs, { recursive: true, force: true });
      try {
        await rename(output, libs);
      } catch (error) {
        // Another resolver without the lock (a stale-lock race) won the rename: its copy is complete too.
        if (!(await exists(join(libs, COMPLETE_MARKER)))) throw error;
      }
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    return distribution(true);
  } finally {
    await release();
  }
}

function pom(version: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.storage-consumer</groupId>
  <artifactId>dev-kafka-broker</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_${SCALA_VERSION}</artifactId>
      <version>${version}</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>${SLF4J_SIMPLE_VERSION}</version>
    </dependency>
  </dependencies>
</project>
`;
}

async function runMaven(projectDir: string, outputDir: string): Promise<void> {
  const args = [
    '-q',
    '-B',
    '-f',
    join(projectDir, 'pom.xml'),
    `${DEPENDENCY_PLUGIN}:copy-dependencies`,
    `-DoutputDirectory=${outputDir}`,
    '-DincludeScope=runtime',
  ];
  const child = spawn('mvn', args, { cwd: projectDir, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-8000);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const timer = setTimeout(() => child.kill('SIGKILL'), MAVEN_TIMEOUT_MS);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    });
    if (code !== 0) {
      throw new Error(`mvn ${args.join(' ')} exited with ${String(code)}:\n${output.trim()}`);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error('Maven (mvn) is not on the PATH; it is needed once, to fetch Apache Kafka', { cause: error });
    }
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Takes `lockPath` (created exclusively, holding our pid); a lock whose owner died is taken over. */
async function acquireLock(lockPath: string, log?: (line: string) => void): Promise<() => Promise<void>> {
  let announced = false;
  for (;;) {
    try {
      const handle = await open(lockPath, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return () => rm(lockPath, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = Number.parseInt(await readFile(lockPath, 'utf8').catch(() => ''), 10);
    const stale = Number.isInteger(owner)
      ? !(await isAlive(owner))
      : Date.now() - ((await stat(lockPath).catch(() => undefined))?.mtimeMs ?? 0) > LOCK_POLL_MS * 10;
    if (stale) {
      await rm(lockPath, { force: true });
      continue;
    }
    if (!announced) {
      log?.(`Waiting for process ${String(owner)}, which is fetching Kafka already`);
      announced = true;
    }
    await sleep(LOCK_POLL_MS);
  }
}

/** Whether `path` exists. */
export async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
