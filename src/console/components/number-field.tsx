/** A labelled number input whose empty value means "none" (null). */
export function NumberField(props: { id: string; label: string; value: string; onChange: (value: string) => void; step?: string; disabled?: boolean }) {
  return (
    <div className="field">
      <label htmlFor={props.id}>{props.label}</label>
      <input
        id={props.id}
        type="number"
        min="0"
        step={props.step ?? '1'}
        inputMode="decimal"
        placeholder="none"
        value={props.value}
        disabled={props.disabled}
        onChange={(event) => props.onChange(event.target.value)}
      />
    </div>
  );
}

export const numberOrNull = (text: string): number | null => (text.trim() === '' ? null : Number(text));
export const textOf = (value: number | null | undefined): string => (value === null || value === undefined ? '' : String(value));
