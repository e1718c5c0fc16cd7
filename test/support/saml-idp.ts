import { randomBytes, webcrypto } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import * as x509 from '@peculiar/x509';
import { SignedXml } from 'xml-crypto';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

/** A signing identity: an RSA key and a self-signed certificate made for it, as an IdP's metadata would publish. */
export interface SamlSigner {
  keyPem: string;
  certPem: string;
}

export async function samlSigner(cn = 'test SAML IdP'): Promise<SamlSigner> {
  const alg = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 2048 };
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomBytes(8)
      .toString('hex')
      .replace(/^[89a-f]/, '1'),
    name: `CN=${cn}`,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 365 * 24 * 3600 * 1000),
    keys,
    signingAlgorithm: alg,
  });
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const keyPem = `-----BEGIN PRIVATE KEY-----\n${der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '')}\n-----END PRIVATE KEY-----\n`;
  return { keyPem, certPem: cert.toString('pem') };
}

/** What the service's AuthnRequest (HTTP-Redirect binding) asked for. */
export interface AuthnRequest {
  id: string;
  issuer: string;
  acsUrl: string;
  relayState: string | null;
}

export function readAuthnRequest(redirectUrl: string): AuthnRequest {
  const url = new URL(redirectUrl);
  const xml = inflateRawSync(Buffer.from(url.searchParams.get('SAMLRequest')!, 'base64')).toString('utf8');
  const attr = (name: string) => xml.match(new RegExp(`\\s${name}="([^"]*)"`))?.[1] ?? '';
  return {
    id: attr('ID'),
    acsUrl: attr('AssertionConsumerServiceURL'),
    issuer: xml.match(/<saml:Issuer[^>]*>([^<]*)</)?.[1] ?? '',
    relayState: url.searchParams.get('RelayState'),
  };
}

export interface AssertionOptions {
  email: string;
  audience: string;
  inResponseTo?: string;
  acsUrl: string;
  issuer?: string;
  /** Validity of the assertion relative to now, in seconds. */
  notBeforeSeconds?: number;
  notOnOrAfterSeconds?: number;
  /** The bearer confirmation's own NotOnOrAfter (default: the assertion's). */
  subjectNotOnOrAfterSeconds?: number;
  /** Put the email in an attribute (default) or only in the NameID. */
  emailAttribute?: boolean;
  /** Which parts carry a signature (default: the assertion). */
  sign?: { assertion?: boolean; response?: boolean };
}

const SIG_ALG = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256';
const DIGEST = 'http://www.w3.org/2001/04/xmlenc#sha256';
const EXC_C14N = 'http://www.w3.org/2001/10/xml-exc-c14n#';
const ENVELOPED = 'http://www.w3.org/2000/09/xmldsig#enveloped-signature';

function sign(xml: string, signer: SamlSigner, element: 'Assertion' | 'Response'): string {
  const sig = new SignedXml({
    privateKey: signer.keyPem,
    publicCert: signer.certPem,
    signatureAlgorithm: SIG_ALG,
    canonicalizationAlgorithm: EXC_C14N,
  });
  const path = element === 'Assertion' ? "//*[local-name(.)='Assertion']" : "/*[local-name(.)='Response']";
  sig.addReference({ xpath: path, transforms: [ENVELOPED, EXC_C14N], digestAlgorithm: DIGEST });
  // The signature goes right after the element's Issuer, where the SAML schema puts it.
  sig.computeSignature(xml, { location: { reference: `${path}/*[local-name(.)='Issuer']`, action: 'after' } });
  return sig.getSignedXml();
}

const xmlEscape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A SAML 2.0 Response with one assertion, signed as asked; base64 as the HTTP-POST binding carries it. */
export function samlResponse(signer: SamlSigner, o: AssertionOptions): { xml: string; base64: string } {
  const now = Date.now();
  const at = (s: number) => new Date(now + s * 1000).toISOString();
  const issuer = xmlEscape(o.issuer ?? 'https://idp.example.test/metadata');
  const inResponseTo = o.inResponseTo ? ` InResponseTo="${xmlEscape(o.inResponseTo)}"` : '';
  const notOnOrAfter = at(o.notOnOrAfterSeconds ?? 300);
  const subjectNotOnOrAfter = at(o.subjectNotOnOrAfterSeconds ?? o.notOnOrAfterSeconds ?? 300);
  const email = xmlEscape(o.email);
  const attributes =
    o.emailAttribute === false
      ? ''
      : `<saml:AttributeStatement><saml:Attribute Name="email" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:basic"><saml:AttributeValue>${email}</saml:AttributeValue></saml:Attribute></saml:AttributeStatement>`;
  const assertion =
    `<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_a${randomBytes(16).toString('hex')}" Version="2.0" IssueInstant="${at(0)}">` +
    `<saml:Issuer>${issuer}</saml:Issuer>` +
    `<saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">${email}</saml:NameID>` +
    `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData${inResponseTo} NotOnOrAfter="${subjectNotOnOrAfter}" Recipient="${xmlEscape(o.acsUrl)}"/></saml:SubjectConfirmation></saml:Subject>` +
    `<saml:Conditions NotBefore="${at(o.notBeforeSeconds ?? -60)}" NotOnOrAfter="${notOnOrAfter}"><saml:AudienceRestriction><saml:Audience>${xmlEscape(o.audience)}</saml:Audience></saml:AudienceRestriction></saml:Conditions>` +
    `<saml:AuthnStatement AuthnInstant="${at(0)}" SessionIndex="_s${randomBytes(8).toString('hex')}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>` +
    attributes +
    `</saml:Assertion>`;
  const signs = o.sign ?? { assertion: true };
  let xml =
    `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_r${randomBytes(16).toString('hex')}" Version="2.0" IssueInstant="${at(0)}" Destination="${xmlEscape(o.acsUrl)}"${inResponseTo}>` +
    `<saml:Issuer>${issuer}</saml:Issuer>` +
    `<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>` +
    assertion +
    `</samlp:Response>`;
  if (signs.assertion) xml = sign(xml, signer, 'Assertion');
  if (signs.response) xml = sign(xml, signer, 'Response');
  return { xml, base64: Buffer.from(xml).toString('base64') };
}

/**
 * A response that costs node-saml 40-120 ms before it refuses it ("Too many signatures"), within the
 * service's size bounds: 1,990 empty signature siblings. It names its request (InResponseTo is
 * checked first), as anyone who started a sign-in can.
 */
export function expensiveSamlResponse(requestId: string): string {
  return Buffer.from(
    `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" ID="_1" Version="2.0" InResponseTo="${requestId}">${'<ds:Signature/>'.repeat(1_990)}</samlp:Response>`,
  ).toString('base64');
}
