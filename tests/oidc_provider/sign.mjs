// Signs a token for the sign-in tests (tests/oidc_provider.py): stdin is {"claims": {...}, "jwk": the issuer's
// private key, or null for a key the issuer never published}; stdout is the JWS (RS256).
import { readFileSync } from "node:fs";
import { SignJWT, generateKeyPair, importJWK } from "jose";

const { claims, jwk } = JSON.parse(readFileSync(0, "utf8"));
const key = jwk ? await importJWK(jwk, "RS256") : (await generateKeyPair("RS256")).privateKey;
const kid = jwk ? jwk.kid : "a-key-the-issuer-never-published";
process.stdout.write(await new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid, typ: "JWT" }).sign(key));
