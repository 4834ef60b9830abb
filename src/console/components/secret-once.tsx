import { useState } from 'react';

/** A new key's secret: shown this once (the gateway keeps only its hash), with a copy button. */
export function SecretOnce({ name, secret, onDone }: { name: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState<string | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied('Copied to the clipboard.');
    } catch {
      setCopied('The browser refused the clipboard: select the secret and copy it.');
    }
  };
  return (
    <section className="secret" aria-labelledby="secret-title">
      <h3 id="secret-title">Secret of key “{name}”</h3>
      <p>Copy it now: it is shown only this once and cannot be read again.</p>
      <label htmlFor="new-secret">Secret</label>
      <div className="row">
        <input id="new-secret" className="mono" readOnly value={secret} onFocus={(event) => event.currentTarget.select()} />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p role="status">{copied}</p>
      <button type="button" onClick={onDone}>
        I have stored it
      </button>
    </section>
  );
}
