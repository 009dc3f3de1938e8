// A real OpenID Connect provider (the oidc-provider package, a certified implementation) for the sign-in tests
// (tests/oidc_provider.py starts it on loopback and stops it by its process id). Its settings come from the
// environment: PORT, CLIENT_ID, CLIENT_SECRET, REDIRECT_URIS (comma-separated), KEYS_FILE (where its signing key,
// private, is written, so that a test can sign a token with the issuer's own key: expired, another audience...).
// Any login name signs in (its development login form); the account's `sub` is the name and, for a name with an
// @, its `email` too. Consent is given for the app at once (a first-party client), as an owner's IdP would.
import { writeFileSync } from "node:fs";
import { exportJWK, generateKeyPair } from "jose";
import Provider from "oidc-provider";

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const { privateKey } = await generateKeyPair("RS256", { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: "issuer-key-1", alg: "RS256", use: "sig" };
writeFileSync(process.env.KEYS_FILE, JSON.stringify(jwk));

const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.CLIENT_ID,
    client_secret: process.env.CLIENT_SECRET,
    redirect_uris: process.env.REDIRECT_URIS.split(","),
    grant_types: ["authorization_code", "client_credentials"],
    response_types: ["code"],
  }],
  jwks: { keys: [jwk] },
  cookies: { keys: ["tests-only-cookie-key"] },
  claims: { openid: ["sub"], email: ["email", "email_verified"] },
  conformIdTokenClaims: false, // the email in the ID token, as Entra ID, Google and Okta put it
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    // Access tokens as JWTs for one API audience (an app's OIDC_AUDIENCES), as an IdP's API scopes give them.
    resourceIndicators: {
      enabled: true,
      defaultResource: () => "https://agent.test/api",
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({ scope: "agent", audience: "https://agent.test/api", accessTokenFormat: "jwt" }),
    },
  },
  async findAccount(ctx, id) {
    return { accountId: id, claims: async () => (id.includes("@") ? { sub: id, email: id, email_verified: true } : { sub: id }) };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope("openid email");
    grant.addOIDCClaims(["email", "email_verified"]);
    await grant.save();
    return grant;
  },
  pkce: { required: () => true },
});
provider.listen(port, "127.0.0.1", () => console.log(`issuer ${issuer}`));
