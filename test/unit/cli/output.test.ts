import { describe, expect, it } from 'vitest';
import { renderJson, renderTable } from '../../../cli/output.js';
describe('output', () => {
  it('pads columns, aligns numbers right, shows absent values as -', () => {
    const text = renderTable(
      [
        { header: 'NAME', value: (row: { name: string; lag: bigint | null }) => row.name },
        { header: 'LAG', value: (row) => row.lag, align: 'right' },
      ],
      [
        { name: 'reviews', lag: 12345n },
        { name: 'app-stats', lag: null },
      ],
    );
    expect(text).toBe('NAME         LAG\nreviews    12345\napp-stats      -\n');
  });

  it('says (none) under the header of an empty table', () => {
    expect(renderTable([{ header: 'ID', value: (row: { id: string }) => row.id }], [])).toBe('ID\n(none)\n');
  });

  it('writes bigints as strings in JSON', () => {
    expect(JSON.parse(renderJson({ offset: 9007199254740993n }))).toEqual({ offset: '9007199254740993' });
  });
});
