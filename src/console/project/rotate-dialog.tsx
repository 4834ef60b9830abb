import { useEffect, useRef, useState } from 'react';
import type { ApiKey } from '../api/types.js';

const MAX_GRACE_SECONDS = 604_800;

/** Rotation: a new secret now, the old one still accepted for the grace period (0: at once). */
export function RotateDialog({ apiKey, onRotate, onCancel }: { apiKey: ApiKey; onRotate: (graceSeconds: number) => void; onCancel: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [grace, setGrace] = useState('3600');
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    onRotate(Math.min(MAX_GRACE_SECONDS, Math.max(0, Math.floor(Number(grace) || 0))));
  };
  return (
    <dialog ref={ref} className="dialog" aria-labelledby="rotate-title" onCancel={onCancel}>
      <form onSubmit={submit}>
        <h2 id="rotate-title">Rotate key “{apiKey.name}”?</h2>
        <p>A new secret is made and shown once. The old one keeps working for the grace period, so clients can switch.</p>
        <div className="field">
          <label htmlFor="grace-seconds">Grace period in seconds (0 to {MAX_GRACE_SECONDS})</label>
          <input id="grace-seconds" type="number" min="0" max={MAX_GRACE_SECONDS} required value={grace} onChange={(event) => setGrace(event.target.value)} />
        </div>
        <div className="actions">
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
          <button type="submit" className="primary">
            Rotate key
          </button>
        </div>
      </form>
    </dialog>
  );
}
