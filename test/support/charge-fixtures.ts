/** Request contents of the charge tests (issue 29): big, multi-script and schema-heavy prompts, built to a size. */

const WORDS = ['inventory', 'ledger', 'shipment', 'invoice', 'warehouse', 'supplier', 'quarterly', 'reconcile', 'forecast', 'pallet'];

/** ASCII prose of about `bytes` bytes. */
export function asciiText(bytes: number): string {
  const parts: string[] = [];
  let length = 0;
  for (let i = 0; length < bytes; i++) {
    const word = `${WORDS[i % WORDS.length]}${i % 7 === 6 ? '.' : ''} `;
    parts.push(word);
    length += word.length;
  }
  return parts.join('').slice(0, bytes);
}

/** `chars` CJK ideographs (3 UTF-8 bytes and about one token each). */
export function cjkText(chars: number): string {
  return Array.from({ length: chars }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 20_000))).join('');
}

/** Function tools with JSON schemas, about `bytes` bytes of JSON in all. */
export function toolsOfSize(bytes: number): unknown[] {
  const tool = (i: number) => ({
    type: 'function',
    function: {
      name: `lookup_record_${i}`,
      description: `Looks up record ${i} of the inventory service and returns its fields, its change history and its owners as JSON.`,
      parameters: {
        type: 'object',
        properties: {
          id: { type: 'string', description: 'The record identifier, as printed on the label of the pallet.' },
          include_history: { type: 'boolean', description: 'Whether to include the full change history of the record.' },
          region: { type: 'string', enum: ['eu-west', 'us-east', 'ap-south'], description: 'The region whose warehouse holds the record.' },
        },
        required: ['id'],
      },
    },
  });
  const each = JSON.stringify(tool(100)).length + 1;
  return Array.from({ length: Math.max(1, Math.round(bytes / each)) }, (_, i) => tool(i));
}
