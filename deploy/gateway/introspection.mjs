// A real OpenID Connect provider (oidc-provider) that issues opaque
// access tokens and introspects them (RFC 7662), signed answers too
// (RFC 9701), and revokes them (RFC 7009): the issuer of plantstore's
// introspection end-to-end test (introspection_test.go, TEST_SOAK=1).
//
//   node introspection.mjs PORT KEYS.json    KEYS.json: {"keys": [JWK, ...]}
//
// The issuer is http://127.0.0.1:PORT. Clients, all with secret
// ci-secret: plantstore-ci gets tokens by client_credentials (scope
// plants:read, audience plantstore, sub its client_id), and revokes them
// at /token/revocation; plantstore is the resource server that asks
// about them at /token/introspection, its answers signed (RS256) when it
// asks for application/token-introspection+jwt.
import { readFile } from 'node:fs/promises';

const { default: Provider } = await import('oidc-provider');
const [arg1, arg2] = process.argv.slice(2);
const port = Number(arg1);
const jwks = JSON.parse(await readFile(arg2, 'utf8'));
const issuer = `http://127.0.0.1:${port}`;
const resource = 'https://plantstore.example';
const provider = new Provider(issuer, {
  jwks,
  clients: [
    {
      client_id: 'plantstore-ci', client_secret: 'ci-secret',
      grant_types: ['client_credentials'], response_types: [], redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic', scope: 'plants:read',
    },
    {
      client_id: 'plantstore', client_secret: 'ci-secret',
      grant_types: [], response_types: [], redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
      introspection_signed_response_alg: 'RS256',
    },
  ],
  scopes: ['plants:read'],
  // A client_credentials token names no user: its subject is its client
  // (as RFC 9068 §2.2 has it for JWTs), said in the introspection answer.
  extraTokenClaims: (ctx, token) => (token.kind === 'ClientCredentials' ? { sub: token.clientId } : undefined),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: () => true },
    jwtIntrospection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: 'plants:read',
        audience: 'plantstore',
        accessTokenTTL: 300,
        accessTokenFormat: 'opaque',
      }),
    },
  },
});
provider.listen(port, '127.0.0.1', () => console.log(`oidc-provider listening on ${issuer}`));
