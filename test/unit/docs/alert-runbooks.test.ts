/**
 * The `runbook:` link of every alert rule of the host (deploy/prometheus/storage-consumer.rules.yml)
 * lands on the heading of docs/operations.md that says what to do about that alert: one heading
 * per alert, not the rules' table. An on-call engineer follows the link from the page.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const read = (path: string) => readFileSync(`${ROOT}${path}`, 'utf8');

/** The anchor GitHub gives a Markdown heading: lower case, punctuation but `-` and `_` dropped, spaces as dashes. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{Letter}\p{Number}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of every heading of a Markdown document (headings inside code fences are not headings). */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (heading?.[1] !== undefined) anchors.add(anchorOf(heading[1]));
  }
  return anchors;
}

/** Every `alert:` of a rules file with its `runbook:` annotation (undefined when it has none). */
function alertRunbooks(rules: string): Map<string, string | undefined> {
  const found = new Map<string, string | undefined>();
  let alert: string | undefined;
  for (const line of rules.split('\n')) {
    const name = /^\s*- alert:\s*(\S+)/.exec(line)?.[1];
    if (name !== undefined) {
      alert = name;
      found.set(name, undefined);
    }
    const runbook = /^\s*runbook:\s*'?([^'\s]+)'?/.exec(line)?.[1];
    if (runbook !== undefined && alert !== undefined) found.set(alert, runbook);
  }
  return found;
}

describe('alert rules and their runbooks', () => {
  it('GitHub anchors as the links expect them', () => {
    expect(anchorOf('A row the database refuses (`rejected_by_database`)')).toBe('a-row-the-database-refuses-rejected_by_database');
    expect(anchorOf('StorageConsumerPipelineDown')).toBe('storageconsumerpipelinedown');
    expect(anchorOf('A forgotten pause')).toBe('a-forgotten-pause');
  });

  it("every alert rule's runbook link names a heading of docs/operations.md, one heading per alert", () => {
    const runbooks = alertRunbooks(read('deploy/prometheus/storage-consumer.rules.yml'));
    const anchors = headingAnchors(read('docs/operations.md'));
    expect(runbooks.size, 'alert rules found').toBeGreaterThan(5);
    const wrong = [...runbooks]
      .filter(([, link]) => link === undefined || !link.startsWith('docs/operations.md#') || !anchors.has(link.split('#')[1] ?? ''))
      .map(([alert, link]) => `${alert}: ${link ?? 'no runbook annotation'}`);
    expect(wrong, 'runbook links that land on no heading of docs/operations.md').toEqual([]);
    const links = [...runbooks.values()];
    expect(new Set(links).size, 'two alerts share a runbook heading').toBe(links.length);
    // The rules' table says what fires, not what to do.
    expect(links).not.toContain('docs/operations.md#alert-rules-of-the-host');
    expect(runbooks.get('StorageConsumerPauseForgotten')).toBe('docs/operations.md#a-forgotten-pause');
  });

  it('a link to a heading that is not there is caught', () => {
    const anchors = headingAnchors('# Operations\n\n```sh\n# not a heading\n```\n\n### A forgotten pause\n');
    expect(anchors.has('a-forgotten-pause')).toBe(true);
    expect(anchors.has('not-a-heading')).toBe(false);
    expect(alertRunbooks("  - alert: X\n    annotations:\n      runbook: 'docs/operations.md#gone'\n  - alert: Y\n")).toEqual(
      new Map([
        ['X', 'docs/operations.md#gone'],
        ['Y', undefined],
      ]),
    );
  });
});
