import { createPrivateKey, X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { pluginCertificate } from '../../../src/provider/cert.js';

describe('the plugin certificate (go-plugin AutoMTLS)', () => {
  it('is a self-signed P-256 CA for localhost with server and client auth, matching its key', () => {
    const now = Date.UTC(2026, 0, 2, 3, 4, 5);
    const c = pluginCertificate(now);
    const x = new X509Certificate(c.certPem);
    expect(x.subject).toBe('O=HashiCorp\nCN=localhost');
    expect(x.issuer).toBe(x.subject);
    expect(x.ca).toBe(true);
    expect(x.subjectAltName).toBe('DNS:localhost');
    expect(x.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']);
    expect(x.publicKey.asymmetricKeyDetails).toMatchObject({ namedCurve: 'prime256v1' });
    expect(x.verify(x.publicKey)).toBe(true);
    expect(x.checkPrivateKey(createPrivateKey(c.keyPem))).toBe(true);
    expect(new Date(x.validFrom).getTime()).toBe(now - 30_000);
    expect(new Date(x.validTo).getTime()).toBe(now + 24 * 3600_000);
    // The handshake carries the DER, base64 without padding.
    expect(Buffer.from(c.certDerB64, 'base64').equals(x.raw)).toBe(true);
    expect(c.certDerB64).not.toMatch(/=$/);
    // A fresh key (and serial) each start.
    expect(new X509Certificate(pluginCertificate(now).certPem).serialNumber).not.toBe(x.serialNumber);
  });
});
