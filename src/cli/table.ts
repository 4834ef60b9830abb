export type Cell = string | number | null | undefined;

/**
 * A plain text table: a header row, aligned columns, numbers right-aligned. A row given as
 * a string is a note printed as is across the columns (a fold of rows left out, say); it
 * takes no part in the widths or the alignment.
 */
export function renderTable(headers: string[], rows: (Cell[] | string)[]): string {
  const cellRows = rows.filter((row): row is Cell[] => typeof row !== 'string');
  const text = (row: Cell[]) => row.map((cell) => (cell === null || cell === undefined ? '-' : String(cell)));
  const numeric = headers.map((_, column) => cellRows.length > 0 && cellRows.every((row) => typeof row[column] === 'number'));
  const widths = headers.map((header, column) => Math.max(header.length, ...cellRows.map((row) => text([row[column]])[0]!.length)));
  const line = (row: string[]) =>
    row
      .map((cell, column) => (numeric[column] ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)))
      .join('  ')
      .trimEnd();
  const body = rows.map((row) => (typeof row === 'string' ? row : line(text(row))));
  return [line(headers), line(widths.map((width) => '-'.repeat(width))), ...body].join('\n') + '\n';
}
